"""One list of runtime requirements: pyproject.toml's dependencies are lower bounds, the
ones `make lowest` installs (tools/lowest_requirements.py), settings.ini repeats them
for nbdev, no extra copies another, and every name the package takes from a runtime
dependency exists in the version installed (under `make lowest`: the lowest allowed)."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_tool():
    "tools/ is not a package: import lowest_requirements.py with tools/ on the path."
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import lowest_requirements
    finally:
        sys.path.pop(0)
    return lowest_requirements


def project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def test_settings_ini_repeats_the_dependencies(settings):
    "nbdev reads settings.ini's requirements: the same list, in the same order."
    assert settings["requirements"].split() == project()["dependencies"]


@pytest.mark.parametrize("requirement, bound", [
    ("torch>=2.5", ("torch", "2.5")),
    ("numpy >= 1.23.2, <3", ("numpy", "1.23.2")),
    ("sentencepiece<1,>=0.1.98", ("sentencepiece", "0.1.98")),
])
def test_lower_bound_reads_the_bound(requirement, bound):
    assert load_tool().lower_bound(requirement) == bound


@pytest.mark.parametrize("requirement", [
    "numpy", "tqdm>4.27", "torch==2.5", "torch~=2.5", "torch>=2.5,==2.5.1",
    "torch>=2.5rc1", "torch>=2.5,>=2.6", "torch>=2.5; python_version < '3.12'",
    "sacrebleu[ja]>=2.0",
])
def test_lower_bound_refuses_what_make_lowest_cannot_install_exactly(requirement):
    with pytest.raises(ValueError, match="bound|NAME>=VERSION"):
        load_tool().lower_bound(requirement)


def test_every_dependency_is_a_lower_bound_that_make_lowest_installs():
    "Each NAME>=VERSION becomes NAME==VERSION; the Makefile's target installs the list."
    deps = project()["dependencies"]
    bounds = [re.fullmatch(r"([\w.-]+)>=([\d.]+)", d.replace(" ", "")) for d in deps]
    assert all(bounds), f"not all of {deps} are NAME>=VERSION"
    assert load_tool().lowest(deps) == [f"{m[1]}=={m[2]}" for m in bounds]
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^lowest:\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "the Makefile has no lowest target"
    lines = recipe.group(1)
    assert "tools/lowest_requirements.py > $(LOWEST)/lowest.txt" in lines
    assert "pip install -q -r $(LOWEST)/lowest.txt" in lines
    assert "--no-deps -e ." in lines
    assert "tools/lowest_requirements.py --check" in lines


def test_check_compares_the_installed_release_with_the_bound():
    tool = load_tool()
    versions = {"torch": "2.5.0+cu124", "numpy": "1.23.2", "tqdm": "4.67.1"}
    installed = versions.__getitem__
    assert tool.mismatches(["torch>=2.5", "numpy>=1.23.2"], installed) == []
    assert tool.mismatches(["tqdm>=4.27"], installed) == [
        "tqdm: 4.67.1 is installed, the bound is 4.27"
    ]


@pytest.mark.parametrize("version, same", [
    ("2.5.post1", False), ("2.5.0+cpu", True), ("2.5rc1", False), ("2.5.0", True),
    ("2.6.0.dev20240101+cpu", False), ("local-build", False),
])
def test_check_reads_post_releases_and_local_builds_without_a_traceback(version, same):
    "Issue 61: '2.5.post1' and a local build's version ended in int()'s ValueError."
    found = load_tool().mismatches(["torch>=2.5"], {"torch": version}.__getitem__)
    assert found == ([] if same else [f"torch: {version} is installed, the bound is 2.5"])


@pytest.mark.parametrize("text, said", [
    ("[project\nname = 1", "is not TOML"),
    ("[tool.x]\na = 1\n", "has no [project] table"),
    (b"\xff\xfe", "is not TOML"),
])
def test_a_pyproject_that_cannot_be_read_is_one_line(tmp_path, capsys, monkeypatch,
                                                     text, said):
    tool = load_tool()
    path = tmp_path / "pyproject.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    monkeypatch.setattr(tool.project, "__defaults__", (tmp_path,))
    for argv in ([], ["--check"], ["--tools", "pytest"]):
        assert tool.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("lowest_requirements.py: pyproject.toml: ") and said in err
        assert err.count("\n") == 1


def test_the_test_tools_are_the_dev_extras_pins():
    tool, dev = load_tool(), project()["optional-dependencies"]["dev"]
    pins = tool.pins(["pytest", "pytest_xdist"], dev)
    assert [p.split("==")[0] for p in pins] == ["pytest", "pytest-xdist"]
    assert all(p in dev for p in pins)
    with pytest.raises(ValueError, match="no exact pin in the dev extra for fastcore"):
        tool.pins(["fastcore"], dev)  # "fastcore<2": a bound, not a pin


def test_no_extra_is_a_copy_of_another():
    extras = project()["optional-dependencies"]
    copies = [(a, b) for a, b in itertools.combinations(extras, 2)
              if sorted(extras[a]) == sorted(extras[b])]
    assert not copies, f"extras with the same list: {copies}"


def imported_names(tree: ast.Module, roots: set[str]) -> dict[str, str]:
    "{local name: dotted name} for every import from one of roots (modules) in tree."
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in roots:
                    aliases[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0])
        elif (isinstance(node, ast.ImportFrom) and node.module and not node.level
              and node.module.split(".")[0] in roots):
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def dotted(node: ast.Attribute, aliases: dict[str, str]) -> str | None:
    "`torch.amp.GradScaler` for node, from its name's import; None if not imported."
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    names = [aliases[node.id], *reversed(parts)]
    # private names (torch.ops.mkldnn._linear_pointwise) have a fallback beside them
    public = list(itertools.takewhile(lambda n: not n.startswith("_"), names))
    return ".".join(public) or None


def names_used(roots: set[str]) -> dict[str, str]:
    "{dotted name: first file naming it} of each name the package takes from roots."
    used = {}
    for path in sorted((ROOT / "transformer_lit").rglob("*.py")):
        tree = ast.parse(path.read_text())
        aliases = imported_names(tree, roots)
        for full in aliases.values():
            used.setdefault(full, path.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (name := dotted(node, aliases)):
                used.setdefault(name, path.name)
    return used


def resolve(name: str) -> object:
    "The object a dotted name names, importing submodules on the way."
    parts = name.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 2):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[:i]))
    return obj


def test_every_name_taken_from_a_dependency_exists_in_the_installed_version():
    "Also the paths no unit test runs here: CUDA, running out of memory, torch.compile."
    roots = {load_tool().lower_bound(d)[0] for d in project()["dependencies"]}
    # each runtime dependency is imported under its own name (add a map if one is not)
    assert all(importlib.util.find_spec(r) for r in roots)
    used = names_used(roots)
    assert {"torch.amp.GradScaler", "torch.OutOfMemoryError", "tqdm.auto.tqdm",
            "sacrebleu.CHRF", "torch.nn.functional.scaled_dot_product_attention",
            "sentencepiece.SentencePieceTrainer.train"} <= set(used)
    missing = []
    for name, file in sorted(used.items()):
        try:
            resolve(name)
        except (AttributeError, ImportError) as e:
            missing.append(f"{name} ({file}): {e}")
    assert not missing, "\n".join(missing)
