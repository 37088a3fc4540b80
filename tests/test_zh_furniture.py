"""The Chinese book's furniture (issue 60, item 3): the site title, the themes' buttons and
tooltips, the exported cells' labels and the footer in Simplified Chinese (mainland usage),
and a language switch that keeps the reader's section. Read from the built site (`make
book`); the English book keeps its English."""
from __future__ import annotations

import re
import sys

import pytest
import test_book
from test_book import HTML, ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import zh_furniture  # noqa: E402

browser, server = test_book.browser, test_book.server   # the book's fixtures, shared
ZH = HTML / "zh"
PAGES = ["book/intro", "nbs/03_attention", "nbs/16_inference", "nbs/36_validate"]
ENGLISH_CHROME = ["Print to PDF", "Launch on", "Toggle primary sidebar", "Color mode",
                  "Link to this heading", "Search this book", "exported to", "© Copyright",
                  "Download source file", "Fullscreen mode"]
_ATTRS = re.compile(r'\b(?:title|aria-label|data-bs-title|placeholder)="([^"]*)"')


def built(path) -> str:
    if not path.exists():
        pytest.fail(f"no built book at {path}: run `make book` first")
    return path.read_text(encoding="utf-8")


def chrome(html: str) -> str:
    "A page without its article: what the themes put around the text."
    return re.sub(r"<article.*?</article>", "", html, flags=re.S)


@pytest.mark.parametrize("page", PAGES)
def test_the_chinese_pages_furniture_is_chinese(page):
    html = built(ZH / f"{page}.html")
    assert "<title>" in html and zh_furniture.TITLE in html.split("</title>")[0]
    attributes = " | ".join(_ATTRS.findall(html))
    left = [w for w in ENGLISH_CHROME if w in attributes or w in chrome(html)]
    assert not left, f"{page}: English furniture {left}"
    assert "列印" not in html and "打印为 PDF" in html
    assert "在 Colab 中打开" in html or "nbs/" not in page
    assert zh_furniture.AUTHOR in html and "版权所有" in html


def test_the_exported_cells_are_labelled_in_chinese():
    html = built(ZH / "nbs/03_attention.html")
    labels = re.findall(r'<p class="nbdev-export-label">([^<]*)<', html)
    assert labels and set(labels) == {"导出到 "}


def test_the_english_book_keeps_its_english():
    html = built(HTML / "nbs/03_attention.html")
    assert "Print to PDF" in html and "exported to " in html and "Launch on Colab" in html
    assert zh_furniture.TITLE not in html and "版权所有" not in html


def test_the_attribute_pass_translates_only_what_it_knows():
    html = ('<button title="Toggle primary sidebar" aria-label="Main" data-x="Main">'
            '<a title="An English title of ours">© Copyright 2026.</a>')
    assert zh_furniture.translate_attributes(html) == (
        '<button title="显示或隐藏左侧栏" aria-label="主导航" data-x="Main">'
        '<a title="An English title of ours">© 2026 版权所有</a>')


def test_our_theme_catalogue_translates_every_message_the_theme_asks_for():
    "Every translation() the theme's Python calls has an entry, none left English."
    import sphinx_book_theme
    from babel.messages.pofile import read_po
    from pathlib import Path
    source = "".join(p.read_text() for p in
                     Path(sphinx_book_theme.__file__).parent.rglob("*.py"))
    asked = set(re.findall(r'translation\("([^"]+)"\)', source))
    with (ROOT / zh_furniture.OURS / "zh_CN" / "LC_MESSAGES" / "booktheme.po").open("rb") as f:
        ours = {m.id: m.string for m in read_po(f) if m.id}
    assert asked and asked <= set(ours), asked - set(ours)
    assert all(re.search(r"[\u4e00-\u9fff]", ours[m]) for m in asked)


@pytest.mark.browser
def test_the_language_switch_keeps_the_readers_section(browser, server):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server}/zh/nbs/03_attention.html", wait_until="load")
    sections = page.eval_on_selector_all("main section[id]", "s => s.map(x => x.id)")
    target = sections[len(sections) // 2]
    page.evaluate("id => document.getElementById(id).scrollIntoView()", target)
    # a click where the reader sees the button, in the header bar (page.click would first
    # scroll it "into view", moving the page as a reader does not)
    box = page.evaluate("() => { const r = document.querySelector("
                        "'a.language-switch-button').getBoundingClientRect();"
                        " return [r.left + r.width / 2, r.top + r.height / 2]; }")
    assert 0 <= box[1] <= 100, box   # in view at the top of the window
    page.mouse.click(*box)
    page.wait_for_url(re.compile(r".*/nbs/03_attention\.html#.*"))
    assert page.url.endswith(f"/nbs/03_attention.html#{target}")
    assert "/zh/" not in page.url
    assert page.evaluate("id => !!document.getElementById(id)", target)
    # at the page's top, the switch leads to the page itself, no section
    page.goto(f"{server}/nbs/03_attention.html", wait_until="load")
    page.click("p.language-switch a")
    page.wait_for_url(re.compile(r".*/zh/nbs/03_attention\.html$"))
    page.close()
