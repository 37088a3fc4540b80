"""The page "Try the model" (book/try.md, issue 58): the shipped model translates in the
reader's browser, from files the site serves itself.

In headless Chromium over the built book (`make book`): the page loads with no console
error and asks nothing of any other host; its translations are the package's own greedy
decoding (`translate`, run here in the test process) for held-out verses, modern
sentences, empty and whitespace-only input, a long input that reaches the length limit,
characters the vocabulary lacks and special tokens typed as text; the attention view
draws each kind; the page says that it is loading, and says in one line when the browser
has no WebAssembly. Without the browser: the runtime is the lockfile's, nothing the
build makes is committed, the two books together add at most 35 MB to the site, and the
page's speed figures are the benchmark's.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import warnings
from urllib.parse import urlparse

import pytest
import test_book
from test_book import HTML, ROOT, SHOTS

browser, server = test_book.browser, test_book.server   # the book's fixtures, shared

LIVE = HTML / "_static" / "live"
ZH_LIVE = HTML / "zh" / "_static" / "live"
MAX_SITE_GROWTH = 35e6   # bytes, both books together (issue 58)
RESULTS = ROOT / "transformer_lit" / "results" / "live_page_cpu.json"
MODERN = ["Hello, how are you?", "The train leaves at eight tomorrow morning.",
          "I forgot my phone at the office.", "Can you send me the report by email?"]
ODD = ["", "   ", "\n\t ", "<s> and </s> and <unk> typed as text",
       "東京の天気 ☃ 🙂 — naïve façade", " ".join(["word"] * 200)]


def held_out_verses() -> list[str]:
    "English verses of the test books, as the shipped model's record keeps them."
    from transformer_lit.pretrained import pretrained_record
    return [s["en"] for s in pretrained_record()["samples"][:6]]


@pytest.fixture(scope="module")
def expected():
    """The package's translations (greedy, each sentence's own length limit) and which
    sentences reached their limit (an OutputTruncatedWarning)."""
    import torch

    from transformer_lit.inference import OutputTruncatedWarning, translate
    from transformer_lit.pretrained import load_pretrained
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model, tokenizer = load_pretrained()
    sentences = held_out_verses() + MODERN + ODD
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        texts = translate(model, tokenizer, sentences)
    torch.set_num_threads(threads)
    cut = {w.message.index for w in caught
           if isinstance(w.message, OutputTruncatedWarning)}
    return sentences, texts, cut


def open_page(browser, server, lang: str = "en", init_script: str | None = None,
              hold_wasm: bool = False):
    """The page, with its console errors and every request to another host recorded
    (and refused); hold_wasm: the runtime's WebAssembly is held back until
    seen["release"]() is called."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    seen = {"errors": [], "outside": [], "urls": [], "held": []}
    errors = seen["errors"]
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}")
            if r.status >= 400 else None)
    here = urlparse(server).netloc

    def route(r):
        url = urlparse(r.request.url)
        seen["urls"].append(r.request.url)
        if url.scheme in ("http", "https", "ws", "wss") and url.netloc != here:
            seen["outside"].append(r.request.url)
            return r.abort()
        if hold_wasm and url.path.endswith(".wasm") and "released" not in seen:
            return seen["held"].append(r)
        return r.continue_()

    def release():
        seen["released"] = True
        for r in seen["held"]:
            r.continue_()
    seen["release"] = release
    page.route("**/*", route)
    if init_script:
        page.add_init_script(init_script)
    folder = "zh/" if lang == "zh" else ""
    page.goto(f"{server}/{folder}book/try.html", wait_until="load")
    return page, seen


def wait_ready(page) -> None:
    page.wait_for_selector("#live-output[data-ready='true']", state="attached",
                           timeout=60_000)


def run(page, text: str) -> dict:
    "Type text, press Translate, wait for it: the output's text and state."
    before = int(page.get_attribute("#live-output", "data-count"))
    page.fill("#live-source", text)
    page.click("#live-translate")
    page.wait_for_function(
        f"document.querySelector('#live-output').dataset.count === '{before + 1}'",
        timeout=60_000)
    return page.eval_on_selector(
        "#live-output", "e => ({text: e.textContent, ended: e.dataset.ended})")


@pytest.fixture(scope="module")
def english(browser, server):
    page, seen = open_page(browser, server)
    wait_ready(page)
    yield page, seen
    page.close()


@pytest.fixture(scope="module")
def chinese(browser, server):
    """The Chinese page, its WebAssembly held back until what the page shows while it
    loads is kept in seen["loading"]: the status, data-ready, the button's state."""
    page, seen = open_page(browser, server, "zh", hold_wasm=True)
    page.wait_for_function("() => document.querySelector('#live-status').textContent"
                           " !== '…'")
    for _ in range(100):   # the runtime's request, held (a loaded machine is slow to ask)
        if seen["held"]:
            break
        page.wait_for_timeout(100)
    seen["loading"] = (page.inner_text("#live-status"),
                       page.get_attribute("#live-output", "data-ready"),
                       page.is_disabled("#live-translate"), len(seen["held"]))
    seen["release"]()
    wait_ready(page)
    yield page, seen
    page.close()


@pytest.mark.browser
@pytest.mark.xdist_group("live_page")
def test_the_page_translates_as_the_package(english, expected):
    page, seen = english
    sentences, texts, cut = expected
    got = [run(page, s) for s in sentences]
    same = [g["text"] == t for g, t in zip(got, texts)]
    assert all(same), [(s, g["text"], t) for s, g, t, ok in
                       zip(sentences, got, texts, same) if not ok][:3]
    assert cut == {len(sentences) - 1}   # the 200 words, and only they, reach the limit
    reached = [g["ended"] == "false" for g in got]
    assert reached == [i in cut for i in range(len(sentences))]
    assert not seen["errors"] and not seen["outside"], seen


@pytest.mark.browser
@pytest.mark.xdist_group("live_page")
def test_the_attention_view_draws_each_kind(english):
    "Each kind, for the mean and for one layer and head: its rows and columns, drawn."
    page, seen = english
    run(page, "In the beginning God created the heavens and the earth.")
    S = None
    for kind in ("cross", "self", "enc"):
        for layer, head in (("mean", "mean"), ("1", "4"), ("3", "mean")):
            page.select_option("#live-kind", value=kind)
            page.select_option("#live-layer", value=layer)
            page.select_option("#live-head", value=head)
            drawn = page.eval_on_selector("#live-attention", """c => {
                const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                let dark = 0;
                for (let i = 0; i < d.length; i += 4) {
                    if (d[i] < 128 && d[i + 2] > 60) dark++;
                }
                return {...c.dataset, dark};
            }""")
            assert (drawn["kind"], drawn["layer"], drawn["head"]) == (kind, layer, head)
            rows, cols = int(drawn["rows"]), int(drawn["cols"])
            if kind == "enc":   # the source's pieces, </s> included
                S = S or rows
                assert rows == cols == S
            elif kind == "self":
                assert rows == cols
            assert rows > 3 and cols > 3 and drawn["dark"] >= rows, drawn
    assert "source" in page.inner_text("#live-axes")
    canvas = page.locator("#live-attention")
    box = canvas.bounding_box()   # over the last cell: </s> against </s>
    canvas.hover(position={"x": box["width"] - 8, "y": box["height"] - 8})
    said = page.inner_text("#live-hover")
    assert re.fullmatch(r"</s> → </s>: (0|1)\.\d{3}", said), said
    assert not seen["errors"] and not seen["outside"], seen


@pytest.mark.browser
@pytest.mark.xdist_group("live_page")
def test_the_chinese_page_says_it_is_loading_then_reads_the_same_files(chinese,
                                                                       expected):
    "While its WebAssembly is held back it says so, in Chinese; then it translates."
    page, seen = chinese
    status, ready, disabled, held = seen["loading"]
    assert status == "正在加载模型……" and ready is None and disabled and held, seen
    assert page.inner_text("#live-status").startswith("模型已加载")
    assert page.inner_text("#live-translate") == "翻译"
    sentences, texts, _ = expected
    assert run(page, sentences[0])["text"] == texts[0]
    assert re.search(r"[\u4e00-\u9fff]", page.inner_text("#live-axes"))
    heavy = [u for u in seen["urls"] if re.search(r"/(model|runtime)/", u)]
    assert heavy and all("/zh/" not in u for u in heavy), heavy
    assert not seen["errors"] and not seen["outside"], seen
    assert (LIVE / "model" / "web.json").is_file()
    assert not (ZH_LIVE / "model").exists() and not (ZH_LIVE / "runtime").exists()


@pytest.mark.browser
@pytest.mark.xdist_group("live_page")
def test_without_webassembly_the_page_says_so_in_one_line(browser, server):
    page, seen = open_page(browser, server, init_script="delete window.WebAssembly;")
    try:
        page.wait_for_function("() => document.querySelector('#live-status')"
                               ".textContent.includes('WebAssembly')")
        status = page.inner_text("#live-status")
        assert status == ("This browser cannot run WebAssembly, so the model cannot "
                          "run here.")
        assert page.is_disabled("#live-translate") and not seen["errors"], seen
        assert not [u for u in seen["urls"] if u.endswith((".wasm", ".onnx"))]
    finally:
        page.close()


@pytest.mark.browser
@pytest.mark.xdist_group("live_page")
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_fits_its_width_after_a_translation(request, lang):
    """At 1280 px and on a phone (390 px) the page scrolls only down: the attention view
    scrolls inside its box. `make screenshots` saves each in _build/screenshots/."""
    page, seen = request.getfixturevalue("english" if lang == "en" else "chinese")
    run(page, "In the beginning God created the heavens and the earth.")
    page.select_option("#live-kind", value="cross")
    try:
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.wait_for_timeout(100)   # the view is drawn again on resize
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width, f"{lang} at {width} px: the page is {wide} px wide"
            box = page.eval_on_selector("#live-attention",
                                        "c => c.getBoundingClientRect().width")
            assert box > 100 and not seen["errors"], (box, seen)
            if os.environ.get("TRANSFORMER_LIT_SCREENSHOTS") != "0":
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / f"live_{lang}_{width}.png"),
                                full_page=True)
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})


@pytest.mark.browser
def test_the_site_grows_by_at_most_35_mb():
    "The page's files, both books together: the Chinese book serves the same model."
    if not LIVE.is_dir():
        pytest.fail("no _build/html/_static/live: run make book")
    size = sum(p.stat().st_size for folder in (LIVE, ZH_LIVE) for p in folder.rglob("*")
               if p.is_file())
    assert size <= MAX_SITE_GROWTH, f"{size / 1e6:.1f} MB"
    assert {p.name for p in (LIVE / "runtime").iterdir()} >= {
        "ort.wasm.min.mjs", "ort-wasm-simd-threaded.wasm", "tokenizers.min.mjs"}


def test_the_runtime_is_pinned_and_nothing_built_is_committed():
    """package.json pins exact versions, the lockfile holds them, no build output is in
    git."""
    package = json.loads((ROOT / "web" / "package.json").read_text())
    lock = json.loads((ROOT / "web" / "package-lock.json").read_text())
    pins = package["dependencies"]
    assert pins == {"onnxruntime-web": "1.30.0", "@huggingface/tokenizers": "0.2.0"}
    for name, version in pins.items():
        locked = lock["packages"][f"node_modules/{name}"]
        assert locked["version"] == version
        assert locked["integrity"].startswith("sha512-")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    built = [f for f in tracked if f.endswith((".onnx", ".wasm", ".mjs"))
             or f.startswith(("web/node_modules", "book/_static/live/model",
                              "book/_static/live/runtime"))]
    assert not built, built


def test_the_pages_speed_figures_are_the_benchmarks():
    """The figures of the page's Deeper section (and of its Chinese) are those
    benchmarks/bench_live_page.py wrote; each is in both texts."""
    english = (ROOT / "book" / "try.md").read_text(encoding="utf-8")
    po = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / "book" / "try.po"
    chinese = po.read_text(encoding="utf-8")
    if not RESULTS.is_file():   # not measured yet: then the page shows no timing
        assert not re.search(r"\d (ms|milliseconds|seconds)\b", english)
        return
    figures = json.loads(RESULTS.read_text())["page_figures"]
    assert figures
    for name, figure in figures.items():
        number = rf"(?<![\d.]){re.escape(figure)}(?!\.?\d)"
        assert re.search(number, english) and re.search(number, chinese), (name, figure)
