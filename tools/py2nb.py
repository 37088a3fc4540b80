"""Authoring aid: turn a 'percent' script into a notebook (outputs are added by run_notebooks.py).

    # %% [markdown]          starts a Markdown cell (its lines are written as '# text')
    # %%                     starts a code cell

Usage: python tools/py2nb.py draft.py nbs/NN_topic.ipynb
Notebooks stay the source of truth; the script is a convenient way to write a new one.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import nbformat


def convert(text: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    kind, lines = None, []

    def flush():
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(l[2:] if l.startswith("# ") else l.lstrip("#") for l in body.splitlines())
            nb.cells.append(nbformat.v4.new_markdown_cell(body))
        elif body:
            nb.cells.append(nbformat.v4.new_code_cell(body))

    for line in text.splitlines():
        if line.startswith("# %%"):
            flush()
            kind, lines = ("markdown" if "[markdown]" in line else "code"), []
        else:
            lines.append(line)
    flush()
    seen: set[str] = set()
    for cell in nb.cells:   # ids from the content, so that re-converting an unchanged cell keeps its id
        cid = hashlib.sha1(cell.source.encode()).hexdigest()[:8]
        while cid in seen:
            cid = hashlib.sha1(cid.encode()).hexdigest()[:8]
        seen.add(cid)
        cell.id = cid
    return nb


if __name__ == "__main__":
    src, dst = sys.argv[1:3]
    nbformat.write(convert(Path(src).read_text()), dst)
