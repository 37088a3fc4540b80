"""The package's floors (STYLE.md, 'The house's floors'): every module imports only from
modules on lower floors, so the imports form no cycle and no module leans on a neighbour;
no module imports another's private name; each module stays small enough to hold in one's
head (training.py <= 450 lines, every other module <= 600); and each module's docstring is a
whole sentence or two."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "transformer_lit"

# Lower number = lower floor. A module may import only from strictly lower floors.
FLOORS = {
    "validate": 0, "files": 0, "machine": 0,                    # checks, files, the machine
    "corpus": 1, "runs": 1, "masking": 1, "positional": 1,      # building blocks,
    "norms": 1, "ffn": 1, "cache": 1,                           # the corpus, processes, the KV cache
    "attention": 2, "data": 2,                                  # attention | tokenizer, batches
    "encoder": 3,
    "decoder": 4,                                               # reuses the encoder's helpers
    "model": 5,
    "recipe": 6, "checkpoints": 6,                              # settings | saving a run
    "training": 7, "inference": 7, "pretrained": 7,             # the loop | decoding | shipped
    "scoring": 8, "analysis": 8,                                # BLEU, chrF | failure modes
    "fast": 9,                                                  # plugs into training
    "fast_decoding": 10,                                        # plugs into inference
    "export": 10,                                               # other engines
    "huggingface": 11, "argos": 11,                             # built on export
    "cli.shared": 12,                                           # the command line
    "cli.train": 13, "cli.translate": 13, "cli.export": 13,
    "cli": 14, "cli.__main__": 15,
}
# the core (the reader's path) knows nothing of speed: it never imports `fast` or
# `fast_decoding`
CORE = {m for m, floor in FLOORS.items() if floor < FLOORS["fast"]}


def module_name(path: Path) -> str:
    "transformer_lit/cli/train.py -> 'cli.train'; transformer_lit/cli/__init__.py -> 'cli'."
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, here: str, is_package: bool) -> list[str]:
    "The package modules (as FLOORS names them) that one `from ... import ...` reads."
    if node.level:   # relative: from . / from .. (counted from this module's package)
        base = here.split(".") if is_package else here.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        module = ".".join(base + ([node.module] if node.module else []))
    elif node.module and node.module.startswith("transformer_lit"):
        module = node.module.removeprefix("transformer_lit").lstrip(".")
    else:
        return []
    names = [f"{module}.{a.name}".lstrip(".") for a in node.names]
    found = [n for n in names if n in FLOORS]    # `from transformer_lit import corpus`
    return found or ([module] if module else [])


def package_imports(path: Path) -> dict[str, list[str]]:
    """{package module: names imported from it} for a file's run-time imports
    (TYPE_CHECKING blocks aside)."""
    here, found = module_name(path), {}
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.ImportFrom):
                for module in _resolve(child, here, is_package):
                    found.setdefault(module, []).extend(a.name for a in child.names)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.startswith("transformer_lit."):
                        found.setdefault(alias.name.removeprefix("transformer_lit."), [])
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


# every module but nbdev's index and the package's __init__ (its version number only)
MODULES = sorted(p for p in PACKAGE.rglob("*.py")
                 if p.name != "_modidx.py" and p != PACKAGE / "__init__.py")


def test_every_module_has_a_floor():
    names = {module_name(p) for p in MODULES}
    assert names == FLOORS.keys(), (names - FLOORS.keys(), FLOORS.keys() - names)


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_imports_point_down(path):
    here = module_name(path)
    floor = FLOORS[here]
    up = {m: FLOORS.get(m) for m in package_imports(path) if FLOORS.get(m, 99) >= floor}
    assert not up, f"{here} (floor {floor}) imports from floors at or above it: {up}"


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_no_private_names_across_modules(path):
    private = {m: [n for n in names if n.startswith("_")]
               for m, names in package_imports(path).items()}
    private = {m: n for m, n in private.items() if n}
    assert not private, f"{module_name(path)} imports private names: {private}"


def test_the_core_never_imports_the_speed_module():
    for path in MODULES:
        if module_name(path) in CORE:
            speed = {"fast", "fast_decoding"} & set(package_imports(path))
            assert not speed, (module_name(path), speed)


def test_the_checker_reads_relative_imports():
    probe = PACKAGE / "cli" / "train.py"
    imports = package_imports(probe)
    assert "cli.shared" in imports and "training" in imports


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_modules_stay_small(path):
    limit = {"training": 450}.get(path.stem, 600)
    lines = len(path.read_text().splitlines())
    assert lines <= limit, f"{path.name}: {lines} lines (at most {limit})"


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_module_docstrings_are_whole_sentences(path):
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc and doc.rstrip().endswith((".", "!", "?", ")")), (module_name(path), doc)


# a docstring that tells the chapter's story ("this chapter fetches...", "Every chapter so
# far...") instead of what the module holds (issue 47, item 6)
NARRATION = re.compile(r"\bthis (chapter|one)\b|\bchapters? so far\b|^chapter \d+", re.I)


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_module_docstrings_say_what_the_module_holds(path):
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert not NARRATION.search(doc), (module_name(path), doc)
