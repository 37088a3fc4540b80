"""The Chinese edition (issue 49): its catalogues are complete on the reader's path and use the
glossary's terms, and each built Chinese page has the English page's code, translated prose.

The pages are read from the built site (_build/html and _build/html/zh, `make book`); the
browser checks of every page, in both languages, are in test_book.py.
"""
from __future__ import annotations

import re
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import translations  # noqa: E402

HTML = ROOT / "_build" / "html"
CJK = re.compile(r"[\u3400-\u9fff]")
LATIN_WORD = re.compile(r"\b[A-Za-z][a-z]+\b")
# The glossary's term column stays English in both books: its rows' anchors come from it.
GLOSSARY_TERMS = {line.split("|")[1].strip().replace("`", "")
                  for line in (ROOT / "book" / "glossary.md").read_text().splitlines()
                  if line.startswith("|")}


class Article(HTMLParser):
    "The code of a page's input cells and the text of its prose paragraphs (not in outputs)."

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, str]] = []
        self.code: list[str] = []
        self.paragraphs: list[str] = []
        self.links: list[str] = []
        self._buf: list[str] | None = None
        self._kind = ""

    def _inside(self, cls: str) -> bool:
        return any(cls in c.split() for _, c in self.stack)

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "img", "hr", "meta", "link", "input", "wbr"):
            return
        cls = dict(attrs).get("class") or ""
        self.stack.append((tag, cls))
        if (tag == "a" and self._inside("bd-article") and not self._inside("language-switch")
                and (href := dict(attrs).get("href"))):
            self.links.append(href)
        if self._buf is None and tag == "pre" and self._inside("cell_input"):
            self._buf, self._kind = [], "code"
        elif (self._buf is None and tag == "p" and self._inside("bd-article")
              and not self._inside("cell_output") and not self._inside("language-switch")
              and "language-switch" not in cls and "untranslated-note" not in cls):
            self._buf, self._kind = [], "p"

    def handle_startendtag(self, tag, attrs):   # <br/>, <path/>: nothing to close
        pass

    def handle_endtag(self, tag):
        if tag not in (t for t, _ in self.stack):   # a stray end tag closes nothing
            return
        while self.stack:
            open_tag, _ = self.stack.pop()
            if self._buf is not None and open_tag == ("pre" if self._kind == "code" else "p"):
                text = "".join(self._buf)
                (self.code if self._kind == "code" else self.paragraphs).append(text)
                self._buf = None
            if open_tag == tag:
                break

    def handle_data(self, data):
        if self._buf is not None and not self._inside("math") and not (
                self._kind == "p" and any(t == "code" for t, _ in self.stack)):
            self._buf.append(data)


def article(path: Path) -> Article:
    parsed = Article()
    parsed.feed(path.read_text(encoding="utf-8"))
    return parsed


def test_reader_path_catalogues_are_complete():
    "No message of the reader's path (or a 'What to remember') is empty or fuzzy."
    missing = {page: len(translations.missing(translations.required(page, po)))
               for page, po in translations.catalogues().items()}
    assert set(translations.required_pages()) <= set(missing), "a page has no catalogue"
    assert not {p: n for p, n in missing.items() if n}, "run make translations, then translate"


def test_translations_use_the_glossary_terms():
    "Where the English uses a glossary term, the Chinese uses the glossary's Chinese for it."
    misses = [m for page, po in translations.catalogues().items()
              if page in translations.required_pages()
              for m in translations.term_misses(page, po)]
    assert not misses, "\n".join(misses[:20])


def test_every_page_uses_the_glossary_terms():
    """Beyond the reader's path too (issue 60 item 5): every catalogue but the references',
    whose entries keep the papers' English titles."""
    misses = [m for page, po in translations.catalogues().items()
              if page != "book/references" for m in translations.term_misses(page, po)]
    assert not misses, "\n".join(misses[:20])


def test_term_check_catches_a_miss():
    "The term check is not vacuous: an English 'dropout' translated without 暂退法 is caught."
    import polib
    po = polib.POFile()
    po.append(polib.POEntry(msgid="We apply dropout here.", msgstr="这里我们使用随机丢弃。"))
    po.append(polib.POEntry(msgid="We apply dropout here too.", msgstr="这里也用暂退法。"))
    # a name inside a LaTeX macro (a display-math message) is math, not prose
    po.append(polib.POEntry(msgid=r"\mathrm{FFN}(x) = \mathrm{Dropout}(x)",
                            msgstr=r"\mathrm{FFN}(x) = \mathrm{Dropout}(x)"))
    assert len(translations.term_misses("nbs/07_encoder", po)) == 1


def formulas(path: Path) -> set[str]:
    "The TeX of every formula on a page, as Sphinx writes it for MathJax (spaces folded)."
    tag = r'<(?:span|div) class="math notranslate nohighlight">(.*?)</(?:span|div)>'
    return {" ".join(tex.split())
            for tex in re.findall(tag, path.read_text(encoding="utf-8"), re.S)}


def built_pages() -> list[str]:
    "Every page of the book, as the table of contents lists them."
    sys.path.insert(0, str(ROOT / "tests"))
    from test_book import PAGES
    return PAGES


@pytest.mark.browser
@pytest.mark.parametrize("page", built_pages())
def test_chinese_page_has_the_same_code_and_translated_prose(page):
    """Every Chinese page has the English page's code cells, math and links (in the order
    Chinese puts them), and a link back to the English; on the reader's path no paragraph
    is left in English, elsewhere an untranslated page says so."""
    en, zh = HTML / f"{page}.html", HTML / "zh" / f"{page}.html"
    if not zh.exists():
        pytest.fail(f"no built Chinese page {zh}: run make book")
    a, b = article(en), article(zh)
    assert b.code == a.code, f"{page}: the Chinese page's code differs from the English"
    # the same formulas (a translation may name one twice where English says "one")
    fa, fb = formulas(en), formulas(zh)
    assert fa == fb, f"{page}: formulas only in English {fa - fb}, only in Chinese {fb - fa}"
    # a diagram is linked as its Chinese drawing on the Chinese page (NAME.zh_CN.svg)
    zh_links = [link.replace(".zh_CN.svg", ".svg") for link in b.links]
    lost, gained = Counter(a.links) - Counter(zh_links), Counter(zh_links) - Counter(a.links)
    assert a.links and not lost and not gained, \
        f"{page}: links only in English {list(lost)[:4]}, only in Chinese {list(gained)[:4]}"
    html = zh.read_text(encoding="utf-8")
    back = "../" * page.count("/") + f"../{page}.html"
    assert f'<p class="language-switch"><a href="{back}"' in html, f"{page}: no English link"
    english = [p for p in b.paragraphs
               if len(LATIN_WORD.findall(p)) >= 5 and not CJK.search(p)
               and p.strip() not in GLOSSARY_TERMS]
    if page in translations.required_pages():
        assert not english, f"{page}: paragraphs left in English: {english[:3]}"
    elif english and page != "book/references":   # citations keep their own language
        assert 'class="untranslated-note"' in html, f"{page}: English left, and no note"


def test_every_part_of_the_contents_has_its_chinese_name():
    "The captions of _toc.yml are in no page's catalogue: locales/zh_CN/LC_MESSAGES/_toc.po."
    import polib
    import yaml
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    captions = [part["caption"] for part in toc["parts"]]
    po = polib.pofile(str(translations.LOCALE / "_toc.po"))
    names = {e.msgid: e.msgstr for e in po if e.msgstr and "fuzzy" not in e.flags}
    assert captions and not [c for c in captions if not CJK.search(names.get(c, ""))]


@pytest.mark.browser
def test_the_chinese_contents_name_their_parts_in_chinese():
    "The sidebar of a Chinese page shows the part names of _toc.po, and MyST-NB's buttons."
    html = (HTML / "zh" / "nbs" / "01_overview.html").read_text(encoding="utf-8")
    parts = re.findall(r'<span class="caption-text">([^<]*)</span>', html)
    assert parts and all(CJK.search(p) for p in parts), parts
    assert "显示代码" in html and "Show code cell" not in html


def test_bold_and_italic_survive_translation():
    "CommonMark reads `它的**[查询](x)**` as text, asterisks and all: a space is needed."
    misses = [m for page, po in translations.catalogues().items()
              for m in translations.broken_emphasis(page, po)]
    assert not misses, "\n".join(misses[:20])
    import polib
    po = polib.POFile()
    po.append(polib.POEntry(msgid="its **[query](q)**, its key", msgstr="它的**[查询](q)**，它的键"))
    po.append(polib.POEntry(msgid="its **[query](q)**, its key", msgstr="它的 **[查询](q)**，它的键"))
    assert len(translations.broken_emphasis("nbs/03_attention", po)) == 1


def page_text(path: Path) -> str:
    "A page's article text, tags dropped."
    html = path.read_text(encoding="utf-8")
    main = html[html.index('<article class="bd-article"'):html.index("</article>")]
    return re.sub(r"<[^>]+>", " ", re.sub(r"(?s)<(script|style).*?</\1>", "", main))
