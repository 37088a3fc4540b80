"""Execute notebooks top to bottom in a fresh kernel and store their outputs in place.

Usage: python tools/run_notebooks.py [nbs/NN_topic.ipynb ...]   (default: every notebook in nbs/)
Execution counts then run 1..n, which nbval and tests/test_notebooks.py rely on.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from transformer_lit.figures import FIGURES_ENV, LANGUAGES

ROOT = Path(__file__).resolve().parents[1]


def coalesce_streams(nb) -> None:
    """Merge consecutive stream outputs of one cell (stdout with stdout, stderr with
    stderr) into one: the kernel sends a message per print, and the book would draw a
    separate box for each (a training log became ten boxes). nbval compares streams
    coalesced the same way, so the stored outputs it checks are unchanged."""
    for cell in nb.cells:
        merged = []
        for out in cell.get("outputs", []):
            if (out.output_type == "stream" and merged
                    and merged[-1].output_type == "stream" and merged[-1].name == out.name):
                merged[-1].text += out.text
            else:
                merged.append(out)
        if "outputs" in cell:
            cell.outputs = merged


def run(path: Path, timeout: int = 1800) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    coalesce_streams(nb)
    nbformat.write(nb, path)


# transformer_lit.figures draws each figure in every language of the book for the stored
# outputs; the book keeps the page's (book/_ext/figure_languages.py, chapter 44)
BOTH_LANGUAGES = ",".join(LANGUAGES)

if __name__ == "__main__":
    os.environ[FIGURES_ENV] = BOTH_LANGUAGES   # the kernels inherit it
    paths = [Path(p) for p in sys.argv[1:]] or sorted((ROOT / "nbs").glob("*.ipynb"))
    for p in paths:
        t = time.perf_counter()
        run(p.resolve())
        print(f"{p}: {time.perf_counter() - t:.1f}s", flush=True)
