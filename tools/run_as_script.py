"""Run a chapter's code cells top to bottom in one namespace, without Jupyter, and record each
cell's printed output, time and error as JSON.

Usage: python tools/run_as_script.py nbs/19_your_model.ipynb OUT.json [--gpu-steps N] [--float16]

For a machine that has PyTorch and the package but no Jupyter kernel (the lent GPU machines):
it checks that a chapter runs there as a reader runs it, and what it prints, to set beside the
outputs stored in the notebook. A cell's last expression is printed as Jupyter would show it;
figures are drawn with matplotlib's Agg backend and closed. --gpu-steps cuts chapter 19's GPU
budget (recipe.BOOK_GPU_STEPS), so that the GPU path runs without its full training time;
--float16 makes torch report compute capability 7.5, so the code takes the float16 path with the
gradient scaler, as on a T4. A failed assert is recorded and the run goes on (the cells after it
still say whether they run); any other error is recorded and stops the run.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")


def cells(path: Path) -> list[str]:
    "The code cells' sources."
    nb = json.loads(path.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def run_cell(source: str, namespace: dict, index: int) -> None:
    "Execute source; if it ends in an expression, print its repr when it is not None."
    tree = ast.parse(source, filename=f"<cell {index}>")
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    if last is not None:
        tree.body.pop()
    exec(compile(tree, f"<cell {index}>", "exec"), namespace)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), f"<cell {index}>", "eval"), namespace)
        if value is not None:
            print(repr(value))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--gpu-steps", type=int)
    parser.add_argument("--float16", action="store_true")
    args = parser.parse_args()
    notebook, out_path = args.notebook.resolve(), args.out.resolve()
    import matplotlib.pyplot as plt
    import torch

    if args.float16:
        torch.cuda.get_device_capability = lambda *a, **k: (7, 5)
    if args.gpu_steps is not None:
        import transformer_lit.recipe as recipe
        recipe.BOOK_GPU_STEPS = args.gpu_steps
    os.chdir(notebook.parent)
    namespace: dict = {"__name__": "__main__"}
    record = {"notebook": args.notebook.name, "float16": args.float16, "gpu_steps": args.gpu_steps,
              "cuda": torch.cuda.is_available(), "cells": []}
    status = 0
    for i, source in enumerate(cells(notebook)):
        out, err = io.StringIO(), io.StringIO()
        start = time.perf_counter()
        error = None
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                run_cell(source, namespace, i)
            except BaseException:   # noqa: BLE001 - recorded, then the run stops
                error = traceback.format_exc()
        plt.close("all")
        record["cells"].append({"index": i, "seconds": time.perf_counter() - start, "stdout": out.getvalue(),
                                "stderr": err.getvalue()[-4000:], "error": error})
        out_path.write_text(json.dumps(record, indent=1))  # kept if the run is cut off
        print(f"{args.notebook.name} cell {i}: {time.perf_counter() - start:.1f} s"
              + (" ERROR" if error else ""), flush=True)
        if error:
            print(error, file=sys.stderr)
            status = 1
            if not error.rstrip().splitlines()[-1].startswith("AssertionError"):
                break
    out_path.write_text(json.dumps(record, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())
