"""Code fits the page: the book shows 88 columns of code without scrolling at 1280 px
(issue 14), and the package is read beside it. tools/fit_page.py fixes what runs over."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 88
NOTEBOOKS = sorted((ROOT / "nbs").glob("*.ipynb"))
# _modidx.py is nbdev's index, not code anyone reads
MODULES = sorted(p for p in (ROOT / "transformer_lit").glob("*.py") if p.name != "_modidx.py")


def too_wide(lines, where):
    return [f"{where} line {n}: {len(line)} columns" for n, line in lines if len(line) > WIDTH]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_code_fits_the_page(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    wide = []
    for k, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            lines = "".join(cell["source"]).split("\n")
            wide += too_wide(enumerate(lines, 1), f"cell {k}")
    assert not wide, f"{path.name}: run tools/fit_page.py\n" + "\n".join(wide)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_package_code_fits_the_page(path):
    # nbdev writes the chapter's one-line summary (before the first cell) and an
    # `# %% auto` cell of __all__ itself; every other line comes from a notebook cell;
    # __init__.py is written by hand, its docstring is `help(transformer_lit)`
    lines = path.read_text(encoding="utf-8").split("\n")
    numbered, cell = [], "# %% __init__.py" if path.name == "__init__.py" else None
    for n, line in enumerate(lines, 1):
        if line.startswith("# %% "):
            cell = line
        if cell is not None and not cell.startswith("# %% auto"):
            numbered.append((n, line))
    wide = too_wide(numbered, path.name)
    assert not wide, "\n".join(wide)


def test_the_check_can_fail(tmp_path):
    """The counter sees a long line as long: characters, not bytes (§, √ and é are one)."""
    assert too_wide([(1, "§" * WIDTH)], "x") == []
    assert too_wide([(1, "é" * (WIDTH + 1))], "x") == ["x line 1: 89 columns"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stream_outputs_come_in_one_box(path):
    """A cell's printed lines are one output, not one box per message (chapter 13's
    training log was ten): tools/run_notebooks.py coalesces them."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    split = []
    for k, cell in enumerate(cells):
        kinds = [
            o.get("name") if o["output_type"] == "stream" else None
            for o in cell.get("outputs", [])
        ]
        if any(a is not None and a == b for a, b in zip(kinds, kinds[1:])):
            split.append(f"cell {k}")
    assert not split, f"{path.name}: consecutive stream outputs in {split}"


def test_a_rewrapped_comment_leaves_no_line_holding_a_word_or_two():
    """tools/fit_page.py: what overflows a long comment line goes to the front of the next
    line of the same comment; the result fits, reads in the same order, and is stable."""
    import sys
    sys.path.insert(0, str(ROOT / "tools"))
    from fit_page import wrap_comments

    words = [f"w{i}" for i in range(40)]
    src = ("    # " + " ".join(words[:30]) + "\n    # " + " ".join(words[30:]) + "\n"
           "    #| not-a-comment " + "x" * 90 + "\nx = 1")
    out = wrap_comments(src)
    lines = out.split("\n")
    comment = [line for line in lines if line.lstrip().startswith("# ")]
    assert all(len(line) <= WIDTH for line in comment)
    assert [w for line in comment for w in line.split()[1:]] == words   # same words, in order
    assert len(comment) == 2 and len(comment[-1]) > 20                 # no orphan line
    assert lines[-2].startswith("    #| not-a-comment") and wrap_comments(out) == out
