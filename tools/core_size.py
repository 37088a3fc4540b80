"""How much a reader of the core meets: chapters 01-20, the notebooks that _toc.yml
lists before its "Engineering" part, counted in reading order (issue 57's targets).

Usage: python tools/core_size.py

What counts:
- a *visible* code cell is a code cell the book shows: not tagged `remove-cell` or
  `remove-input`, without `#| hide` or `#| echo: false`, and not empty once its `#|`
  directive lines are dropped (book/_ext/nbdev_directives.py turns those directives into
  the same tags). A folded cell (`hide-input`, `#| code-fold: true`) is visible: the
  reader can open it.
- *visible code lines*: the non-blank lines of the visible code cells, directive lines
  not counted.
- *exported lines*: the non-blank lines of the cells with `#| export` (or `exports`,
  `exporti`), directive lines not counted, whether the book shows them or not.
- *prose words*: whitespace-separated words of the markdown cells (formulas, links and
  markup count as the words they split into).
- *code cells*: the visible code cells.
- *toy model learns*: the 1-based index, among the visible code cells of the core in
  reading order, of chapter 09's first visible code cell that calls `.backward(` (the
  first cell of its training run on the toy task).
- *own model translates*: the same index of chapter 19's first visible code cell that
  calls `translate(` (the reader's own trained model translating the test books).
Prints each figure with the issue's target and whether it is met.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HIDDEN_TAGS = {"remove-cell", "remove-input"}
HIDDEN_DIRECTIVES = {"hide", "echo: false"}
EXPORTS = {"export", "exports", "exporti"}
LEARNS = ("09_transformer", re.compile(r"\.backward\("))
TRANSLATES = ("19_your_model", re.compile(r"(?<![\w.])translate\("))
# figure -> the target (an upper bound)
TARGETS = {"visible code lines": 3500, "exported lines": 2000, "prose words": 32000,
           "code cells": 330, "toy model learns at cell": 150,
           "own model translates at cell": 260}


def core_chapters(toc: Path = ROOT / "_toc.yml") -> list[str]:
    "The notebooks' stems that _toc.yml lists before its Engineering part, in order."
    text = toc.read_text()
    head, sep, _ = text.partition("caption: Engineering")
    if not sep:
        raise ValueError(f"{toc}: no part captioned 'Engineering'")
    return re.findall(r"file:\s*nbs/(\S+)", head)


def split_directives(source: str) -> tuple[list[str], list[str]]:
    "A code cell's source -> (its `#|` directives, its other lines)."
    directives, lines = [], []
    for line in source.splitlines():
        if line.lstrip().startswith("#|"):
            directives.append(line.lstrip()[2:].strip())
        else:
            lines.append(line)
    return directives, lines


def is_visible(cell: dict) -> bool:
    "Whether the book shows this code cell's code (see the module's docstring)."
    directives, lines = split_directives("".join(cell["source"]))
    tags = set(cell.get("metadata", {}).get("tags", []))
    return (not tags & HIDDEN_TAGS and not HIDDEN_DIRECTIVES & set(directives)
            and any(line.strip() for line in lines))


def is_exported(cell: dict) -> bool:
    directives, _ = split_directives("".join(cell["source"]))
    return any(d.split()[0] in EXPORTS for d in directives if d.split())


@dataclass
class Size:
    "The figures of the core (see the module's docstring for what each counts)."
    visible_code_lines: int = 0
    exported_lines: int = 0
    prose_words: int = 0
    code_cells: int = 0
    toy_model_learns_at: int | None = None
    own_model_translates_at: int | None = None

    def figures(self) -> dict[str, int | None]:
        return dict(zip(TARGETS, (self.visible_code_lines, self.exported_lines,
                                  self.prose_words, self.code_cells,
                                  self.toy_model_learns_at,
                                  self.own_model_translates_at)))


def measure(chapters: list[str] | None = None, nbs: Path = ROOT / "nbs") -> Size:
    "Count the chapters (default: the core) in reading order."
    size = Size()
    for stem in core_chapters() if chapters is None else chapters:
        nb = json.loads((nbs / f"{stem}.ipynb").read_text())
        for cell in nb["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                size.prose_words += len(source.split())
            if cell["cell_type"] != "code":
                continue
            _, lines = split_directives(source)
            n_lines = sum(1 for line in lines if line.strip())
            if is_exported(cell):
                size.exported_lines += n_lines
            if not is_visible(cell):
                continue
            size.code_cells += 1
            size.visible_code_lines += n_lines
            for (chapter, call), attr in ((LEARNS, "toy_model_learns_at"),
                                          (TRANSLATES, "own_model_translates_at")):
                if (stem == chapter and getattr(size, attr) is None
                        and call.search("\n".join(lines))):
                    setattr(size, attr, size.code_cells)
    return size


def report(size: Size) -> list[str]:
    "One line per figure: the figure, the target, and whether it is met."
    out = []
    for name, value in size.figures().items():
        target = TARGETS[name]
        met = value is not None and value <= target
        shown = "not found" if value is None else f"{value:,}"
        out.append(f"{name:>29}: {shown:>7}  target <= {target:,}  "
                   f"{'met' if met else 'NOT met'}")
    return out


def main() -> int:
    try:
        size = measure()
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"The core: {len(core_chapters())} chapters (_toc.yml before Engineering)")
    print("\n".join(report(size)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
