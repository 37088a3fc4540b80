"""The package is what the notebooks export, every module imports on its own, notebooks are stored clean."""
from __future__ import annotations

import filecmp
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(p.stem for p in (ROOT / "transformer_lit").glob("*.py") if p.stem != "__init__")
NOTEBOOKS = sorted((ROOT / "nbs").glob("*.ipynb"))


def test_package_is_the_export_of_the_notebooks(tmp_path):
    "Run nbdev_export on a copy of the committed notebooks; the result must equal transformer_lit/ byte for byte."
    for name in ("settings.ini", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "nbs", tmp_path / "nbs")
    exe = Path(sys.executable).with_name("nbdev_export")
    subprocess.run([str(exe)], cwd=tmp_path, check=True, capture_output=True, text=True)
    fresh, committed = tmp_path / "transformer_lit", ROOT / "transformer_lit"
    ours = {p.name for p in committed.glob("*.py")}
    theirs = {p.name for p in fresh.glob("*.py")}
    assert ours == theirs, f"modules differ: only committed {ours - theirs}, only exported {theirs - ours}"
    stale = [n for n in sorted(ours) if not filecmp.cmp(fresh / n, committed / n, shallow=False)]
    assert not stale, f"transformer_lit/{stale} differ from the notebooks' export: run `make export` and commit"


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_on_its_own(module):
    "Each module imports in a fresh interpreter (catches exported code that relies on a notebook-only import)."
    r = subprocess.run([sys.executable, "-c", f"import transformer_lit.{module}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "", f"importing transformer_lit.{module} printed: {r.stdout!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_was_run_top_to_bottom(path):
    "Stored execution counts are 1..n in order, every code cell ran, and no cell stored an error."
    nb = json.loads(path.read_text())
    cells = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    counts = [c.get("execution_count") for c in cells]
    assert counts == list(range(1, len(cells) + 1)), f"{path.name}: execution counts {counts}"
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name} stored an error output"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_opens_with_colab_setup(path):
    "The first code cell installs the package on Colab only, from the repository settings.ini names."
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import sync_repo
    finally:
        sys.path.pop(0)
    nb = json.loads(path.read_text())
    first = next(c for c in nb["cells"] if c["cell_type"] == "code")
    assert "".join(first["source"]) == sync_repo.setup_cell_source(sync_repo.repo_settings())
    assert not first.get("outputs"), "the set-up cell must do nothing outside Colab"


def test_config_names_the_settings_repository():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "sync_repo.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_version_matches(settings):
    import tomllib
    import transformer_lit
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert transformer_lit.__version__ == settings["version"] == project["version"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_stores_no_stderr(path):
    "Warnings in a stored notebook are noise for readers, and their file paths differ on every machine (nbval)."
    nb = json.loads(path.read_text())
    streams = [("".join(c["source"])[:60], "".join(o["text"])[:200]) for c in nb["cells"] if c["cell_type"] == "code"
               for o in c.get("outputs", []) if o.get("output_type") == "stream" and o.get("name") == "stderr"]
    assert not streams, f"{path.name} stores stderr output: {streams}"
