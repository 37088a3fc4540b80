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

# Lower number = lower floor. A module may import only from strictly lower floors. This is
# STYLE.md's diagram ("The house's floors"), refined: test_the_floors_are_styles checks that
# every module it names keeps its order, and says where this table splits one of its floors.
FLOORS = {
    "validate": 0, "files": 0, "machine": 0,                    # checks, files, the machine
    "pairs": 1, "figures": 1,                                   # the reader's own pairs;
                                                                # figures in two languages
    "safeguards": 1, "failures": 1,                             # checks a run leans on;
                                                                # a translation's mistakes
    "bible": 0.5,                                               # the corpus's machinery, a
                                                                # half floor under its pairs
    "corpus": 1,
    "model_support": 1,                                         # the model's checks, copies
    "deeper_blocks": 1,                                         # the blocks' checks, copies
    "decoding_extras": 1,                                       # translate's batches, limits
    "runs": 2, "masking": 2, "positional": 2,                   # building blocks, processes,
    "norms": 2, "ffn": 2, "cache": 2,                           # the KV cache
    "attention": 3, "data": 3,                                  # attention | tokenizer, batches
    "encoder": 4,
    "decoder": 5,                                               # above the encoder
    "model": 6,
    "recipe": 7,                                                # settings, presets
    "checkpoints": 8,                                           # saving a run, the model folder
    "training": 9, "inference": 9, "pretrained": 9,             # the loop | decoding | shipped
    "fast": 10,                                                 # plugs into training
    "scoring": 11, "analysis": 11,                              # BLEU, chrF | failure modes
    "fast_decoding": 11,                                        # plugs into inference
    "export": 12,                                               # other engines
    "huggingface": 13, "argos": 13,                             # built on export
    "cli.shared": 14,                                           # the command line
    "onnx_export": 14,                                          # built on huggingface's tokenizer
    "cli.train": 15, "cli.translate": 15, "cli.export": 15,
    "cli": 16, "cli.__main__": 17,
}
# Where the package departs from STYLE.md's floors, and why (a module on the floor of one it
# imports): STYLE.md's rule is that no module imports from a neighbour on its own floor.
SPLIT_FLOORS = {
    ("corpus", "files"): "the corpus download keeps its files with the ground floor's "
                         "utilities: it sits one floor above them",
    ("corpus", "validate"): "the corpus checks its arguments with the ground floor's checks",
}
STYLE = Path(__file__).resolve().parents[2] / "shared" / "STYLE.md"


def style_floors(text: str) -> dict[str, int]:
    """The floor of each module STYLE.md's diagram names (0 = the ground floor): a row's
    leading words, as long as they are module names ("cli/ (...)" is the cli package)."""
    block = text[text.index("## The house's floors"):].split("```")[1]
    rows = [line for line in block.strip("\n").splitlines() if line.strip()]
    names = {m.split(".")[0] for m in FLOORS}
    floors = {}
    for height, line in enumerate(reversed(rows)):
        for word in line.split():
            word = "cli" if word.startswith("cli/") else word
            if word not in names:
                break
            floors[word] = height
    return floors


# the core (the reader's path, chapters 01-20) knows nothing of speed: it never imports
# `fast` or `fast_decoding`
CORE = {m for m, floor in FLOORS.items() if floor < FLOORS["fast"]}
CORE |= {"scoring", "analysis"}   # chapters 17 and 20, above fast on STYLE.md's floors


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


def test_the_floors_are_styles():
    """One floor table: STYLE.md's diagram orders every module it names as FLOORS does,
    and each import that goes sideways on STYLE's floors is a split named above."""
    if not STYLE.is_file():
        pytest.fail(f"{STYLE} is missing: the project is checked out beside shared/")
    style = style_floors(STYLE.read_text())
    assert {"validate", "model", "cli", "export", "encoder", "decoder"} <= style.keys()
    top = {m: FLOORS[m] for m in FLOORS if "." not in m} | {"cli": FLOORS["cli.shared"]}
    wrong = [(a, b) for a in style for b in style
             if style[a] < style[b] and not top[a] < top[b]]
    assert not wrong, f"FLOORS orders these against STYLE.md's diagram: {wrong}"
    sideways = set()
    for path in MODULES:
        here = module_name(path).split(".")[0]
        for there in {m.split(".")[0] for m in package_imports(path)}:
            if here != there and here in style and there in style \
                    and style[there] >= style[here]:
                sideways.add((here, there))
    assert sideways == set(SPLIT_FLOORS), (sideways, set(SPLIT_FLOORS))


def test_style_floors_reads_a_diagram():
    diagram = "## The house's floors\n```\ncli/ (train)   the command line\nmodel   " \
              "TransformerConfig, the model\nencoder   decoder   layers\n```\n"
    assert style_floors(diagram) == {"cli": 2, "model": 1, "encoder": 0, "decoder": 0}


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
    # cli/train.py: the whole of `train` (chapter 23), its data the verses or --pairs
    limit = {"training": 450, "train": 680}.get(path.stem, 600)
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
