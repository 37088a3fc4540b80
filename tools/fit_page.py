"""Fit the notebooks' code to the page: 88 columns, the width the book shows without scrolling.

    python tools/fit_page.py [nbs/X.ipynb ...]     (default: every notebook in nbs/)

Three steps, each a plain text transformation of the code cells (outputs are untouched):
1. A trailing comment that makes its line too long moves closer (two spaces) if that is
   enough, else to its own line above the statement, at the statement's indentation (a formatter would otherwise split the code
   to make room for the comment, which reads worse than either).
2. `ruff format` (settings in pyproject.toml) breaks long code lines.
3. A string that still runs over is split: a docstring becomes a wrapped triple-quoted
   one; any other string becomes adjacent literals inside parentheses, cut at spaces
   (never inside an f-string's braces); then `ruff format` again.
4. A comment line still too long is re-wrapped at 88 columns.
What is left (a URL, a word longer than the page) is listed for a person to fix;
tests/test_page_width.py fails while anything is.  Then `nbdev_export` carries the cells into the package.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

WIDTH = 88
ROOT = Path(__file__).resolve().parent.parent


def _comment_tokens(src: str) -> dict[int, tokenize.TokenInfo] | None:
    """Line number (1-based) -> the trailing comment token on it; None if `src` won't tokenize."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    out = {}
    for tok in toks:
        if tok.type == tokenize.COMMENT and tok.line[: tok.start[1]].strip():
            out[tok.start[0]] = tok
    return out


def _statement_start(lines: list[str], i: int) -> int:
    """Index of the first line of the (possibly bracketed) statement that line `i` ends or is in."""
    depth = 0
    for j in range(i, -1, -1):
        code = lines[j].split("#", 1)[0]
        depth += sum(code.count(c) for c in ")]}") - sum(code.count(c) for c in "([{")
        if depth <= 0:
            return j
    return i


def move_long_comments(src: str) -> str:
    """Step 1: move each trailing comment of an over-long line above its statement."""
    comments = _comment_tokens(src)
    if not comments:
        return src
    lines = src.split("\n")
    for lineno in sorted(comments, reverse=True):
        i = lineno - 1
        if len(lines[i]) <= WIDTH:
            continue
        tok = comments[lineno]
        code = lines[i][: tok.start[1]].rstrip()
        if len(code) + 2 + len(tok.string) <= WIDTH:  # only the gap before it was too wide
            lines[i] = code + "  " + tok.string
            continue
        lines[i] = code
        start = _statement_start(lines, i)
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        lines.insert(start, indent + tok.string)
    return "\n".join(lines)


def _cut(body: str, room: int, fstring: bool) -> list[str]:
    """Cut a string literal's body at spaces into pieces of at most `room` characters (each
    piece keeps its trailing space); an f-string is never cut inside braces."""
    pieces, start, last, depth = [], 0, None, 0
    for i, ch in enumerate(body):
        if fstring and ch == "{":
            depth += 1
        elif fstring and ch == "}":
            depth -= 1
        elif ch == " " and depth == 0 and (i == 0 or body[i - 1] != "\\"):
            if i + 1 - start > room and last is not None:
                pieces.append(body[start:last])
                start = last
            last = i + 1
    if len(body) - start > room and last is not None and last > start:
        pieces.append(body[start:last])
        start = last
    pieces.append(body[start:])
    return [p for p in pieces if p]


def split_long_strings(src: str) -> str:
    """Step 3: split the string literals of over-long lines (see the module's docstring)."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return src
    lines = src.split("\n")
    edits, depth, done_rows = [], [0] * len(toks), set()
    for n, tok in enumerate(toks[:-1]):
        step = tok.type == tokenize.OP and (tok.string in "([{") - (tok.string in ")]}")
        depth[n + 1] = depth[n] + step
    # one string per line and pass, the rightmost: fit() runs passes until nothing changes
    for n in range(len(toks) - 1, -1, -1):
        tok = toks[n]
        if tok.type != tokenize.STRING or tok.start[0] != tok.end[0]:
            continue
        if tok.start[0] in done_rows:
            continue
        if len(lines[tok.start[0] - 1]) <= WIDTH:
            continue
        m = re.match(r"([A-Za-z]*)(\"|')(.*)\2$", tok.string, re.S)
        if not m or "b" in m[1].lower():
            continue
        prefix, quote, body = m[1], m[2], m[3]
        line = lines[tok.start[0] - 1]
        indent = line[: len(line) - len(line.lstrip())]
        before = [t for t in toks[:n] if t.type not in (tokenize.NL, tokenize.COMMENT)]
        docstring = (line.strip() == tok.string and len(before) >= 3
                     and before[-1].type == tokenize.INDENT and before[-3].string == ":"
                     and not prefix and '"""' not in body and not body.endswith("\\"))
        if docstring:
            wrapped = textwrap.wrap(body, WIDTH - len(indent) - 3, break_long_words=False,
                                    break_on_hyphens=False)
            text = (indent + '"""' + ("\n" + indent).join(wrapped) + '"""').split("\n")
            edits.append((tok.start[0] - 1, 0, len(line), text, True))
            done_rows.add(tok.start[0])
            continue
        inner = indent + "    "
        room = WIDTH - len(inner) - len(prefix) - 2 - 1
        pieces = _cut(body, room, "f" in prefix.lower())
        if len(pieces) < 2:
            continue
        literals = [prefix + quote + p + quote for p in pieces]
        if depth[n] > 0:  # inside brackets already: adjacent literals need no parentheses
            new = [literals[0], *(inner + lit for lit in literals[1:-1]), inner + literals[-1]]
        else:
            new = ["(", *(inner + lit for lit in literals), indent + ")"]
        edits.append((tok.start[0] - 1, tok.start[1], tok.end[1], new, False))
        done_rows.add(tok.start[0])
    for row, c0, c1, new, whole in sorted(edits, reverse=True):
        line = lines[row]
        if whole:
            lines[row : row + 1] = new
        elif len(new) == 2:
            lines[row : row + 1] = [line[:c0] + new[0], new[1] + line[c1:]]
        else:
            lines[row : row + 1] = [line[:c0] + new[0], *new[1:-1], new[-1] + line[c1:]]
    return "\n".join(lines)


def _comment(line: str) -> tuple[str, str] | None:
    "(indent, text) of a full-line comment that may be re-wrapped; None for code or `#|`."
    body = line.lstrip()
    if not body.startswith("# ") or body.startswith("#|"):
        return None
    return line[: len(line) - len(body)], body[2:]


def wrap_comments(src: str) -> str:
    """Step 3: re-wrap full-line comments longer than the page (never `#|` directives).
    What overflows goes to the front of the next line when that line continues the same
    comment (same indent), so that no line is left holding a word or two."""
    lines, out, carry = src.split("\n"), [], None   # carry: (indent, words) for the next line
    for k, line in enumerate(lines):
        here = _comment(line)
        if carry and here and here[0] == carry[0]:
            line, here = f"{here[0]}# {carry[1]} {here[1]}", (here[0], f"{carry[1]} {here[1]}")
        elif carry:
            out.append(f"{carry[0]}# {carry[1]}")
        carry = None
        if here is None or len(line) <= WIDTH:
            out.append(line)
            continue
        indent = here[0]
        pieces = textwrap.wrap(here[1], WIDTH, initial_indent=indent + "# ",
                               subsequent_indent=indent + "# ", break_long_words=False,
                               break_on_hyphens=False)
        following = _comment(lines[k + 1]) if k + 1 < len(lines) else None
        if len(pieces) > 1 and following and following[0] == indent:
            out += pieces[:-1]
            carry = (indent, pieces[-1][len(indent) + 2:])
        else:
            out += pieces
    if carry:
        out.append(f"{carry[0]}# {carry[1]}")
    return "\n".join(out)


def _sources(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def _set(cell: dict, src: str) -> None:
    lines = src.split("\n")
    cell["source"] = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _save(path: Path, nb: dict) -> None:
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def long_lines(path: Path) -> list[tuple[int, str]]:
    """(cell index, line) for every code line of a notebook wider than the page."""
    out = []
    for k, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] == "code":
            out += [(k, line) for line in "".join(cell["source"]).split("\n") if len(line) > WIDTH]
    return out


def ruff_lines(src: str) -> str:
    """Step 2: `ruff format` only the statements that hold an over-long line, bottom up,
    so that code which fits the page keeps the layout its author gave it (aligned
    matrices, comments beside the rows they describe)."""
    ruff = Path(sys.executable).parent / "ruff"
    for _ in range(20):
        lines = src.split("\n")
        rows = [i + 1 for i, line in enumerate(lines) if len(line) > WIDTH]
        for row in reversed(rows):
            done = subprocess.run(
                [str(ruff), "format", "--quiet", "--line-length", str(WIDTH), "--range",
                 str(row), "--stdin-filename", "cell.py", "-"],
                input=src, capture_output=True, text=True, cwd=ROOT)
            if done.returncode != 0:  # a cell ruff cannot parse (magics): left as it is
                return src
            if done.stdout.rstrip("\n") != src.rstrip("\n"):
                src = done.stdout.rstrip("\n")
                break  # rows moved: find the long ones again
        else:
            return src
    return src


def fit(paths: list[Path]) -> None:
    steps = (move_long_comments, ruff_lines, split_long_strings, ruff_lines,
             split_long_strings, ruff_lines, wrap_comments)
    for path in paths:
        nb = _load(path)
        for cell in _sources(nb):
            src = "".join(cell["source"])
            if any(len(line) > WIDTH for line in src.split("\n")):
                for step in steps:
                    src = step(src)
                _set(cell, src)
        _save(path, nb)
    for path in paths:
        for k, line in long_lines(path):
            print(f"{path.relative_to(ROOT)} cell {k}: {len(line)} columns: {line.strip()[:60]}")


if __name__ == "__main__":
    args = [Path(a).resolve() for a in sys.argv[1:]] or sorted((ROOT / "nbs").glob("*.ipynb"))
    fit(args)
