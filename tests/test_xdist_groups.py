"""make test runs the tests in two processes with `--dist loadgroup`, and the files that
build a costly fixture (an ONNX export, an Argos package, a browser) keep all their tests
in one process with `xdist_group`. pytest 9.2 and pytest-xdist 3.8 together drop the
mark without a word (pytest-xdist #1386): every fixture was then built in both processes.
This test holds that the installed pair still honours it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

GROUPED = '''
import os
import pytest
pytestmark = pytest.mark.xdist_group("costly")

@pytest.mark.parametrize("i", range(8))
def test_grouped(i):
    with open("workers.txt", "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
'''
LOOSE = '''
import pytest

@pytest.mark.parametrize("i", range(8))
def test_loose(i):
    pass
'''


def test_a_group_runs_in_one_process(tmp_path):
    pytest.importorskip("xdist")
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_loose.py").write_text(LOOSE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist",
                        "loadgroup", "-p", "no:cacheprovider", "-p", "no:randomly"],
                       cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 8 and len(set(workers)) == 1, workers
