"""Chapter 09's toy task (reversing random sequences) reaches its accuracy in the stored
run. The notebook's cell asserts the threshold when it runs; this test reads what the
committed notebook printed, so a notebook committed without that run, or with a run that
fell short, fails.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "nbs" / "09_transformer.ipynb"
THRESHOLD = 0.95  # the chapter's assert
LINE = re.compile(
    r"exact-match accuracy on (\d+) unseen sentences: (\d+) correct = ([0-9.]+)")


def stored_accuracy_lines(path: Path) -> list[tuple[str, str]]:
    "(source, printed text) of each code cell whose stored output has that line."
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        outputs = cell.get("outputs", [])
        text = "".join(
            "".join(o["text"]) for o in outputs if o.get("output_type") == "stream"
        )
        if LINE.search(text):
            found.append(("".join(cell["source"]), text))
    return found


def test_parser_reads_the_line():
    "The pattern reads counts and share; a line that is not there is not invented."
    m = LINE.search("exact-match accuracy on 493 unseen sentences: 480 correct = 0.974")
    assert m and m.groups() == ("493", "480", "0.974")
    assert LINE.search("exact-match accuracy on 493 sentences") is None


def test_toy_task_reaches_its_accuracy_in_the_stored_run():
    found = stored_accuracy_lines(CHAPTER)
    assert len(found) == 1, f"{CHAPTER.name}: {len(found)} stored accuracy lines, not 1"
    source, text = found[0]
    n, k, share = LINE.search(text).groups()
    n, k, share = int(n), int(k), float(share)
    assert n >= 400, f"only {n} test sentences: too few to measure 0.95"
    assert 0 <= k <= n and abs(share - k / n) < 1e-3, (n, k, share)
    assert k / n >= THRESHOLD, f"the stored run reversed {k} of {n}: below {THRESHOLD}"
    # the cell that printed it decodes with the plain loop and asserts the same bar
    assert "greedy_decode_uncached(" in source
    assert f"assert accuracy >= {THRESHOLD}" in source
