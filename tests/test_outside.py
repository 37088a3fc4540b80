"""The wheel a reader installs holds the whole package: every module and the package
data the chapters read (make test's nbval runs on an install of this wheel)."""
from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "transformer_lit"
sys.path.insert(0, str(ROOT / "tools"))
import nbval_outside  # noqa: E402


def test_wheel_holds_modules_and_package_data(tmp_path):
    "Build the wheel as tools/nbval_outside.py does; list what it must contain."
    wheel = nbval_outside.build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    want = {f"transformer_lit/{p.name}" for p in PKG.glob("*.py")}
    results = [p for p in (PKG / "results").rglob("*") if p.is_file()]
    assert results, "transformer_lit/results/ is empty: the measurements are gone"
    want |= {p.relative_to(ROOT).as_posix() for p in results}
    # The shipped model (chapter 14's three files) and its card
    for name in ("config.json", "model.safetensors", "tokenizer.model", "MODEL_CARD.md"):
        assert (PKG / "pretrained" / name).is_file(), name
        want.add(f"transformer_lit/pretrained/{name}")
    missing = sorted(want - names)
    assert not missing, f"the wheel lacks {missing}: see [tool.setuptools.package-data]"


def test_the_quick_copy_ignores_only_the_tagged_outputs(tmp_path):
    "Under the quick switch, a cell tagged quick-ignore-output gets nbval's ignore tag."
    cell = {"cell_type": "code", "execution_count": 1, "id": "a", "metadata": {},
            "outputs": [], "source": "print(1)"}
    nb = {"cells": [{**cell, "metadata": {"tags": [nbval_outside.QUICK_TAG, "remove-cell"]}},
                    {**cell, "id": "b"}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    src, dest = tmp_path / "src.ipynb", tmp_path / "dest.ipynb"
    src.write_text(json.dumps(nb))
    nbval_outside.quick_copy(src, dest)
    tags = [c["metadata"].get("tags") for c in json.loads(dest.read_text())["cells"]]
    assert tags == [[nbval_outside.QUICK_TAG, "remove-cell", "nbval-ignore-output"], None]


def test_the_slow_notebooks_start_first():
    names = ["01_overview", "13_training", "16_inference", "02_positional_encoding"]
    got = [p.stem for p in nbval_outside.first([Path(f"{n}.ipynb") for n in names])]
    slow = [n for n in nbval_outside.SLOW if n in names]
    assert got == slow + sorted(set(names) - set(slow))
    assert all((ROOT / "nbs" / f"{n}.ipynb").exists() for n in nbval_outside.SLOW)


def test_a_kernel_that_died_at_its_start_is_run_once_more(monkeypatch):
    "Only a kernel's death at its start earns a second run, and only one."
    said = {"died": nbval_outside.KERNEL_START_DIED, "failed": "1 failed"}
    for first_output, runs_wanted in (("died", 2), ("failed", 1)):
        calls = []

        def fake(group, env, first_output=first_output):
            calls.append(group)
            if len(calls) == 1:
                return "a.ipynb", 1, 3.0, said[first_output]
            return "a.ipynb", 0, 2.0, "1 passed"

        monkeypatch.setattr(nbval_outside, "nbval", fake)
        names, status, seconds, _ = nbval_outside.nbval_again_if_kernel_died([Path("a")], {})
        assert len(calls) == runs_wanted
        assert (status, seconds) == ((0, 5.0) if runs_wanted == 2 else (1, 3.0))
