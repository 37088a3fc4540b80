"""Run nbval over the chapters the way a reader meets them: outside the repository, each
notebook alone in a folder, the package installed from a wheel (not editable).

    python tools/nbval_outside.py                        # every nbs/*.ipynb
    python tools/nbval_outside.py nbs/00_overview.ipynb  # some of them

In a temporary folder: build a wheel from a copy of the sources, install it with
`pip install --target site/`, copy the notebooks into nbs/, and run
`pytest --nbval --nbval-current-env` there with PYTHONPATH=site. The kernel inherits
PYTHONPATH, and the venv's editable finder comes after the path entries, so
`import transformer_lit` finds the installed copy: a chapter that reads a file from the
repository, or package data missing from the wheel, fails here. The folder is removed
afterwards, also on failure. Exit status: pytest's.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "transformer_lit"
# What the build reads: pyproject.toml, the readme and licence it names, the package.
# We build from a copy because setuptools writes build/ into the source tree, and a
# stale build/lib would put files in the wheel that the package no longer has.
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", PACKAGE)


def pip(*args: str) -> None:
    "The venv's pip, offline (--no-deps: nothing to fetch); output shown on failure."
    cmd = [sys.executable, "-m", "pip", *args, "--no-deps", "--no-index", "-q"]
    # Captured: setuptools warns at length that results/ is a package it was not told of
    # (pyproject.toml lists transformer_lit only); package-data still puts the files in.
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.stderr.write(r.stdout + r.stderr)
        r.check_returncode()


def build_wheel(dest: Path) -> Path:
    "Build the package's wheel from a copy of the sources into dest/wheel; return it."
    src = dest / "src"
    src.mkdir(parents=True)
    junk = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in BUILD_INPUTS:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=junk)
        else:
            shutil.copy(p, src / name)
    # --no-build-isolation: the venv's setuptools rather than one fetched from an index.
    pip("wheel", "--no-build-isolation", "-w", str(dest / "wheel"), str(src))
    shutil.rmtree(src)
    (wheel,) = (dest / "wheel").glob("*.whl")
    return wheel


def install(wheel: Path, site: Path) -> None:
    "Install the wheel into a folder of its own; the venv's editable install stays."
    pip("install", "--target", str(site), str(wheel))


def check_import(site: Path, env: dict[str, str], cwd: Path) -> None:
    "Stop unless Python with env imports the installed copy (else we test the repo)."
    code = f"import {PACKAGE}; print({PACKAGE}.__file__)"
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd,
                       check=True, capture_output=True, text=True)
    got = Path(r.stdout.strip()).resolve()
    if not got.is_relative_to(site.resolve()):
        sys.exit(f"error: {PACKAGE} imports from {got}, not from the wheel in {site}")


def main(argv: list[str]) -> int:
    notebooks = [Path(a).resolve() for a in argv]
    notebooks = notebooks or sorted((ROOT / "nbs").glob("*.ipynb"))
    tmp = Path(tempfile.mkdtemp(prefix="transformer-lit-outside-"))
    try:
        t = time.perf_counter()
        wheel = build_wheel(tmp)
        site = tmp / "site"
        install(wheel, site)
        print(f"{wheel.name}: built and installed in {time.perf_counter() - t:.1f}s",
              flush=True)
        # PYTHONPATH replaced, not extended: only the wheel may provide the package.
        # TRANSFORMER_LIT_CACHE passes through, so the corpus is not fetched again.
        env = {**os.environ, "PYTHONPATH": str(site)}
        nbs = tmp / "nbs"
        nbs.mkdir()
        check_import(site, env, cwd=nbs)
        for nb in notebooks:
            shutil.copy(nb, nbs / nb.name)
        # cwd nbs/: `python -m` puts the working folder on sys.path; only notebooks.
        cmd = [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env",
               "-p", "no:cacheprovider", "."]
        return subprocess.run(cmd, env=env, cwd=nbs).returncode
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    # A terminated run (CI's cancel, kill) unwinds through main's finally like Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    sys.exit(main(sys.argv[1:]))
