"""The package is what the notebooks export, every module imports on its own and uses what it
imports, notebooks are stored clean."""
from __future__ import annotations

import filecmp
import json
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import transformer_lit

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["transformer_lit"] + sorted(
    m.name for m in pkgutil.walk_packages(transformer_lit.__path__, "transformer_lit."))
NOTEBOOKS = sorted((ROOT / "nbs").glob("*.ipynb"))


def test_package_is_the_export_of_the_notebooks(tmp_path):
    "Run nbdev_export on a copy of the committed notebooks; the result must equal transformer_lit/ byte for byte."
    for name in ("settings.ini", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "nbs", tmp_path / "nbs")
    # the package's __init__.py is written by hand (its docstring, the map of the modules,
    # is held to the book by test_reading_order) but for its version line, which nbdev
    # writes from settings.ini: the export must leave the committed file as it is
    (tmp_path / "transformer_lit").mkdir()
    shutil.copy(ROOT / "transformer_lit" / "__init__.py", tmp_path / "transformer_lit")
    exe = Path(sys.executable).with_name("nbdev_export")
    subprocess.run([str(exe)], cwd=tmp_path, check=True, capture_output=True, text=True)
    fresh, committed = tmp_path / "transformer_lit", ROOT / "transformer_lit"
    # cli/__main__.py is the one hand-written module (nbdev cannot make a __main__)
    hand_written = {"cli/__main__.py"}
    ours = {p.relative_to(committed).as_posix() for p in committed.rglob("*.py")} - hand_written
    theirs = {p.relative_to(fresh).as_posix() for p in fresh.rglob("*.py")}
    assert ours == theirs, f"modules differ: only committed {ours - theirs}, only exported {theirs - ours}"
    stale = [n for n in sorted(ours) if not filecmp.cmp(fresh / n, committed / n, shallow=False)]
    assert not stale, f"transformer_lit/{stale} differ from the notebooks' export: run `make export` and commit"


# Each module imported with no module of the package loaded before it: its own imports,
# and theirs, run from scratch as in a fresh interpreter, starting from that module (an
# import cycle fails from one end and not the other). Only third-party modules (torch,
# numpy) stay loaded from one import to the next. One interpreter for all the modules.
IMPORT_EACH = """
import contextlib, importlib, io, sys
problems = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.partition(".")[0] == "transformer_lit"]:
        del sys.modules[loaded]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            importlib.import_module(name)
    except Exception as e:
        problems.append(f"{name}: {type(e).__name__}: {e}")
    if printed.getvalue():
        problems.append(f"importing {name} printed {printed.getvalue()!r}")
print("\\n".join(problems), end="")
"""


def test_every_module_imports_on_its_own():
    "Each module imports with none of the package loaded before it, and prints nothing."
    r = subprocess.run([sys.executable, "-c", IMPORT_EACH, *MODULES], capture_output=True,
                       text=True)
    assert (r.returncode, r.stdout) == (0, ""), r.stdout + r.stderr[-3000:]


def test_the_package_uses_what_it_imports_and_imports_what_it_uses():
    "ruff's F821 (an undefined name: a notebook-only import) and F401 (an unused import)."
    ruff = Path(sys.executable).with_name("ruff")
    r = subprocess.run([str(ruff), "check", "--no-cache", "--isolated", "--select", "F401,F821",
                        "--output-format", "concise", str(ROOT / "transformer_lit")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_was_run_top_to_bottom(path):
    "Stored execution counts are 1..n in order, every code cell ran, and no cell stored an error."
    nb = json.loads(path.read_text())
    cells = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    counts = [c.get("execution_count") for c in cells]
    assert counts == list(range(1, len(cells) + 1)), f"{path.name}: execution counts {counts}"
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name} stored an error output"


def load_sync_repo():
    "tools/ is not a package: import tools/sync_repo.py by putting tools/ on the path."
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import sync_repo
    finally:
        sys.path.pop(0)
    return sync_repo


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_opens_with_colab_setup(path):
    "The first code cell is the set-up cell for the repository settings.ini names."
    sync_repo = load_sync_repo()
    nb = json.loads(path.read_text())
    first = next(c for c in nb["cells"] if c["cell_type"] == "code")
    assert "".join(first["source"]) == sync_repo.setup_cell_source(sync_repo.repo_settings())
    assert not first.get("outputs"), "the set-up cell must do nothing in the venv"
    # issue 57: installation is not content; the page leaves it out, Colab shows it
    tags = first.get("metadata", {}).get("tags", [])
    assert sync_repo.SETUP_TAG in tags and "hide-input" not in tags, tags


def run_setup_cell(prelude: str) -> subprocess.CompletedProcess:
    "Run the set-up cell in a fresh interpreter where subprocess.run only prints."
    sync_repo = load_sync_repo()
    cell = sync_repo.setup_cell_source(sync_repo.repo_settings())
    assert max(map(len, cell.splitlines())) <= 88, "set-up cell wider than 88 columns"
    # a stand-in for pip: the test neither installs nor touches the network
    fake_pip = ("import subprocess\n"
                "subprocess.run = lambda args, **kw: print(args[1:], kw)\n")
    return subprocess.run([sys.executable, "-c", fake_pip + prelude + cell],
                          capture_output=True, text=True, cwd=ROOT / "nbs")


def test_setup_cell_does_nothing_where_the_package_imports():
    "In the repository's venv (nbval, the book) the cell prints and installs nothing."
    r = run_setup_cell("")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_setup_cell_installs_the_repository_where_the_import_fails(settings):
    "On Colab or a fresh Jupyter, pip installs the branch settings.ini names, quietly."
    no_package = "import sys\nsys.modules['transformer_lit'] = None  # import fails\n"
    r = run_setup_cell(no_package)
    assert r.returncode == 0, r.stderr
    url = f"git+{settings['git_url']}@{settings['branch']}"
    assert r.stdout == f"['-m', 'pip', 'install', '-q', {url!r}] {{'check': True}}\n"


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
