"""How long the reader's sentences are, per chapter, in the table of contents' order.

Usage: python tools/sentences.py [--all] [--long N]

The prose is a notebook's markdown as a first reading meets it (tools/screens.py's rules: no
"Deeper" or "Exercises" section, no cell tagged remove-cell), without what is not a sentence:
headings, code blocks, display math, tables, MyST directive lines, HTML tags and figure captions.
Inline code and inline math count as one word each, a link as its text. A sentence ends at
".", "!" or "?" before a space or the end of a paragraph, and at the end of a paragraph or a
list item. Prints, per chapter, the sentences, the words per sentence and the share of sentences
over 30 words, and each part's figures; --long N lists the sentences over N words.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screens import ROOT, SKIPPED, parts  # noqa: E402

LONG = 30
CORE = ("The building blocks", "The model", "Training and translating")


def prose_cells(stem: str) -> list[str]:
    "The markdown a first reading meets in notebook stem, one string per cell."
    nb = json.loads((ROOT / "nbs" / f"{stem}.ipynb").read_text())
    out, skipping = [], None
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        if "remove-cell" in cell.get("metadata", {}).get("tags", []):
            continue
        kept = []
        for line in "".join(cell["source"]).split("\n"):
            if m := re.match(r"(#+)\s+(.*)", line):
                level = len(m.group(1))
                if skipping is not None and level <= skipping:
                    skipping = None
                if skipping is None and m.group(2).startswith(SKIPPED):
                    skipping = level
            if skipping is None:
                kept.append(line)
        out.append("\n".join(kept))
    return out


def paragraphs(markdown: str) -> list[str]:
    "The paragraphs and list items of markdown, as plain text, without what is not prose."
    text = re.sub(r"```.*?```|~~~.*?~~~", "\n\n", markdown, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", "\n\n", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    blocks, current = [], []
    for line in text.split("\n"):
        stripped = line.strip()
        item = re.match(r"([-*+]|\d+[.)])\s+", stripped)
        if (not stripped or stripped.startswith(("#", "|", ":::", ">", "<", "```"))
                or re.match(r":\w+:", stripped) or item):
            if current:
                blocks.append(" ".join(current))
            current = []
            if item:
                current = [stripped[item.end():]]
            continue
        current.append(stripped)
    if current:
        blocks.append(" ".join(current))
    out = []
    for block in blocks:
        block = re.sub(r"`[^`]*`", "CODE", block)
        block = re.sub(r"\$[^$]+\$", "MATH", block)
        block = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", block)
        block = re.sub(r"\{\w+\}`?", "", block)
        block = re.sub(r"<[^>]+>", " ", block)
        if re.search(r"[A-Za-z]", block):
            out.append(block)
    return out


def sentences(stem: str) -> list[str]:
    "The sentences of notebook stem's first reading."
    out = []
    for cell in prose_cells(stem):
        for block in paragraphs(cell):
            for s in re.split(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9`])", block):
                if len(s.split()) > 0:
                    out.append(s)
    return out


def figures(stems: list[str]) -> tuple[int, float, float]:
    "(sentences, words per sentence, percent over 30 words) of the chapters stems together."
    lengths = [len(s.split()) for stem in stems for s in sentences(stem)]
    if not lengths:
        return 0, 0.0, 0.0
    return (len(lengths), sum(lengths) / len(lengths),
            100 * sum(n > LONG for n in lengths) / len(lengths))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", type=int, metavar="N", help="list the sentences over N words")
    parser.add_argument("stems", nargs="*", help="only these chapters (default: all)")
    args = parser.parse_args()
    core: list[str] = []
    for caption, stems in parts():
        stems = [s for s in stems if not args.stems or s in args.stems]
        if not stems:
            continue
        n, words, over = figures(stems)
        print(f"{caption}: {n} sentences, {words:.1f} words each, {over:.0f}% over {LONG}")
        for stem in stems:
            n, words, over = figures([stem])
            print(f"  {stem:24s} {n:4d} {words:5.1f} {over:4.0f}%")
            if args.long:
                for s in sentences(stem):
                    if len(s.split()) > args.long:
                        print(f"      ({len(s.split())}) {s}")
        if caption in CORE:
            core += stems
    if core:
        n, words, over = figures(core)
        print(f"Core path: {n} sentences, {words:.1f} words each, {over:.0f}% over {LONG}")


if __name__ == "__main__":
    main()
