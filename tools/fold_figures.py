"""Fold the code of figure cells in the built book (Jupyter Book's `hide-input` tag).

    python tools/fold_figures.py [nbs/X.ipynb ...]    (default: every notebook in nbs/)

A cell that only draws a figure (it calls matplotlib, exports nothing, and runs over
MIN_LINES lines) shows its figure in the book and its code behind a "show code" toggle:
the plotting code is not what a chapter teaches, and unfolded it costs a screen per
figure. Idempotent; Jupyter and Colab ignore the tag. Cells with `#|` directives are
left alone (nbdev_directives.py owns their tags).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIN_LINES = 10
TAG = "hide-input"


def is_figure_cell(cell: dict) -> bool:
    src = "".join(cell["source"])
    return (cell["cell_type"] == "code" and "plt." in src and "#|" not in src
            and len(src.splitlines()) >= MIN_LINES)


def fold(path: Path) -> int:
    nb = json.loads(path.read_text(encoding="utf-8"))
    n = 0
    for cell in nb["cells"]:
        tags = cell.setdefault("metadata", {}).get("tags", [])
        if is_figure_cell(cell) and TAG not in tags and "hide-cell" not in tags:
            cell["metadata"]["tags"] = [*tags, TAG]
            n += 1
    if n:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return n


if __name__ == "__main__":
    paths = [Path(a) for a in sys.argv[1:]] or sorted((ROOT / "nbs").glob("*.ipynb"))
    for p in paths:
        print(f"{p}: {fold(p)} figure cells folded")
