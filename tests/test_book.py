"""Browser test: serve the built book on 127.0.0.1 and look at every page in headless Chromium."""
from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import threading
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
SHOT_TILE = 12_000   # px: the tallest single capture of a page (see visit)
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-quic"]


def toc_files() -> list[str]:
    "Every page of _toc.yml in reading order, as paths without suffix."
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]


PAGES = toc_files()
CHAPTERS = [p for p in PAGES if p.startswith("nbs/")]


@pytest.fixture(scope="module")
def server():
    if not (HTML / "index.html").exists():
        pytest.fail("no built book at _build/html: run `make book` first")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass
    handler = functools.partial(Quiet, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    exe = shutil.which("chromium")
    if exe is None:  # fail, never skip: the book is not tested without a browser
        pytest.fail("Chromium is missing; install it with: apt-get update && apt-get install -y chromium")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        # Playwright starts Chromium with a fresh, empty temporary profile of its own.
        b = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_FLAGS)
        yield b
        b.close()


def visit(browser, url: str, shot: Path) -> tuple[object, list[str]]:
    "Open url, wait for MathJax, save a screenshot; return the page and its console errors."
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    # images, scripts and styles, then fonts; the front page redirects to the introduction
    front = url.endswith("/index.html")
    resp = page.goto(url, wait_until="networkidle" if front else "load")
    page.evaluate("() => document.fonts.ready.then(() => true)")
    assert resp is not None and resp.ok, f"{url} answered {resp and resp.status}"
    page.evaluate("() => window.MathJax?.startup?.promise")
    if os.environ.get("TRANSFORMER_LIT_SCREENSHOTS") == "0":   # make test: checks only
        return page, errors
    shot.parent.mkdir(parents=True, exist_ok=True)
    for old in shot.parent.glob(f"{shot.stem}-*{shot.suffix}"):   # tiles of an earlier build
        old.unlink()
    # One capture of a very tall page (chapter 19: 53,000 px) came back with its prose missing
    # below ~12,000 px; captures of at most SHOT_TILE px each render whole, so a taller page is
    # saved in tiles: name.png, then name-2.png, name-3.png, ...
    height = page.evaluate("document.documentElement.scrollHeight")
    for i, top in enumerate(range(0, height, SHOT_TILE)):
        path = shot if i == 0 else shot.with_name(f"{shot.stem}-{i + 1}{shot.suffix}")
        clip = {"x": 0, "y": top, "width": 1280, "height": min(SHOT_TILE, height - top)}
        page.screenshot(path=str(path), full_page=True, clip=clip)
    return page, errors


# the English book at the site's root, the Chinese one under zh/ (book/_ext/language_switch.py)
LANGUAGES = {"en": "", "zh": "zh/"}


# Every page in both languages. The Chinese book is the English one with its prose
# translated (same templates, scripts, code, outputs and math; tests/test_chinese.py also
# compares every Chinese page with its English page in the HTML); here each Chinese page is
# seen as a reader sees it: math typeset, figures loaded with their translated alt text, no
# console error, drawn in a CJK font, and linking back to its English page.
VISITS = [(doc, lang) for lang in LANGUAGES for doc in PAGES]


@pytest.mark.parametrize("doc, lang", VISITS)
def test_page(browser, server, settings, doc, lang):
    folder = LANGUAGES[lang]
    url = f"{server}/{folder}{'index.html' if doc == PAGES[0] else doc + '.html'}"
    shot = SHOTS / f"{folder.replace('/', '_')}{doc.replace('/', '_')}.png"
    page, errors = visit(browser, url, shot)
    try:
        assert not errors, f"console errors on {doc}: {errors}"
        text = page.inner_text("article")
        assert "#|" not in text, f"nbdev directive text visible on {doc}"
        prose = page.evaluate(  # the article's text outside code and outputs, where TeX delimiters are not meant literally
            "() => { const a = document.querySelector('article').cloneNode(true);"
            " a.querySelectorAll('pre, code, .cell_output, mjx-container').forEach(e => e.remove()); return a.innerText; }")
        assert not any(d in prose for d in ("\\(", "\\[", "$$")), f"raw TeX left on {doc}"
        n_math = page.locator("article .math, article span.math, article div.math").count()
        if n_math:
            assert page.locator("article mjx-container").count() >= n_math, f"math not typeset on {doc}"
        broken = page.evaluate(
            "() => [...document.querySelectorAll('article img')]"
            ".filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
        assert not broken, f"images that did not load on {doc}: {broken}"
        cut = page.evaluate(  # printed output wider than its box: its end hidden sideways
            "() => [...document.querySelectorAll('article .cell_output pre')]"
            ".filter(p => p.scrollWidth > p.clientWidth + 1)"
            ".map(p => p.innerText.split('\\n').find(l => l.length > 80) || '')")
        assert not cut, f"{doc}: cell output cut at the column's edge: {cut[:3]}"
        paragraphs = page.eval_on_selector_all("article p", "ps => ps.map(p => p.innerText)")
        assert not tables_as_text(paragraphs), (
            f"{doc}: a markdown table rendered as text: {tables_as_text(paragraphs)}")
        check_language_switch(page, doc, lang)
        if doc in CHAPTERS:
            check_colab_button(page, settings, doc)
            check_diagrams(page, doc, lang)
            check_export_labels(page, settings, doc)
    finally:
        page.close()


# A table the markdown parser did not take for one (no blank line before it, a separator
# row typed with dashes it does not accept, ...) reaches the page as a paragraph of pipes.
TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$", re.M)
SEPARATOR = re.compile(r"\|\s*:?(-{2,}|[\u2013\u2014]+)\s*:?\s*\|")


def tables_as_text(paragraphs: list[str]) -> list[str]:
    "The paragraphs that are a markdown table left as text: a row of pipes and a separator."
    return [p[:80] for p in paragraphs if TABLE_ROW.search(p) and SEPARATOR.search(p)]


def test_tables_as_text_is_caught():
    "The check fails on the broken table readers found in chapter 06, and only on tables."
    broken = "| | attention | feed-forward |\n|—|—:|—:|\n| parameters | 1,050,624 | 2,099,712 |"
    assert tables_as_text([broken]) == [broken[:80]]
    assert tables_as_text(["| a | b |\n|---|---:|\n| 1 | 2 |"]) != []
    assert tables_as_text(["a | b, or |x| for the absolute value", "plain text"]) == []


def notebook_cells(doc: str) -> list[dict]:
    return json.loads((ROOT / f"{doc}.ipynb").read_text(encoding="utf-8"))["cells"]


def translated(doc: str) -> dict[str, str]:
    "The Chinese of each message of doc's catalogue, by its English (whitespace folded)."
    import polib
    po = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / f"{doc}.po"
    if not po.exists():
        return {}
    return {" ".join(e.msgid.split()): e.msgstr for e in polib.pofile(str(po))
            if e.msgstr and "fuzzy" not in e.flags}


def check_diagrams(page, doc: str, lang: str = "en") -> None:
    """Every diagram the notebook shows (<img src=\"figures/...\">) is on the page, loaded,
    with its alt text (on a Chinese page, the catalogue's translation of it)."""
    chinese = translated(doc) if lang == "zh" else {}
    wanted = []
    for cell in notebook_cells(doc):
        if cell["cell_type"] == "markdown":
            for tag in re.findall(r"<img\b[^>]*>", "".join(cell["source"])):
                src, alt = re.search(r'src="([^"]*)"', tag), re.search(r'alt="([^"]*)"', tag)
                alt = alt.group(1) if alt else ""
                wanted.append((src.group(1) if src else "", chinese.get(" ".join(alt.split()), alt)))
    shown = page.evaluate(
        "() => [...document.querySelectorAll('article img')].map(i => ({src: i.src, alt: i.alt,"
        " ok: i.complete && i.naturalWidth > 0, w: i.getBoundingClientRect().width}))")
    for src, alt in wanted:
        name = src.rsplit("/", 1)[-1]
        if lang == "zh":   # the Chinese drawing, NAME.zh_CN.svg (tests/test_diagrams_zh.py)
            name = name.replace(".svg", ".zh_CN.svg")
        hits = [i for i in shown if i["src"].rsplit("/", 1)[-1] == name]
        assert hits, f"{doc}: diagram {src} is not on the page"
        for img in hits:
            assert img["ok"] and img["w"] > 100, f"{doc}: diagram {src} did not load or is tiny: {img}"
            assert img["alt"].split() == alt.split() and alt.strip(), f"{doc}: {src} lost its alt text"


def directives(cell: dict) -> list[str]:
    "The nbdev directives of a code cell: '#| export' -> 'export'."
    return [line[2:].strip() for line in "".join(cell["source"]).splitlines() if line.startswith("#|")]


def check_export_labels(page, settings, doc: str) -> None:
    "Each exported cell is labelled with the file it goes to; no other cell is."
    code = [directives(c) for c in notebook_cells(doc) if c["cell_type"] == "code"]
    modules = [d.split()[1] for ds in code for d in ds if d.startswith("default_exp ")]
    n_export = sum(1 for ds in code if {"export", "exports", "exporti"} & set(ds) and "hide" not in ds)
    found = page.evaluate(
        "() => [...document.querySelectorAll('article div.cell')].map(c => ({"
        " exported: c.classList.contains('tag_nbdev-export'),"
        " labels: [...c.querySelectorAll('.nbdev-export-label')].map(l =>"
        "   ({text: l.innerText, w: l.getBoundingClientRect().width}))}))")
    exported = [c for c in found if c["exported"]]
    assert len(exported) == n_export, f"{doc}: {len(exported)} cells tagged exported, notebook has {n_export}"
    assert not any(c["labels"] for c in found if not c["exported"]), f"{doc}: a label on an unexported cell"
    if n_export:
        target = f"{settings['lib_path']}/{modules[0].replace('.', '/')}.py"   # e.g. transformer_lit/attention.py
        for c in exported:
            labels = c["labels"]
            assert len(labels) == 1 and target in labels[0]["text"] and labels[0]["w"] > 0, (
                f"{doc}: exported cell labelled {labels}, expected {target}")


def check_language_switch(page, doc: str, lang: str) -> None:
    "The page links to itself in the other language; a Chinese page is in a CJK font."
    other = "zh/" if lang == "en" else ""
    hrefs = page.eval_on_selector_all("p.language-switch a", "els => els.map(e => e.href)")
    assert len(hrefs) == 1 and hrefs[0].endswith(f"/{other}{doc}.html"), (
        f"{lang} {doc}: language link {hrefs}, expected .../{other}{doc}.html")
    want = "zh-CN" if lang == "zh" else "en"
    assert page.evaluate("document.documentElement.lang") == want
    if lang == "zh":
        # the fonts Chromium really drew the first heading with (not what CSS asked for)
        cdp = page.context.new_cdp_session(page)
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument")["root"]["nodeId"]
        node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "article h1"})
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node["nodeId"]})["fonts"]
        names = [f["familyName"] for f in fonts]
        if page.evaluate("/[\\u4e00-\\u9fff]/.test(document.querySelector('article h1')"
                         ".innerText)"):
            assert any("WenQuanYi" in n for n in names), f"zh {doc}: heading drawn in {names}"


def check_colab_button(page, settings, doc: str) -> None:
    "The launch menu links to this very notebook on Colab, in the repository settings.ini names."
    hrefs = page.eval_on_selector_all("a[href*='colab.research.google.com']", "els => els.map(e => e.href)")
    want = (f"https://colab.research.google.com/github/{settings['user']}/{settings['repo']}"
            f"/blob/{settings['branch']}/{doc}.ipynb")
    assert want in hrefs, f"{doc}: Colab links {hrefs}, expected {want}"


def test_every_chapter_is_listed(root):
    "The table of contents lists every chapter notebook, in the order of their numbers."
    on_disk = {f"nbs/{p.stem}" for p in (root / "nbs").glob("[0-9][0-9]*.ipynb")}
    assert set(CHAPTERS) == on_disk
    numbers = [int(c[4:6]) for c in CHAPTERS]
    assert numbers == sorted(numbers)


@pytest.mark.browser
@pytest.mark.parametrize("query, lang", [("词元", "zh"), ("解码器 缓存", "zh"),
                                         ("decoder", "en")])
def test_the_search_page_lists_pages_for_a_query(browser, server, query, lang):
    """Issue 60: a Chinese query found almost nothing (the index never split Chinese).
    The search page, run by Sphinx's own script in the browser, lists pages."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/{LANGUAGES[lang]}search.html?q={query}", wait_until="load")
    # the results come one by one; the summary gets their number when all are there
    page.wait_for_function(
        "() => /\\d/.test(document.querySelector('#search-results p.search-summary')"
        "?.innerText ?? '')", timeout=20000)
    found = page.locator("#search-results ul.search li").count()
    page.close()
    from test_chinese import page_text
    words = query.split()
    holding = [doc for doc in PAGES
               if all(w in page_text(HTML / LANGUAGES[lang] / f"{doc}.html") for w in words)]
    assert len(holding) >= 3 and found >= 0.9 * len(holding) and not errors, \
        (found, len(holding), errors)
