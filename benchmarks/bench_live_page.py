"""Benchmark: the page "Try the model" (book/try.md) in headless Chromium, against the
package's own translate on the same machine.

Run (after `make book`): .venv/bin/python benchmarks/bench_live_page.py [--sentences N]

The built site (_build/html) is served on 127.0.0.1. The load time is the wall time from
asking for the page to the model being ready (`data-ready` on #live-output): the
runtime's WebAssembly compiled, the two graphs and the tokenizer read. It is measured
LOADS times, each in a fresh browser context (an empty cache), and the median kept. Then
the page translates N test verses (held-out books: Ruth, Daniel, 1 John; every k-th of
them, so that all three books are in), one at a time, each timed by the page itself from
the click to the text (`data-ms`: tokenizing, the encoder, every decoder step, the
text). The package translates the same verses one at a time (batch 1, as the page) with
`translate`, greedy, on one thread as the page runs. The script reports the median and
the 90th percentile of each, the share of verses the two translate alike, and names the
processor, in transformer_lit/results/live_page_cpu.json; `page_figures` holds the
figures the page's Deeper section shows, as it prints them (tests/test_live_page.py
checks that it does). The verses come from chapter 11's corpus cache (fetched on first
use).
"""
from __future__ import annotations

import argparse
import functools
import http.server
import statistics
import sys
import threading
import time
import warnings
from pathlib import Path

import torch
from _common import cpu_details, write_result

from transformer_lit import corpus
from transformer_lit.data import split_by_book
from transformer_lit.inference import translate
from transformer_lit.pretrained import load_pretrained

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
LIVE = HTML / "_static" / "live"
LOADS = 5
FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--disable-quic"]   # as tests/test_book.py starts it


def percentile(values: list[float], q: float) -> float:
    "The q-th percentile (0-100), linear between the two nearest ranks (as numpy)."
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo = int(k)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (k - lo)


def test_verses(n: int) -> list[str]:
    "n English verses of the test books, evenly spread over them."
    pairs = split_by_book(corpus.load_pairs())["test"]
    step = len(pairs) / n
    return [pairs[int(i * step)].en for i in range(n)]


def serve(folder: Path) -> str:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass
    handler = functools.partial(Quiet, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}"


def ready_page(browser, url: str):
    "A fresh context's page, loaded until the model is ready -> (page, seconds)."
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    start = time.perf_counter()
    page.goto(url, wait_until="load")
    page.wait_for_selector("#live-output[data-ready='true']", state="attached",
                           timeout=120_000)
    return page, time.perf_counter() - start


def page_translations(page, sentences: list[str]) -> tuple[list[str], list[float]]:
    "Each sentence's text and the page's own milliseconds for it."
    texts, ms = [], []
    for i, s in enumerate(sentences, 1):
        page.fill("#live-source", s)
        page.click("#live-translate")
        page.wait_for_function(
            f"document.querySelector('#live-output').dataset.count === '{i}'",
            timeout=120_000)
        texts.append(page.eval_on_selector("#live-output", "e => e.textContent"))
        ms.append(float(page.get_attribute("#live-output", "data-ms")))
    return texts, ms


def package_translations(sentences: list[str]) -> tuple[list[str], list[float]]:
    "translate, one sentence at a time on one thread: each text and its milliseconds."
    model, tokenizer = load_pretrained()
    translate(model, tokenizer, sentences[:3])  # warm-up
    texts, ms = [], []
    for s in sentences:
        start = time.perf_counter()
        texts += translate(model, tokenizer, [s])
        ms.append((time.perf_counter() - start) * 1000)
    return texts, ms


def summary(ms: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(ms), "p90_ms": percentile(ms, 90),
            "mean_ms": statistics.fmean(ms)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=100)
    args = parser.parse_args()
    if args.sentences < 1:
        print(f"error: --sentences must be at least 1, got {args.sentences}",
              file=sys.stderr)
        return 2
    if not (LIVE / "model" / "web.json").is_file():
        print("error: no built page with its model at _build/html: run make book",
              file=sys.stderr)
        return 1
    torch.set_num_threads(1)   # the page runs on one thread
    warnings.simplefilter("ignore")   # a verse that reaches its length limit
    sentences = test_verses(args.sentences)
    from playwright.sync_api import sync_playwright
    url = serve(HTML) + "/book/try.html"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=FLAGS)
        loads = []
        for _ in range(LOADS):
            page, seconds = ready_page(browser, url)
            loads.append(seconds)
            page.context.close()
        page, _ = ready_page(browser, url)
        version = browser.version
        web_texts, web_ms = page_translations(page, sentences)
        browser.close()
    pkg_texts, pkg_ms = package_translations(sentences)
    same = sum(a == b for a, b in zip(web_texts, pkg_texts))
    served = {sub: sum(f.stat().st_size for f in (LIVE / sub).rglob("*") if f.is_file())
              for sub in ("model", "runtime")}
    page_stats, pkg_stats = summary(web_ms), summary(pkg_ms)
    processor = cpu_details()["name"]
    payload = {
        "processor": processor, "chromium": version, "sentences": len(sentences),
        "sentence_source": "test books (Ruth, Daniel, 1 John), evenly spread",
        "same_translation": same, "load_seconds": statistics.median(loads),
        "load_seconds_all": loads, "page": page_stats,
        "package": {**pkg_stats, "threads": 1, "route": "translate, batch 1, greedy"},
        "bytes_served": served,
        "page_figures": {
            "load_s": f"{statistics.median(loads):.1f}",
            "page_median_ms": f"{page_stats['median_ms']:.0f}",
            "page_p90_ms": f"{page_stats['p90_ms']:.0f}",
            "package_median_ms": f"{pkg_stats['median_ms']:.0f}",
            "package_p90_ms": f"{pkg_stats['p90_ms']:.0f}",
            "sentences": str(len(sentences)),
            "megabytes": f"{sum(served.values()) / 1e6:.0f}",
        },
    }
    path = write_result("live_page", torch.device("cpu"), payload)
    print(f"{processor}, Chromium {version}; "
          f"{same}/{len(sentences)} translations equal")
    print(f"load {payload['load_seconds']:.2f} s (median of {LOADS})")
    for name, st in (("page", page_stats), ("package translate", pkg_stats)):
        print(f"{name:18s} median {st['median_ms']:.0f} ms, p90 {st['p90_ms']:.0f} ms")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
