"""Sphinx extension: each page shows the figures drawn in its language, with their alt text.

A chapter draws a figure with `transformer_lit.figures.show`, which stores one picture
per language in the cell's outputs, each marked `{"transformer_lit": {"language": ...,
"alt": ...}}` (chapter 44). When a notebook is read, the pictures of the other languages
are dropped from its outputs, and the cell is given the kept picture's alt text
(MyST-NB's `mystnb: image: alt` cell option). A cell with no picture in the page's
language keeps its English ones. Outputs without the mark are left as they are.
"""
from __future__ import annotations

import json

ENGLISH = "en"


def page_language(app) -> str:
    return app.config.language or ENGLISH


def mark(output: dict) -> dict | None:
    "An output's language mark, or None."
    found = (output.get("metadata") or {}).get("transformer_lit")
    return found if isinstance(found, dict) and "language" in found else None


def keep_language(nb: dict, language: str) -> int:
    "Drop the marked outputs of other languages; set the cells' alt. How many dropped."
    dropped = 0
    for cell in nb.get("cells", []):
        outputs = cell.get("outputs") or []
        marked = [o for o in outputs if mark(o)]
        if not marked:
            continue
        languages = {mark(o)["language"] for o in marked}
        wanted = language if language in languages else ENGLISH
        kept = [o for o in outputs if not mark(o) or mark(o)["language"] == wanted]
        dropped += len(outputs) - len(kept)
        cell["outputs"] = kept
        alts = [mark(o).get("alt") for o in kept if mark(o) and mark(o).get("alt")]
        if alts:
            options = cell.setdefault("metadata", {}).setdefault("mystnb", {})
            options.setdefault("image", {})["alt"] = " ".join(alts)
    return dropped


def on_source_read(app, docname: str, source: list[str]) -> None:
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    nb = json.loads(source[0])
    if keep_language(nb, page_language(app)):
        source[0] = json.dumps(nb)


def setup(app):
    app.connect("source-read", on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
