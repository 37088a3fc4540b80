"""Words about how the book is made, on the pages of the reader's path.

Usage: python tools/process_words.py [STEM ...]   (default: the chapters of the reader's path)

A reader's page speaks of the Transformer, not of how the book is built and tested: no lent
machines, CI, commits, trial runs, test files, nbval or make test's quick switch. Checked: the
markdown and the visible code (a cell tagged remove-cell or remove-input, or a `#| hide` or
`#| echo: false` cell, is not seen) of each chapter; outputs are what the code prints. The
Engineering part may name the tests where it teaches testing, so it is not checked. Prints each
hit; exits 1 if there is any.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from glossary_links import reader_chapters  # noqa: E402

WORDS = re.compile(
    r"\blent\b|(?-i:\bCI\b)|\bcommitted\b|make test|\btest_\w+\.py|\btests/|trial runs?\b"
    r"|\bnbval\b|(?-i:QUICK)|book is built|build(s|ing)? (of )?the book", re.I)
HIDDEN_TAGS = {"remove-cell", "remove-input"}
HIDDEN_FLAGS = ("#| hide", "#| echo: false")


def visible(cell: dict) -> bool:
    "Whether the built page shows the cell's source."
    source = "".join(cell["source"])
    tags = set(cell.get("metadata", {}).get("tags", []))
    return not (tags & HIDDEN_TAGS) and not any(f in source for f in HIDDEN_FLAGS)


def hits(stem: str) -> list[str]:
    "The lines of chapter stem's visible sources that speak of how the book is made."
    nb = json.loads((ROOT / "nbs" / f"{stem}.ipynb").read_text())
    out = []
    for i, cell in enumerate(nb["cells"]):
        if not visible(cell):
            continue
        for line in "".join(cell["source"]).splitlines():
            if WORDS.search(line):
                out.append(f"cell {i}: {line.strip()[:120]}")
    return out


def main() -> int:
    bad = 0
    for stem in sys.argv[1:] or reader_chapters():
        for hit in hits(stem):
            bad += 1
            print(f"{stem}: {hit}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
