"""The wheel a reader installs holds the whole package: every module and the package
data the chapters read (make test's nbval runs on an install of this wheel)."""
from __future__ import annotations

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
    # The shipped model and its card: only once they exist in the source tree.
    for name in ("model.pt", "MODEL_CARD.md"):
        if (PKG / "pretrained" / name).exists():
            want.add(f"transformer_lit/pretrained/{name}")
    missing = sorted(want - names)
    assert not missing, f"the wheel lacks {missing}: see [tool.setuptools.package-data]"
