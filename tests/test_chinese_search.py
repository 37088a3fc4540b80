"""Issue 60: search in the Chinese book finds the pages that contain a term.

The Chinese book was indexed with the English splitter, which never splits Chinese
(a sentence was one "word"): 词元 found 5 of the 32 pages that contain it. It is now
indexed by book/_ext/cjk_search.py (each run of Chinese characters as its characters
and their pairs; a query split into its pairs, in the browser as in Python). Here, in
the built index (_build/html/zh/searchindex.js, `make book`): each Chinese term of the
glossary, and the terms readers tried, is found on >= 90% of the pages whose text
contains it, and the pages found mostly do contain it; the browser's splitter is the
Python one; the search page lists the pages for a Chinese query.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from cjk_search import query_terms  # noqa: E402
from test_book import PAGES, SHOTS, browser, server  # noqa: E402,F401  (fixtures)

HTML = ROOT / "_build" / "html"
ZH = HTML / "zh"
# the three terms of the issue, and others a reader of the book would look for
ASKED = ["词元", "解码", "缓存", "注意力", "编码器", "掩蔽", "束搜索", "位置编码",
         "层规范化", "检查点", "分词器", "梯度", "交叉注意力", "前规范化", "参考译文"]


def glossary_terms() -> list[str]:
    "The Chinese terms of book/glossary.md (its 中文 column), each run of two or more."
    rows = [line.split("|")[2] for line in
            (ROOT / "book" / "glossary.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("|") and not line.startswith("|---")][1:]
    return sorted({t for row in rows for t in re.findall(r"[\u3400-\u9fff]{2,}", row)})


def search_index(folder: Path) -> dict:
    "The index Sphinx writes into searchindex.js (Search.setIndex({...}))."
    text = (folder / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1:text.rindex(")")])


def found_by_search(index: dict, query: str) -> set[str]:
    """The pages Sphinx's searchtools.js lists for a query: those whose text or titles
    hold every term of the query's split (no stemming touches Chinese)."""
    pages = None
    for term in query_terms(query):
        hits = set()
        for table in ("terms", "titleterms"):
            docs = index[table].get(term, [])
            hits |= {docs} if isinstance(docs, int) else set(docs)
        pages = hits if pages is None else pages & hits
    return {index["docnames"][i] for i in pages or ()}


def page_text(path: Path) -> str:
    "A page's article text, tags dropped."
    html = path.read_text(encoding="utf-8")
    main = html[html.index('<article class="bd-article"'):html.index("</article>")]
    return re.sub(r"<[^>]+>", " ", re.sub(r"(?s)<(script|style).*?</\1>", "", main))


def search_figures(folder: Path, terms: list[str]) -> dict[str, tuple[set, set]]:
    "For each term: the pages whose text holds it, and the pages search finds for it."
    index = search_index(folder)
    texts = {p: page_text(folder / f"{p}.html") for p in PAGES
             if (folder / f"{p}.html").exists()}
    return {t: ({p for p, text in texts.items() if t in text},
                found_by_search(index, t)) for t in terms}


def test_chinese_search_finds_the_pages_that_contain_a_term():
    if not (ZH / "searchindex.js").exists():
        pytest.fail("no built book at _build/html: run `make book` first")
    terms = ASKED + [t for t in glossary_terms() if t not in ASKED]
    figures = search_figures(ZH, terms)
    missed = {t: f"{len(holding & found)} of {len(holding)}"
              for t, (holding, found) in figures.items()
              if len(holding) >= 2 and len(holding & found) < 0.9 * len(holding)}
    assert not missed, f"pages found / pages containing the term: {missed}"
    # not vacuous: the terms are on many pages, and search does not list every page
    held = [t for t in ASKED if len(figures[t][0]) >= 10]
    assert len(held) >= 12, held
    found = sum(len(f) for _, f in figures.values())
    right = sum(len(h & f) for h, f in figures.values())
    assert right >= 0.95 * found, f"{found - right} of {found} found lack the term"


# Queries as a reader types them: a word, a phrase, Latin and Chinese, punctuation.
QUERIES = ["词元", "解码器 缓存", "束搜索", "码", "BLEU分数", "pre-norm 前规范化",
           "“词元”，和：束搜索", "Transformer（变换器）", "decoder"]


def test_the_browser_splits_a_query_as_python_does():
    "The splitQuery that language_data.js gives the browser is cjk_search.query_terms."
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing (make book needs it too: "
                    "apt-get install -y nodejs npm)")
    script = (ZH / "_static" / "language_data.js").read_text(encoding="utf-8")
    assert "function splitQuery" in script, "the Chinese book is not cjk_search's"
    code = script + ("\nconsole.log(JSON.stringify("
                     "JSON.parse(process.argv[1]).map(splitQuery)));")
    out = subprocess.run([node, "-e", code, json.dumps(QUERIES)], check=True,
                         capture_output=True, text=True).stdout
    assert json.loads(out) == [query_terms(q) for q in QUERIES]


@pytest.mark.browser
@pytest.mark.parametrize("query", ["词元", "位置编码"])
def test_the_search_page_lists_the_pages_for_a_chinese_query(browser, server, query):
    """Sphinx's own search script, in Chromium, lists the pages that hold the term; the
    page is saved as _build/screenshots/zh_search_<query>.png (make screenshots)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/zh/search.html?q={query}", wait_until="load")
    page.wait_for_function(   # the summary gets its number when every result is listed
        "() => /\\d/.test(document.querySelector('#search-results p.search-summary')"
        "?.innerText ?? '')", timeout=30000)
    links = page.eval_on_selector_all("#search-results ul.search li a",
                                      "els => els.map(e => e.getAttribute('href'))")
    if os.environ.get("TRANSFORMER_LIT_SCREENSHOTS") != "0":
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"zh_search_{query}.png"), full_page=True)
    page.close()
    listed = {re.sub(r"\.html.*$", "", href) for href in links}
    holding, _ = search_figures(ZH, [query])[query]
    assert len(holding) >= 10 and len(holding & listed) >= 0.9 * len(holding) \
        and not errors, (len(holding & listed), len(holding), errors)
