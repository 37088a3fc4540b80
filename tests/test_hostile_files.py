"""Hostile input, round three (issue 32): the files the package writes and reads. The first-use
download never imports from the user's current folder; a run never writes through a link
planted in its folder, nor uses a folder that another user owns and anyone may write in;
temporary files get names no one can plant."""
from __future__ import annotations

import os
import signal
import sys
from importlib import resources
from pathlib import Path

import pytest

from synthetic import TINY, assert_one_line_error, run
from transformer_lit import corpus, files, runs


@pytest.fixture
def alarm():
    "Fail a test that would otherwise wait for ever (a FIFO read): SIGALRM after 30 s."
    def ring(*_):
        raise TimeoutError("the test waited 30 s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_the_download_never_imports_from_the_current_folder(tmp_path, monkeypatch):
    work, marker = tmp_path / "work", tmp_path / "ran"
    work.mkdir()
    # what a pip.py in the user's folder would do if `python -m pip` imported it
    (work / "pip.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    monkeypatch.chdir(work)
    monkeypatch.setenv("PYTHONPATH", str(work))
    # offline and quick: pip finds no index and nothing where it may look
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nothing"))
    with pytest.raises(corpus.CorpusError, match="could not download"):
        corpus.fetch_wheel(tmp_path / "cache")
    assert not marker.exists()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == []   # nothing left


def test_the_run_lock_is_never_written_through_a_link(tmp_path, capsys):
    folder, victim = tmp_path / "run", tmp_path / "victim.txt"
    folder.mkdir()
    victim.write_text("precious\n")
    (folder / runs.LOCK_FILE).symlink_to(victim)
    with pytest.raises(runs.RunFolderError, match="symbolic link"):
        runs.take_run_folder(folder, resume=False, force=False)
    assert victim.read_text() == "precious\n"
    status, out, err = run(["train", *TINY, "--steps", "1", "--out", str(folder)], capsys)
    assert_one_line_error(status, out, err, "symbolic link", runs.LOCK_FILE)
    assert victim.read_text() == "precious\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_of_another_user_that_anyone_may_write_in_is_refused(tmp_path, capsys):
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chown(folder, 4242, 4242)
    folder.chmod(0o777)
    for check in (runs.check_run_folder, runs.take_run_folder):
        with pytest.raises(runs.RunFolderError, match="another user"):
            check(folder, False, False)
    status, out, err = run(["train", *TINY, "--steps", "1", "--out", str(folder)], capsys)
    assert_one_line_error(status, out, err, "another user", "folder of your own")
    assert list(folder.iterdir()) == []
    folder.chmod(0o755)   # the same folder, writable by its owner alone, is fine
    fd, created = runs.take_run_folder(folder, False, False)
    runs.release_run_folder(folder, fd, created)


def test_a_run_never_writes_into_the_installed_package(capsys):
    "Before: `train --out <package>/pretrained --force` deleted the shipped model."
    shipped = Path(str(resources.files("transformer_lit"))) / "pretrained"
    before = sorted((p.name, p.stat().st_mtime_ns) for p in shipped.iterdir())
    for out in (shipped, shipped / "new-run", shipped.parent):
        for extra in ([], ["--force"]):
            argv = ["train", *TINY, "--steps", "1", "--out", str(out), *extra]
            assert_one_line_error(*run(argv, capsys), "inside the installed package")
    assert sorted((p.name, p.stat().st_mtime_ns) for p in shipped.iterdir()) == before


def test_a_checked_file_is_never_written_through_a_planted_name(tmp_path):
    victim, path = tmp_path / "victim.txt", tmp_path / "verses.tsv"
    victim.write_text("precious\n")
    # the fixed names of earlier versions, planted as links to the victim
    for name in ("verses.tsv.part", f".verses.tsv.{os.getpid()}.tmp"):
        (tmp_path / name).symlink_to(victim)
    corpus.write_checked(["a header", "a row"], path)
    assert corpus.read_checked(path) == ["a header", "a row"]
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.glob(".verses.tsv.*")) == [
        f".verses.tsv.{os.getpid()}.tmp"]   # the planted link only: no temporary file left


def test_read_small_file_takes_regular_files_only(tmp_path, alarm):
    (tmp_path / "ok").write_text("{}")
    assert files.read_small_file(tmp_path / "ok", 10) == "{}"
    (tmp_path / "big").write_text("x" * 11)
    with pytest.raises(ValueError, match="larger than 10 bytes"):
        files.read_small_file(tmp_path / "big", 10)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "folder").mkdir()
    for name in ("fifo", "folder"):
        with pytest.raises(OSError, match="not a regular file"):
            files.read_small_file(tmp_path / name, 10)
    with pytest.raises(OSError):   # a link is not followed
        files.read_small_file(tmp_path / "zero", 10)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
