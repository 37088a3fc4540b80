"""Sphinx extension: make nbdev's `#|` cell directives invisible in the built book.

Jupyter Book 1 shows `#| export` and friends verbatim. Before myst-nb parses a notebook, this
rewrites its JSON: directive lines are dropped from the code shown, and the directives that
change what a reader sees become Jupyter Book cell tags:

    #| hide              -> the whole cell is removed (tag remove-cell)
    #| code-fold: true   -> the code is collapsed behind a toggle (tag hide-input); used for
                            exercise solutions
    #| echo: false       -> only the output is shown (tag remove-input)
    #| output: false     -> only the code is shown (tag remove-output)
    #| export            -> the cell gets a label naming the package file it goes to, e.g.
                            "transformer_lit/attention.py" (from the notebook's `#| default_exp`),
                            so the reader always knows which code is the package (STYLE.md, rule 16)

The label is a paragraph with the CSS class `nbdev-export-label` (styled in
book/_static/custom.css), put first inside the cell's container after myst-nb has folded
hidden inputs (so an exported cell may be folded too, its label staying visible); the cell also gets the tag
`nbdev-export` (class `tag_nbdev-export`). Unexported cells get neither.

It also switches on MyST's `html_image` extension, so that a chapter's
`<img src="figures/NAME.svg" alt="..." width="...">` (which Jupyter shows as it is) becomes a
Sphinx image: the file is copied into the built site and the alt text and width are kept.
"""
from __future__ import annotations

import configparser
import json
from pathlib import Path

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

TAGS = {"hide": "remove-cell", "code-fold: true": "hide-input",
        "echo: false": "remove-input", "output: false": "remove-output"}
EXPORTS = ("export", "exports", "exporti")   # nbdev's directives that send a cell to a module
EXPORT_TAG = "nbdev-export"


def module_file(lib_path: str, module: str) -> str:
    "nbdev module -> its file: ('transformer_lit', 'attention') -> 'transformer_lit/attention.py'."
    return "/".join([lib_path, *module.split(".")]) + ".py"


def default_exp(nb: dict) -> str | None:
    "The module named by the notebook's `#| default_exp` cell, if any."
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        for line in "".join(cell.get("source", "")).splitlines():
            words = line.lstrip()[2:].split() if line.lstrip().startswith("#|") else []
            if len(words) == 2 and words[0] == "default_exp":
                return words[1]
    return None


def export_target(directives: list[str], default: str | None, lib_path: str) -> str | None:
    "The file an exported cell goes to (`#| export` or `#| export other_module`), else None."
    for d in directives:
        words = d.split()
        if words and words[0] in EXPORTS:
            module = words[1] if len(words) > 1 else default
            return module_file(lib_path, module) if module else None
    return None


def strip_cell(cell: dict, default: str | None = None, lib_path: str = "transformer_lit") -> None:
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
    target = export_target(directives, default, lib_path)
    if target and cell["source"].strip():
        cell["metadata"]["nbdev_export"] = target
        if EXPORT_TAG not in tags:
            tags.append(EXPORT_TAG)


def lib_path(app) -> str:
    "The package folder nbdev exports to: settings.ini's lib_path, next to the book's root."
    cfg = configparser.ConfigParser()
    cfg.read(Path(app.srcdir) / "settings.ini")
    return cfg["DEFAULT"].get("lib_path", "transformer_lit")


def on_source_read(app, docname: str, source: list[str]) -> None:
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    nb = json.loads(source[0])
    default, lib = default_exp(nb), lib_path(app)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            strip_cell(cell, default, lib)
    source[0] = json.dumps(nb)


# the label's words in the Chinese book (the file's name stays as it is)
EXPORTED_TO = {"zh_CN": "导出到 "}


def label_exported_cells(app, doctree) -> None:
    "Put a label naming the target file first inside every exported code cell."
    for cell in doctree.findall(nodes.container):
        if cell.get("nb_element") != "cell_code":
            continue
        target = (cell.get("cell_metadata") or {}).get("nbdev_export")
        if target:
            label = nodes.paragraph("", "", classes=["nbdev-export-label"])
            label += nodes.Text(EXPORTED_TO.get(app.config.language, "exported to "))
            label += nodes.literal(target, target)
            cell.insert(0, label)


class LabelExportedCells(SphinxPostTransform):
    """Label the exported cells after myst-nb's HideInputCells (priority 199) has folded the
    inputs tagged hide-input: that transform looks for the code as the cell's first child,
    so a label put there earlier kept an exported cell from folding. Now the label sits
    above the fold and the code can be folded under it (chapter 11's deeper section)."""

    default_priority = 200

    def run(self, **kwargs) -> None:
        label_exported_cells(self.app, self.document)


def enable_html_image(app, config) -> None:
    "Let MyST turn <img> tags in markdown into Sphinx images (copied into the site, alt kept)."
    if "html_image" not in config.myst_enable_extensions:
        config.myst_enable_extensions = [*config.myst_enable_extensions, "html_image"]


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
    app.connect("config-inited", enable_html_image)
    app.connect("source-read", on_source_read)
    app.add_post_transform(LabelExportedCells)
    # last (priority > 501), after the themes have added their scripts to the page
    app.connect("html-page-context", dedupe_scripts, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
