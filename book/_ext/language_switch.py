"""Sphinx extension: the book in two languages, each page linking to itself in the other.

The English book is built at the site's root and the Chinese one under zh/ (the Makefile's
`site` target: the same sources, with `language = "zh_CN"` and the catalogues of locales/).
Each page opens with a link to the same page in the other language (`<link rel="alternate"
hreflang>` in its head too); clicked, it leads to the section the reader was reading
(book/_static/language_switch.js: both books give a section the same anchor). A Chinese page whose catalogue is not wholly translated (a message
left empty or marked fuzzy) says so in one line, in Chinese, above its English text.

The part names of the table of contents (_toc.yml's captions) are not in any page's
catalogue: the Chinese build takes them from locales/zh_CN/LC_MESSAGES/_toc.po.

A translated paragraph keeps each of its links' own targets. Sphinx gives a translated link the
attributes of the English paragraph's link to the same page, matched by page alone, so that
without `keep_link_anchors` every glossary link of a paragraph ("[编码器](glossary.md#encoder)
… [解码器](glossary.md#decoder)") would lead to the row of its last one.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from babel.messages.pofile import read_po
from sphinx import addnodes
from sphinx.transforms import i18n

ZH = "zh_CN"
ZH_FOLDER = "zh/"
UNTRANSLATED_NOTE = "本页尚未全部译成中文，未译的段落以英文显示。"


# a line of a .po file: blank, a comment, a keyword and its string, or a string going on;
# every string closed on its own line (babel and polib read an unclosed one silently, a
# character short)
_STRING = r'"(?:[^"\\]|\\.)*"'
_PO_LINE = re.compile(
    rf'\s*(#.*|(msgctxt|msgid|msgid_plural|msgstr(\[\d+\])?)\s+{_STRING}|{_STRING})?\s*'
)


def syntax_errors(text: str) -> list[int]:
    "The numbers of the lines of a catalogue's text that are not .po syntax."
    return [i for i, line in enumerate(text.splitlines(), 1)
            if not _PO_LINE.fullmatch(line)]


def check_catalogues(app) -> None:
    "Stop the Chinese build at a catalogue that is not UTF-8 or not .po syntax, named."
    if app.config.language != ZH:
        return
    folder = Path(app.srcdir, app.config.locale_dirs[0], ZH, "LC_MESSAGES")
    bad = []
    for po in sorted(folder.rglob("*.po")):
        try:
            lines = syntax_errors(po.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            bad.append(f"{po}: {e}")
            continue
        bad += [f"{po}:{n}: not .po syntax (a string not closed?)" for n in lines[:3]]
    if bad:
        from sphinx.errors import ExtensionError
        raise ExtensionError("catalogues that cannot be read:\n" + "\n".join(bad))


def blank(text: str) -> bool:
    "A translation of nothing but spaces is none: the page would show the English."
    return not text.strip()


@lru_cache(maxsize=None)
def untranslated(po: Path) -> int:
    "How many messages of a catalogue have no translation or a fuzzy one (all, if no file)."
    if not po.exists():
        return -1
    with po.open("rb") as f:
        catalog = read_po(f)
    return sum(1 for m in catalog if m.id and (blank(m.string) or m.fuzzy))


def catalogue(app, pagename: str) -> Path:
    "The .po file of a page: locales/zh_CN/LC_MESSAGES/<page>.po."
    locales = Path(app.srcdir, app.config.locale_dirs[0])
    return locales / ZH / "LC_MESSAGES" / f"{pagename}.po"


def add_switch(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    if doctree is None or "body" not in context:   # search, genindex: generated pages
        return
    up = "../" * pagename.count("/")
    if app.config.language == ZH:
        href, hreflang, text = f"{up}../{pagename}.html", "en", "English"
    else:
        href, hreflang, text = f"{up}{ZH_FOLDER}{pagename}.html", "zh-CN", "中文"
    switch = (f'<p class="language-switch"><a href="{href}" hreflang="{hreflang}" '
              f'lang="{hreflang}">{text}</a></p>\n')
    note = ""
    if app.config.language == ZH and untranslated(catalogue(app, pagename)):
        note = f'<p class="untranslated-note">{UNTRANSLATED_NOTE}</p>\n'
    context["body"] = switch + note + context["body"]
    context["metatags"] = context.get("metatags", "") + (
        f'\n<link rel="alternate" hreflang="{hreflang}" href="{href}">')


TOC_CATALOGUE = "_toc"   # the part names' catalogue, beside the pages'


@lru_cache(maxsize=None)
def _catalogue_strings(po: Path) -> dict[str, str]:
    if not po.exists():
        return {}
    with po.open("rb") as f:
        return {m.id: m.string for m in read_po(f)
                if m.id and not blank(m.string) and not m.fuzzy}


def translate_parts(app, doctree) -> None:
    "In the Chinese book, the captions of the table of contents' parts, translated."
    if app.config.language != ZH:
        return
    names = _catalogue_strings(catalogue(app, TOC_CATALOGUE))
    for toctree in doctree.findall(addnodes.toctree):
        if toctree.get("caption") in names:
            toctree["caption"] = names[toctree["caption"]]


def keep_heading_slugs(app, doctree) -> None:
    """The page's heading anchors stay those of its English headings. Sphinx parses a
    translated heading as a small document of its own (the text underlined with '='),
    and MyST then records that one heading's anchor as all the page's: the links into
    the page (05_norms.ipynb#the-residual-connection) found nothing."""
    slugs = getattr(doctree, "myst_slugs", None)
    if slugs:
        app.env.metadata[app.env.docname]["myst_slugs"] = slugs


def keep_link_anchors() -> None:
    "A translated link keeps its own anchor (MyST's `reftargetid`), not the English one's."
    excluded = i18n.EXCLUDED_PENDING_XREF_ATTRIBUTES   # Sphinx 7: ('refexplicit',)
    if "reftargetid" not in excluded:
        i18n.EXCLUDED_PENDING_XREF_ATTRIBUTES = (*excluded, "reftargetid")


def setup(app):
    keep_link_anchors()
    app.connect("builder-inited", check_catalogues)
    app.connect("html-page-context", add_switch)
    app.add_js_file("language_switch.js", defer="defer")   # the switch keeps the section
    app.connect("doctree-read", translate_parts)
    app.connect("doctree-read", keep_heading_slugs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
