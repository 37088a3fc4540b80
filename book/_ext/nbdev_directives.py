"""Sphinx extension: make nbdev's `#|` cell directives invisible in the built book.

Jupyter Book 1 shows `#| export` and friends verbatim. Before myst-nb parses a notebook, this
rewrites its JSON: directive lines are dropped from the code shown, and the directives that
change what a reader sees become Jupyter Book cell tags:

    #| hide              -> the whole cell is removed (tag remove-cell)
    #| code-fold: true   -> the code is collapsed behind a toggle (tag hide-input); used for
                            exercise solutions
    #| echo: false       -> only the output is shown (tag remove-input)
    #| output: false     -> only the code is shown (tag remove-output)
"""
from __future__ import annotations

import json

TAGS = {"hide": "remove-cell", "code-fold: true": "hide-input",
        "echo: false": "remove-input", "output: false": "remove-output"}


def strip_cell(cell: dict) -> None:
    "Remove directive lines from one code cell and turn the visible ones into tags."
    lines = "".join(cell.get("source", "")).splitlines(keepends=True)
    kept, directives = [], []
    for line in lines:
        if line.lstrip().startswith("#|"):
            directives.append(line.lstrip()[2:].strip())
        else:
            kept.append(line)
    while kept and not kept[0].strip():
        kept.pop(0)
    cell["source"] = "".join(kept).rstrip("\n")
    tags = cell.setdefault("metadata", {}).setdefault("tags", [])
    if directives and not cell["source"].strip():
        directives.append("hide")  # a cell that held only directives (e.g. `#| default_exp`)
    for d in directives:
        tag = TAGS.get(d)
        if tag and tag not in tags:
            tags.append(tag)


def on_source_read(app, docname: str, source: list[str]) -> None:
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    nb = json.loads(source[0])
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            strip_cell(cell)
    source[0] = json.dumps(nb)


def dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    "Drop repeated <script> entries: Jupyter Book 1 registers sphinx-thebe's and togglebutton's twice,"
    # which makes the browser report "Identifier 'THEBE_JS_URL' has already been declared".
    seen, unique = set(), []
    for js in context.get("script_files", []):
        key = (getattr(js, "filename", js) or "", tuple(sorted(getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique


def setup(app):
    app.connect("source-read", on_source_read)
    # last (priority > 501), after the themes have added their scripts to the page
    app.connect("html-page-context", dedupe_scripts, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
