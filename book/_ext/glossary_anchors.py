"""Sphinx extension: each row of the glossary's table is a link target, named after its term.

A chapter links a term to its row with a plain markdown link, which Jupyter also shows:
`[dropout](../book/glossary.md#dropout)`. The row of "query, key, value" answers to #query, #key
and #value; a parenthesised name is one too ("feed-forward network (FFN)": #feed-forward-network
and #ffn). MyST checks such a link against the page's known anchors (its headings), so the row ids
are added to them as well: a link to a term the glossary lacks fails the build like any other.
The ids come from the English term column, which a translation keeps as it is.
"""
from __future__ import annotations

import re

from docutils import nodes

GLOSSARY = "book/glossary"


def names(term: str) -> list[str]:
    "The names a glossary term column gives: 'layer normalisation (LayerNorm)' -> both."
    term = term.replace("`", "")
    inside = re.findall(r"\(([^)]*)\)", term)
    outside = re.sub(r"\([^)]*\)", " ", term)
    found = []
    for part in [outside, *inside]:
        for name in re.split(r",|\s/\s", part):
            if re.search(r"[A-Za-z0-9]", name):
                found.append(name.strip())
    return found


def slug(name: str) -> str:
    "A name's anchor: lower case, each run of other characters than letters and digits a '-'."
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def anchors(term: str) -> list[str]:
    "The anchors of a glossary row, in order, without repeats."
    out: list[str] = []
    for name in names(term):
        if (s := slug(name)) and s not in out:
            out.append(s)
    return out


def add_row_ids(app, doctree: nodes.document) -> None:
    "Give the glossary's table rows their anchors and tell MyST they exist."
    env = app.env
    if env.docname != GLOSSARY:
        return
    known = env.metadata[env.docname].setdefault("myst_slugs", {})
    for row in doctree.findall(nodes.row):
        if isinstance(row.parent, nodes.thead) or not row.children:
            continue
        term = row.children[0].astext()
        for anchor in anchors(term):
            if anchor in known or anchor in doctree.ids:
                continue
            row["ids"].append(anchor)
            doctree.ids[anchor] = row
            known[anchor] = (0, anchor, term)


def setup(app):
    app.connect("doctree-read", add_row_ids)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
