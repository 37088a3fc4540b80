"""Issue 60: every translated heading of the Chinese book is shown translated.

39 headings kept their English on 20 pages (most exercises' titles, the ten sections of
the chapter on mistakes): a translation that starts "1. " parses as a list, and Sphinx
then drops it without a word. book/_ext/translation_markers.py escapes such a start when
the book is built. Here a small book is built with and without it (the cause, and its
cure, whatever the catalogues write), and each built Chinese page (_build/html/zh,
`make book`) is compared, heading by heading, with the English page and its catalogue.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import translations  # noqa: E402

HTML = ROOT / "_build" / "html"


class Headings(HTMLParser):
    "The text of each h1-h6 of a page's article, without its ¶ link."

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._buf: list[str] | None = None
        self._skip = 0   # inside the heading's link to itself

    def handle_starttag(self, tag, attrs):
        if re.fullmatch(r"h[1-6]", tag):
            self._buf = []
        elif self._buf is not None and tag == "a" and "headerlink" in (
                dict(attrs).get("class") or ""):
            self._skip = 1
        elif self._skip:
            self._skip += 1

    def handle_endtag(self, tag):
        if self._skip:
            self._skip -= 1
        elif re.fullmatch(r"h[1-6]", tag) and self._buf is not None:
            self.found.append(" ".join("".join(self._buf).split()))
            self._buf = None

    def handle_data(self, data):
        if self._buf is not None and not self._skip:
            self._buf.append(data)


def article_headings(html: str) -> list[str]:
    "The headings of a page's article (not the theme's sidebars)."
    if '<article class="bd-article"' in html:
        html = html[html.index('<article class="bd-article"'):html.index("</article>")]
    parser = Headings()
    parser.feed(html)
    return parser.found


TYPOGRAPHY = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "…": "...",
                            "–": "--", "—": "---", "\u00a0": " "})


def key(text: str) -> str:
    "A heading as text: what a message's Markdown and the page's HTML both come to."
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)   # links: their text
    text = re.sub(r"\{[\w:-]+\}`([^`]*)`", r"\1", text)        # roles: their text
    text = re.sub(r"\$([^$]+)\$", r"\\(\1\\)", text)   # math as Sphinx writes it
    text = text.replace("`", "").replace("**", "")
    text = re.sub(r"(?<![\w*])\*(\S[^*]*?)\*(?![\w*])", r"\1", text)
    text = re.sub(r"\\(.)", r"\1", text.translate(TYPOGRAPHY))
    return " ".join(text.split())


def heading_misses(page: str, english: list[str], chinese: list[str],
                   po) -> tuple[list[str], int]:
    """The headings of a Chinese page not shown as its catalogue translates them
    (position by position against the English page), and how many had a translation
    to compare."""
    translated = {key(e.msgid): key(e.msgstr) for e in po
                  if e.msgstr.strip() and "fuzzy" not in e.flags and not e.obsolete}
    if len(english) != len(chinese):
        return [f"{page}: {len(english)} headings in English, "
                f"{len(chinese)} in Chinese"], 0
    misses, compared = [], 0
    for en, zh in zip(english, chinese):
        want = translated.get(key(en))
        if want is None:   # no translation: the English stays
            want = key(en)
        else:
            compared += 1
        if key(zh) != want:
            misses.append(f"{page}: {zh!r} shown, {want!r} wanted")
    return misses, compared


def toc_pages() -> list[str]:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_book import PAGES
    return PAGES


@pytest.mark.browser
def test_every_translated_heading_is_shown_translated():
    """Each Chinese page's headings are its catalogue's translations of the English
    page's headings, in order; those the catalogue lacks stay English. Headings with
    code, math, links or quotes are compared too (their Markdown taken to text)."""
    if not (HTML / "zh" / "index.html").exists():
        pytest.fail("no built book at _build/html: run `make book` first")
    catalogues = translations.catalogues()
    misses, compared, total = [], 0, 0
    for page in toc_pages():
        if page not in catalogues:
            continue
        if not (HTML / "zh" / f"{page}.html").exists():
            misses.append(f"{page}: not built (run `make book`)")
            continue
        english = article_headings((HTML / f"{page}.html").read_text(encoding="utf-8"))
        chinese = article_headings(
            (HTML / "zh" / f"{page}.html").read_text(encoding="utf-8"))
        page_misses, n = heading_misses(page, english, chinese, catalogues[page])
        misses += page_misses
        compared, total = compared + n, total + len(english)
    assert not misses, \
        f"{len(misses)} headings not shown translated:\n" + "\n".join(misses)
    # not vacuous: almost every heading of the book is found in its catalogue
    assert total > 300 and compared >= 0.9 * total, (compared, total)


def test_heading_keys_match_markdown_and_html():
    "The key of a message's Markdown is that of the HTML Sphinx makes of it."
    pairs = [("Step 3: the weighted sum of values, and $W^O$",
              r"Step 3: the weighted sum of values, and \(W^O\)"),
             ("Deeper: proven equal to `torch.nn.Transformer`",
              "Deeper: proven equal to torch.nn.Transformer"),
             ("13 · Training: the paper's recipe", "13 · Training: the paper’s recipe"),
             ("1\\. 你自己的预设", "1. 你自己的预设"),
             ("[Common mistakes](33_mistakes.ipynb) -- *all* of them",
              "Common mistakes – all of them")]
    assert all(key(md) == key(html) for md, html in pairs), \
        [(key(md), key(html)) for md, html in pairs if key(md) != key(html)]


# A small book: a notebook's headings and paragraphs, and translations that start like a
# list, a heading or a quote (and one already escaped).
MESSAGES = {
    "The page": "本页",
    "1. First step": "1. 第一步",
    "2) Second step": "2) 第二步",
    "Third step": "3\\. 第三步",
    "A bullet": "- 连字号开头",
    "A star": "* 星号开头",
    "A hash": "# 井号开头",
    "A hash in a paragraph.": "# 井号开头的一段话。",
    "A quote": "> 引号开头",
    "Step four, a paragraph.": "4. 第四步，一段话。",
    "A plain paragraph.": "一段普通的话。",
}
SOURCE = ["# The page", "## 1. First step", "## 2) Second step", "## Third step",
          "## A bullet", "## A star", "## A hash", "## A quote",
          "Step four, a paragraph.", "A hash in a paragraph.", "A plain paragraph."]


def quote(text: str) -> str:
    "A .po file's string: quoted and escaped as C (and JSON) write it."
    return json.dumps(text, ensure_ascii=False)


def build_small_book(folder: Path, extensions: list[str]) -> str:
    "The HTML of the small book's page, built in Chinese with the given extensions."
    (folder / "conf.py").write_text(
        f"extensions = {['myst_nb', *extensions]!r}\nlanguage = 'zh_CN'\n"
        "locale_dirs = ['locales']\ngettext_compact = False\n"
        "nb_execution_mode = 'off'\n"
        "exclude_patterns = ['_build', 'locales']\n", encoding="utf-8")
    cells = [{"cell_type": "markdown", "id": f"c{i}", "metadata": {}, "source": [text]}
             for i, text in enumerate(SOURCE)]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (folder / "index.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    catalogue = folder / "locales" / "zh_CN" / "LC_MESSAGES" / "index.po"
    catalogue.parent.mkdir(parents=True, exist_ok=True)
    catalogue.write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        + "".join(f"msgid {quote(en)}\nmsgstr {quote(zh)}\n\n"
                  for en, zh in MESSAGES.items()), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "book" / "_ext"))
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", str(folder),
                    str(folder / "_build")], check=True, env=env, capture_output=True)
    return (folder / "_build" / "index.html").read_text(encoding="utf-8")


def shown(html: str) -> tuple[list[str], list[str]]:
    "The headings and paragraphs of the small book's page."
    body = html[html.index('<article class="bd-article"'):html.index("</article>")] \
        if '<article class="bd-article"' in html else html
    body = body[body.index("<h1"):].split('<div class="sphinxsidebar"')[0]
    paragraphs = [" ".join(re.sub(r"<[^>]+>", "", p).split())
                  for p in re.findall(r"(?s)<p>(.*?)</p>", body)]
    return article_headings(body), paragraphs


def test_a_translation_that_starts_like_a_list_is_shown(tmp_path):
    "Without the extension Sphinx shows such headings in English; with it, translated."
    wanted = [key(MESSAGES[key(s.lstrip("# "))]) for s in SOURCE]
    (tmp_path / "without").mkdir()
    headings, paragraphs = shown(build_small_book(tmp_path / "without", []))
    # the cause: a translation that starts "1. " or "2) " is dropped (the one escaped
    # "3\\. " is not); the others that start like a block are dropped or garbled
    assert headings[1:4] == ["1. First step", "2) Second step", "3. 第三步"], headings
    assert paragraphs[:2] == ["Step four, a paragraph.", "A hash in a paragraph."]
    assert headings[4:6] == ["A bullet", "A star"] and headings[7] != "> 引号开头"
    (tmp_path / "with").mkdir()
    headings, paragraphs = shown(build_small_book(tmp_path / "with",
                                                  ["translation_markers"]))
    assert headings + paragraphs == wanted, (headings, paragraphs)


def test_escape_marker():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from translation_markers import escape_marker
    cases = {"1. 第一步": "1\\. 第一步", "12) 步": "12\\) 步",
             "1\\. 已转义": "1\\. 已转义", "- 项": "\\- 项", "* 项": "\\* 项",
             "+ 项": "\\+ 项", "## 一段": "\\## 一段",
             "## 标题\n======": "\\## 标题\n======", "1. 标题\n===": "1\\. 标题\n===",
             "> 引": "\\> 引", "1.5 倍": "1.5 倍", "2024 年": "2024 年",
             "*强调*的话": "*强调*的话", "#号": "#号", "-1 是": "-1 是",
             "::\n\n   1. 代码": "::\n\n   1. 代码"}
    assert {s: escape_marker(s) for s in cases} == cases
