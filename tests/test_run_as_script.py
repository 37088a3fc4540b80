"""tools/run_as_script.py, which runs a chapter's cells on a machine without Jupyter (the lent
GPUs): a cell's last expression is shown as Jupyter shows it, a failed assert is recorded and the
run goes on, any other error is recorded and ends it."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "run_as_script.py"
# the tool's main, in this process: one import of torch and matplotlib for all the tests
_spec = importlib.util.spec_from_file_location("run_as_script", TOOL)
run_as_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_as_script)


def notebook(path: Path, *sources: str) -> Path:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# a title"]}]
    cells += [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
               "source": [s]} for s in sources]
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}))
    return path


def run(tmp_path: Path, *sources: str) -> tuple[int, dict]:
    nb = notebook(tmp_path / "chapter.ipynb", *sources)
    out = tmp_path / "out.json"
    argv, cwd = sys.argv, os.getcwd()
    sys.argv = [str(TOOL), str(nb), str(out)]
    try:   # main moves to the notebook's folder, as a kernel starts there
        status = run_as_script.main()
    finally:
        sys.argv = argv
        os.chdir(cwd)
    return status, json.loads(out.read_text())


def test_cells_share_a_namespace_and_show_their_last_value(tmp_path):
    status, record = run(tmp_path, "x = 20", "print('x is', x)\nx + 22", "None")
    assert status == 0
    assert [c["stdout"] for c in record["cells"]] == ["", "x is 20\n42\n", ""]
    assert all(c["error"] is None for c in record["cells"])


def test_a_failed_assert_is_recorded_and_the_run_goes_on(tmp_path):
    status, record = run(tmp_path, "assert 1 == 2, 'no'", "print('after')")
    assert status == 1
    assert "AssertionError: no" in record["cells"][0]["error"]
    assert record["cells"][1]["stdout"] == "after\n"


def test_another_error_ends_the_run(tmp_path):
    status, record = run(tmp_path, "1 / 0", "print('never')")
    assert status == 1 and len(record["cells"]) == 1
    assert "ZeroDivisionError" in record["cells"][0]["error"]
