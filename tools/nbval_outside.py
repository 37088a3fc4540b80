"""Run nbval over the chapters the way a reader meets them: outside the repository, each
notebook alone in a folder, the package installed from a wheel (not editable).

    python tools/nbval_outside.py                        # every nbs/*.ipynb, quick
    python tools/nbval_outside.py nbs/01_overview.ipynb  # some of them
    python tools/nbval_outside.py --full                 # every cell as stored
    python tools/nbval_outside.py --jobs 1               # one notebook at a time
    python tools/nbval_outside.py --threads 2            # CPU threads per kernel

In a temporary folder: build a wheel from a copy of the sources, install it with
`pip install --target site/` (once for all the notebooks), copy each notebook into a
folder of its own, and run `pytest --nbval --nbval-current-env` on them with
PYTHONPATH=site, --jobs pytest runs at once (default 2), the slowest notebooks first and
one to a run, the others GROUP to a run (each notebook still in a kernel of its own),
each kernel with --threads CPU threads (default: the CPUs shared out among the jobs; more threads
than cores only wait for each other, and a two-core machine running two kernels of two
threads each spent minutes in that waiting). The kernel
inherits PYTHONPATH, and the venv's editable finder comes after the path entries, so
`import transformer_lit` finds the installed copy: a chapter that reads a file from the
repository, or package data missing from the wheel, fails here. The folder is removed
afterwards, also on failure. Exit status: 0 if every notebook passed, else 1.

The quick switch (the default; --full turns it off): the kernels see
TRANSFORMER_LIT_QUICK=1, and the cells tagged `quick-ignore-output` are run but their
outputs not compared (the copy gets nbval's `nbval-ignore-output` tag; the stored
notebook is untouched). A notebook whose live run takes minutes reads the variable in a
cell of its own, tagged `remove-cell` (the book does not show it) and
`quick-ignore-output`, and shortens that run; the cells whose outputs follow from the
run carry `quick-ignore-output`. The stored outputs stay those of the full run, which
`make notebooks` and `--full` execute.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from transformer_lit.figures import FIGURES_ENV, LANGUAGES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "transformer_lit"
# What the build reads: pyproject.toml, the readme and licence it names, the package.
# We build from a copy because setuptools writes build/ into the source tree, and a
# stale build/lib would put files in the wheel that the package no longer has.
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", PACKAGE)
QUICK_ENV = "TRANSFORMER_LIT_QUICK"
# transformer_lit.figures draws a figure in the languages FIGURES_ENV names: all of the
# book's, as tools/run_notebooks.py stores them (chapter 44)
BOTH_LANGUAGES = ",".join(LANGUAGES)
QUICK_TAG = "quick-ignore-output"
# The notebooks that take longest under nbval, slowest first (2-core machine, quick switch on,
# one thread per kernel; measured 2026-11-26: 19_your_model 68 s, 13_training 54 s,
# 16_inference 34 s; 2026-12-02: 30_onnx's group of four 82 s, the export most of it; the
# others from earlier runs): started first, they do not leave one worker running alone at
# the end.
SLOW = ("30_onnx", "19_your_model", "42_deeper_results", "13_training", "25_speed",
        "26_fast_decoding", "12_data", "32_cli", "16_inference", "09_transformer",
        "20_analysis", "11_corpus", "29_argos", "28_huggingface", "18_pretrained")
GROUP = 4  # the other notebooks, this many to one pytest run
# A kernel that exits before it answers, at its start: jupyter_client picks its five ports by
# binding port 0 and letting go, and the kernel binds them a moment later; the other job's
# kernels and clients, starting at the same time, can take one in between (CI, 2026-12-01:
# 23_cli_train's kernel, and no other, died so, every cell an error at setup). Such a run
# is run once more; a kernel that dies there again fails the notebook.
KERNEL_START_DIED = "Kernel died before replying to kernel_info"


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


def quick_copy(src: Path, dest: Path) -> None:
    "Copy notebook src to dest, the outputs of cells tagged QUICK_TAG not to be compared."
    nb = json.loads(src.read_text())
    for cell in nb["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if QUICK_TAG in tags:
            cell["metadata"]["tags"] = [*tags, "nbval-ignore-output"]
    dest.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def first(notebooks: list[Path]) -> list[Path]:
    "The slow notebooks first (SLOW's order), so that no worker starts one of them last."
    rank = {name: i for i, name in enumerate(SLOW)}
    return sorted(notebooks, key=lambda p: (rank.get(p.stem, len(SLOW)), p.name))


def groups(notebooks: list[Path], size: int = GROUP) -> list[list[Path]]:
    """The slow notebooks one to a pytest run, the others `size` to a run (each still in a
    kernel of its own): a pytest start-up costs about 3 s, a quarter of a short chapter."""
    slow = [[p] for p in notebooks if p.stem in SLOW]
    rest = [p for p in notebooks if p.stem not in SLOW]
    return slow + [rest[i : i + size] for i in range(0, len(rest), size)]


RUNNING: set[subprocess.Popen] = set()   # stopped if main is left early (Ctrl-C, SIGTERM)


def nbval(group: list[Path], env: dict[str, str]) -> tuple[str, int, float, str]:
    """pytest --nbval on the notebooks of group, each in its folder: (their names, exit
    status, seconds, output)."""
    t = time.perf_counter()
    # cwd the notebooks' parent folder: `python -m` puts it on sys.path, and only folders
    # are there; nbval starts each notebook's kernel in the notebook's own folder.
    cmd = [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-q",
           "-p", "no:cacheprovider", *(f"{nb.parent.name}/{nb.name}" for nb in group)]
    proc = subprocess.Popen(cmd, env=env, cwd=group[0].parent.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    RUNNING.add(proc)
    try:
        output, _ = proc.communicate()
    finally:
        RUNNING.discard(proc)
    names = " ".join(nb.name for nb in group)
    return names, proc.returncode, time.perf_counter() - t, output


def nbval_again_if_kernel_died(group: list[Path], env: dict[str, str]
                               ) -> tuple[str, int, float, str]:
    "nbval(group, env), once more if a kernel died at its start (KERNEL_START_DIED)."
    names, status, seconds, output = nbval(group, env)
    if status and KERNEL_START_DIED in output:
        print(f"{names}: a kernel died at its start; running them once more", flush=True)
        names, status, again, output = nbval(group, env)
        seconds += again
    return names, status, seconds, output


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every nbs/*.ipynb")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="notebooks run at once, each in its own kernel (default: %(default)s)")
    parser.add_argument("--threads", type=int,
                        help="CPU threads per kernel (default: the CPUs divided among --jobs)")
    parser.add_argument("--full", action="store_true",
                        help=f"run every cell as stored: no ${QUICK_ENV}, every output compared")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    threads = (args.threads if args.threads is not None
               else max(1, (os.cpu_count() or 1) // args.jobs))
    if threads < 1:
        parser.error(f"--threads must be at least 1, got {threads}")
    notebooks = [p.resolve() for p in args.notebooks]
    notebooks = first(notebooks or sorted((ROOT / "nbs").glob("*.ipynb")))
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
        # torch reads OMP_NUM_THREADS for its intra-op pool; MKL its own variable
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
        env.pop(QUICK_ENV, None)
        env[FIGURES_ENV] = BOTH_LANGUAGES   # figures drawn as the stored outputs were
        if not args.full:
            env[QUICK_ENV] = "1"
        check_import(site, env, cwd=tmp)
        copies = []
        for nb in notebooks:
            folder = tmp / "nbs" / nb.stem
            folder.mkdir(parents=True)
            if args.full:
                shutil.copy(nb, folder / nb.name)
            else:
                quick_copy(nb, folder / nb.name)
            copies.append(folder / nb.name)
        mode = "every cell as stored" if args.full else f"${QUICK_ENV}=1"
        print(f"{len(copies)} notebooks, {args.jobs} at a time, {threads} thread(s) each, "
              f"{mode}", flush=True)
        failed, times = [], {}
        pool = ThreadPoolExecutor(args.jobs)
        try:
            runs = [pool.submit(nbval_again_if_kernel_died, group, env)
                    for group in groups(copies)]
            for done in as_completed(runs):   # reported as they finish
                names, status, seconds, output = done.result()
                times[names] = seconds
                last = output.strip().splitlines()[-1] if output.strip() else ""
                print(f"{names}: {last} ({seconds:.0f}s)", flush=True)
                if status:
                    failed.append(names)
                    print(output, flush=True)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in list(RUNNING):
                proc.terminate()
        print(f"{sum(times.values()):.0f}s in notebooks; slowest: " + ", ".join(
            f"{n} {s:.0f}s" for n, s in sorted(times.items(), key=lambda kv: -kv[1])[:5]))
        if failed:
            print(f"failed: {' '.join(failed)}")
        return 1 if failed else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    # A terminated run (CI's cancel, kill) unwinds through main's finally like Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    sys.exit(main(sys.argv[1:]))
