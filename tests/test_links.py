"""Every internal link of the built book resolves: each href to a local page names a file
that exists, and each #anchor names an element id on that page (or the page itself)."""
from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.browser   # needs the built book: runs after `make book`
HTML = Path(__file__).resolve().parents[1] / "_build" / "html"


class Page(HTMLParser):
    "The ids a page defines and the hrefs it links to."

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for key in ("id", "name"):
            if found.get(key):
                self.ids.add(found[key])
        if tag == "a" and found.get("href"):
            self.hrefs.append(found["href"])


def read(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def book_pages() -> list[Path]:
    # the book's own pages: Sphinx's generated search and index pages and the
    # notebooks' downloads are left out
    skip = {"search.html", "genindex.html", "py-modindex.html"}
    return sorted(p for p in HTML.rglob("*.html") if p.name not in skip
                  and "_static" not in p.parts and "_sources" not in p.parts)


def broken_links(pages: list[Path]) -> list[str]:
    "Each internal link whose page or anchor is missing, as 'page: href'."
    parsed = {p: read(p) for p in pages}
    broken = []
    for page, content in parsed.items():
        for href in content.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
                continue   # external: not ours to check offline
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(HTML)}: {href} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else read(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(HTML)}: {href} (no such anchor)")
    return broken


def test_the_checker_finds_a_broken_anchor_and_a_missing_page(tmp_path):
    (tmp_path / "a.html").write_text('<h1 id="top">A</h1><a href="b.html#nowhere">x</a>'
                                     '<a href="#top">y</a><a href="c.html">z</a>'
                                     '<a href="https://example.org/#x">w</a>')
    (tmp_path / "b.html").write_text('<p id="here">B</p>')
    global HTML
    saved, HTML = HTML, tmp_path
    try:
        found = broken_links([tmp_path / "a.html", tmp_path / "b.html"])
    finally:
        HTML = saved
    assert found == ["a.html: b.html#nowhere (no such anchor)",
                     "a.html: c.html (no such file)"]


def test_every_internal_link_resolves():
    if not (HTML / "index.html").exists():
        pytest.fail("no built book at _build/html: run `make book` first")
    broken = broken_links(book_pages())
    assert not broken, f"{len(broken)} broken internal links:\n" + "\n".join(broken[:40])
