"""The package's floors (STYLE.md, 'The house's floors'): every module imports only from
modules on lower floors, so the imports form no cycle; and each module stays small enough to
hold in one's head (training.py <= 450 lines, every other module <= 600)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "transformer_lit"

# Lower number = lower floor. A module may import only from strictly lower floors.
FLOORS = {
    "masking": 0, "positional": 0, "norms": 0, "ffn": 0, "runs": 0, "attention": 1,
    "corpus": 0, "data": 1,
    "encoder": 2, "decoder": 3,
    "model": 4,
    "recipe": 5,
    "fast": 6, "checkpoints": 6, "scoring": 6,
    "training": 7, "inference": 7, "pretrained": 7,
    "export": 8,
    "commands": 9, "train_command": 10, "cli": 11,
}


def package_imports(path: Path) -> set[str]:
    "The transformer_lit modules a file imports at run time (TYPE_CHECKING blocks aside)."
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.ImportFrom):
                module = child.module or ""
                if child.level:  # from .x import y
                    found.add(module.split(".")[0] or child.names[0].name)
                elif module.startswith("transformer_lit."):
                    found.add(module.split(".")[1])
                elif module == "transformer_lit":
                    found.update(a.name for a in child.names)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.startswith("transformer_lit."):
                        found.add(alias.name.split(".")[1])
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


MODULES = sorted(p for p in PACKAGE.glob("*.py") if not p.name.startswith("_"))


def test_every_module_has_a_floor():
    assert {p.stem for p in MODULES} <= FLOORS.keys()


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_imports_point_down(path):
    floor = FLOORS[path.stem]
    up = {m: FLOORS.get(m) for m in package_imports(path) if FLOORS.get(m, 99) >= floor}
    assert not up, f"{path.stem} (floor {floor}) imports from floors at or above it: {up}"


def test_inference_does_not_import_training():
    "Decoding needs no training code: translate_batched and BLEU live in scoring."
    assert "training" not in package_imports(PACKAGE / "inference.py")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_modules_stay_small(path):
    limit = 450 if path.stem == "training" else 600
    lines = len(path.read_text().splitlines())
    assert lines <= limit, f"{path.name}: {lines} lines (at most {limit})"


def test_the_checker_sees_relative_and_absolute_imports(tmp_path):
    "The parser itself, on a made-up module: both import styles, TYPE_CHECKING skipped."
    f = tmp_path / "m.py"
    f.write_text("from typing import TYPE_CHECKING\nfrom .model import T\n"
                 "from transformer_lit.data import X\nimport transformer_lit.fast as f\n"
                 "if TYPE_CHECKING:\n    from transformer_lit.cli import Y\n"
                 "def g():\n    from transformer_lit.training import Z\n")
    assert package_imports(f) == {"model", "data", "fast", "training"}
