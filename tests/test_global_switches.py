"""PyTorch's global switches in the chapters (issue 31): a reader copies a cell into their own
program, so a chapter that turns a process-wide setting on or off (thread count, deterministic
algorithms, nn.MultiheadAttention's fast path) puts the old value back later in the same
chapter. A call with a literal argument sets; a later call with a name restores."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWITCHES = {"set_num_threads", "use_deterministic_algorithms", "set_fastpath_enabled"}
CHAPTERS = sorted((ROOT / "nbs").glob("*.ipynb"))


def switch_calls(source: str) -> list[tuple[str, bool]]:
    """(switch, restores) for each top-level call in a cell, in order: calls inside a
    function body belong to that function (its own try/finally), not to the chapter."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell with IPython magics: not Python
        return []
    found = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and child.func.attr in SWITCHES and child.args):
                found.append((child.func.attr, not isinstance(child.args[0], ast.Constant)))
            visit(child)

    visit(tree)
    return found


def chapter_calls(path: Path) -> list[tuple[str, bool]]:
    cells = json.loads(path.read_text())["cells"]
    return [call for c in cells if c["cell_type"] == "code"
            for call in switch_calls("".join(c["source"]))]


def test_the_rule_sees_a_setting_left_on_and_one_put_back():
    left = "import torch\ntorch.set_num_threads(1)\n"
    back = left + "n = torch.get_num_threads()\ntorch.set_num_threads(n)\n"
    inside = "def f():\n    torch.set_num_threads(1)\n"
    assert switch_calls(left) == [("set_num_threads", False)]
    assert switch_calls(back)[-1] == ("set_num_threads", True)
    assert switch_calls(inside) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_global_switch_a_chapter_sets_is_put_back(path):
    left = {}
    for switch, restores in chapter_calls(path):
        if restores:
            left.pop(switch, None)
        else:
            left.setdefault(switch, True)
    assert not left, f"{path.name} sets {sorted(left)} and never puts the old value back"
