"""Which glossary terms a chapter uses before linking them to the glossary.

Usage: python tools/glossary_links.py [STEM ...]   (default: the chapters of the reader's path)

A term is each name of a row of book/glossary.md's table (book/_ext/glossary_anchors.py: the
row of "query, key, value" has three). The first use of any name of a row in a chapter's prose (markdown outside
headings, code and math; a plural counts, "normalization" is "normalisation") must be the text
of a link to that row: `[dropout](../book/glossary.md#dropout)`. Later uses need no link.
IGNORED lists the names that are also plain English words in the book's prose; they are not
checked. Prints each chapter's unlinked first uses; exits 1 if there is any.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
sys.path.insert(0, str(ROOT / "tools"))
from glossary_anchors import anchors, names  # noqa: E402
from screens import parts  # noqa: E402

# names that are also everyday words in the prose, so a first use is often not the term
IGNORED = {
    "memory": "also the computer's memory",
    "key": "also a dictionary's key, a key idea",
    "value": "also any number's value",
    "head": "also the start of a list or sentence",
    "inference": "also reasoning in general",
    "reference translation": "checked as 'reference'? no: 'reference' is also the package's"
                             " Reference part",
    "toy task": "a name of the book's own example, defined where it is used",
    "held-out": "an adjective, defined with validation and test set",
    "Transformer": "the book's subject: every chapter opens with it",
    "token": "every chapter uses it from its first line; the overview defines it",
}
LINK = re.compile(r"\[([^\]]*)\]\(\.\./book/glossary\.md#([^)]*)\)")
READER_PARTS = ("The building blocks", "The model", "Training and translating")


def glossary() -> list[tuple[str, list[str]]]:
    "(anchors, names) of each row of the glossary table."
    rows = []
    for line in (ROOT / "book" / "glossary.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or set(cells[0]) <= set("-: "):
            continue
        if cells[0] == "term":
            continue
        rows.append((anchors(cells[0]), [n for n in names(cells[0]) if n not in IGNORED]))
    return rows


def pattern(name: str) -> re.Pattern:
    "A name as it may occur in prose: any case, plural, -ise or -ize."
    text = re.escape(name).replace("is", "i[sz]")
    text = text.replace(r"\ ", r"[\s-]").replace(r"\-", r"[\s-]")
    return re.compile(rf"(?<![\w-]){text}(s|es)?(?![\w-])", re.I)


def prose(stem: str) -> str:
    "A chapter's markdown without headings, code, math, HTML comments and cells removed."
    nb = json.loads((ROOT / "nbs" / f"{stem}.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"
             and "remove-cell" not in c.get("metadata", {}).get("tags", [])]
    text = "\n\n".join(cells)
    text = re.sub(r"```.*?```|\$\$.*?\$\$|<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"(?m)^#+ .*$", " ", text)
    text = re.sub(r"`[^`]*`|\$[^$\n]+\$", " ", text)
    # the URL of a link is not prose; keep glossary links whole, other links' text only
    return re.sub(r"(?<!!)\[([^\]]*)\]\((?!\.\./book/glossary\.md#)[^)]*\)", r"\1", text)


def unlinked(stem: str) -> list[str]:
    "The terms whose first use in chapter stem is not a link to their glossary row."
    text = prose(stem)
    links = [(m.start(), m.end(), m.group(2)) for m in LINK.finditer(text)]
    missing = []
    for row_anchors, row_names in glossary():
        uses = [(m.start(), name) for name in row_names if (m := pattern(name).search(text))]
        if not uses:
            continue
        start, name = min(uses)
        if not any(a <= start < b and anchor in row_anchors for a, b, anchor in links):
            missing.append(name)
    return missing


def reader_chapters() -> list[str]:
    return [s for caption, stems in parts() if caption in READER_PARTS for s in stems]


def main() -> int:
    stems = sys.argv[1:] or reader_chapters()
    bad = 0
    for stem in stems:
        missing = unlinked(stem)
        bad += len(missing)
        print(f"{stem:24s} {len(missing):3d} unlinked: {', '.join(missing)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
