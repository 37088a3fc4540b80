"""Count the screens a reader goes through in each chapter, in the table of contents' order.

Usage: python tools/screens.py [--all]

A screen is 50 lines, as issue 31 measured the book: a markdown cell counts its source lines, a
code cell its lines (none when the page hides or folds the code: the hide-input and
remove-cell tags, `#| code-fold`), a text output its lines, a figure 25. Sections a first
reading skips are not counted: a heading that starts with "Deeper" or "Exercises", up to the
next heading of the same or a higher level (a heading may sit in the middle of a markdown
cell: the cell's lines are counted on either side of it). Prints each chapter's screens under its part and
each part's total; --all also counts the skipped sections.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINES_PER_SCREEN = 50
FIGURE_LINES = 25
SKIPPED = ("Deeper", "Exercises")


def parts() -> list[tuple[str, list[str]]]:
    "(caption, [notebook stems]) for each part of _toc.yml, in order."
    out: list[tuple[str, list[str]]] = []
    for line in (ROOT / "_toc.yml").read_text().splitlines():
        if m := re.match(r"\s*-\s*caption:\s*(.+)", line):
            out.append((m.group(1).strip(), []))
        elif (m := re.match(r"\s*-\s*file:\s*nbs/(\S+)", line)) and out:
            out[-1][1].append(m.group(1))
    return out


def output_lines(cell: dict) -> int:
    n = 0
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if any(k.startswith("image/") for k in data):
            n += FIGURE_LINES
        elif out.get("output_type") == "stream":
            n += "".join(out["text"]).count("\n")
        elif "text/plain" in data:
            n += "".join(data["text/plain"]).count("\n") + 1
    return n


def cell_lines(cell: dict) -> int:
    source = "".join(cell["source"])
    tags = cell.get("metadata", {}).get("tags", [])
    if "remove-cell" in tags:
        return 0
    if cell["cell_type"] == "markdown":
        return source.count("\n") + 1
    hidden = "hide-input" in tags or "remove-input" in tags or "#| code-fold" in source
    code = 0 if hidden else len([ln for ln in source.splitlines() if not ln.startswith("#|")])
    return code + output_lines(cell)


def segments(cell: dict) -> list[tuple[re.Match | None, int]]:
    """(heading, lines) for the parts of a cell: a markdown cell is cut at each heading line
    (a heading may sit mid-cell), any other cell is one part with no heading."""
    if cell["cell_type"] != "markdown" or "remove-cell" in cell.get("metadata", {}).get(
            "tags", []):
        return [(None, cell_lines(cell))]
    parts: list[tuple[re.Match | None, int]] = [(None, 0)]
    for line in "".join(cell["source"]).strip("\n").split("\n"):
        m = re.match(r"(#+)\s+(.*)", line)
        if m:
            parts.append((m, 0))
        parts[-1] = (parts[-1][0], parts[-1][1] + 1)
    return parts if parts[0][1] else parts[1:]


def screens(stem: str, everything: bool = False) -> float:
    "Screens of notebook stem, the skipped sections left out unless everything."
    nb = json.loads((ROOT / "nbs" / f"{stem}.ipynb").read_text())
    lines, skipping = 0, None   # skipping: the level of the skipped section's heading
    for cell in nb["cells"]:
        for m, n in segments(cell):
            if m:
                level = len(m.group(1))
                if skipping is not None and level <= skipping:
                    skipping = None
                if skipping is None and m.group(2).startswith(SKIPPED):
                    skipping = level
            if skipping is None or everything:
                lines += n
    return lines / LINES_PER_SCREEN


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="count the skipped sections too")
    args = parser.parse_args()
    for caption, stems in parts():
        counts = {s: screens(s, args.all) for s in stems}
        print(f"{caption}: {sum(counts.values()):.0f} screens")
        for stem, n in counts.items():
            print(f"  {stem:24s} {n:5.1f}")


if __name__ == "__main__":
    main()
