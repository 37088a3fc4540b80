"""transformer_lit.files (chapter 34): atomic writes that change no mode by name and read
the umask without changing it, and the one lock helper that runs and exports share."""
from __future__ import annotations

import errno
import fcntl
import os
import signal
import threading
from pathlib import Path

import pytest
from synthetic import TINY, assert_one_line_error, run

from transformer_lit import bible, files
from transformer_lit.files import (
    LockBusy,
    check_unlocked,
    current_umask,
    holding_lock,
    release_lock,
    take_lock,
    write_atomically,
)


def test_a_temporary_file_swapped_for_a_link_changes_nothing_it_points_to(tmp_path):
    """Issue 61: write_atomically chmod-ed its temporary file by name, so a link put in
    its place during the write made a 0o600 file 0o644; the rename then put the link in
    the target's place."""
    victim = tmp_path / "secret.txt"
    victim.write_text("mine")
    victim.chmod(0o600)
    target = tmp_path / "out.bin"

    def swap_then_write(f):
        f.write(b"data")
        (tmp,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        tmp.unlink()
        tmp.symlink_to(victim)  # another user's move, at the first write

    with pytest.raises(OSError, match="changed by another process"):
        write_atomically(target, swap_then_write)
    assert victim.stat().st_mode & 0o777 == 0o600 and victim.read_text() == "mine"
    assert not target.exists() and not target.is_symlink()


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_new_file_has_the_umasks_mode_and_the_umask_is_never_changed(
    tmp_path, monkeypatch, umask
):
    """The mode comes from open()'s 0o666 cut by the kernel; the umask is read from
    /proc, not set to 0 for a moment (another thread creating a file then got 0o666)."""
    old = os.umask(umask)
    try:
        monkeypatch.setattr(os, "umask", lambda *a: pytest.fail("os.umask was called"))
        assert current_umask() == umask
        write_atomically(tmp_path / "f", lambda f: f.write(b"x"))
    finally:
        monkeypatch.undo()
        os.umask(old)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o666 & ~umask


def hold(path: Path, ready: threading.Event, done: threading.Event) -> None:
    "Hold the lock at path (a thread stands in for a process: flock locks an open file)."
    with holding_lock(path, "the folder"):
        ready.set()
        done.wait(10)


@pytest.fixture
def held(tmp_path):
    "The lock at tmp_path/.lock, held by another holder until the test ends."
    ready, done = threading.Event(), threading.Event()
    thread = threading.Thread(target=hold, args=(tmp_path / ".lock", ready, done))
    thread.start()
    assert ready.wait(10)
    yield tmp_path / ".lock"
    done.set()
    thread.join()


def test_a_lock_refused_at_once_names_its_holder(held):
    with pytest.raises(LockBusy) as e:
        take_lock(held, "runs/a")
    assert str(e.value) == f"runs/a is in use by pid {os.getpid()} on " \
        f"{os.uname().nodename} (refused at once)"
    with pytest.raises(LockBusy, match="runs/a is in use by pid"):
        check_unlocked(held, "runs/a")


def test_a_lock_that_waits_says_how_long_it_waited(held):
    with pytest.raises(LockBusy, match=r"out is in use by pid \d+ on .* \(waited 0.2 s\)"):
        take_lock(held, "out", wait=0.2)


def test_a_lock_waited_for_is_taken_when_its_holder_lets_go(tmp_path):
    path = tmp_path / ".lock"
    fd = take_lock(path, "x")
    threading.Timer(0.2, release_lock, (path, fd)).start()
    with holding_lock(path, "x", wait=5) as mine:
        assert os.pread(mine, 100, 0).startswith(f"pid {os.getpid()} ".encode())
    assert not path.exists()


def test_a_lock_file_that_cannot_be_removed_is_released_without_a_word(
    tmp_path, monkeypatch
):
    """Issue 61: on a file system turned read-only the unlink in release raised, masking
    the real message (the last good checkpoint)."""
    path = tmp_path / ".lock"
    fd = take_lock(path, "x")

    def read_only(self, missing_ok=False):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "unlink", read_only)
    release_lock(path, fd)
    monkeypatch.undo()
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)
    take_lock(path, "x")  # free: the stale file is locked again


def test_a_lock_is_never_taken_through_a_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / ".lock").symlink_to(victim)
    with pytest.raises(OSError) as e:
        take_lock(tmp_path / ".lock", "x")
    assert e.value.errno == errno.ELOOP and victim.read_text() == "keep"


def test_the_users_own_flock_on_the_parent_does_not_block_an_export(tmp_path):
    """Issue 61: `flock DIR transformer-lit export ... DIR/out`, the usual way to queue
    jobs, waited 30 s and blamed another export: the export locked DIR itself."""
    from transformer_lit.export import write_export_folder

    mine = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(mine, fcntl.LOCK_EX)  # as flock(1) holds it for the command it runs
    try:
        write_export_folder(tmp_path / "out", lambda d: (d / "a.txt").write_text("a"))
    finally:
        os.close(mine)
    assert (tmp_path / "out" / "a.txt").read_text() == "a"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_every_lock_is_the_one_helper():
    "runs and export take their locks through files.take_lock: one rule, one message."
    package = Path(files.__file__).parent
    users = {p.name for p in package.rglob("*.py") if "fcntl.flock(" in p.read_text()}
    assert users == {"files.py"}


# --- from the hostile-input rounds (issues 32, 39, 47, 50) --------------------


@pytest.mark.usefixtures("one_thread")
def test_a_missing_home_folder_is_never_created(model_pt, tmp_path, capsys, monkeypatch):
    home = tmp_path / "gone" / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(bible.CACHE_ENV, raising=False)
    argv = ["translate", "--checkpoint", str(model_pt), "--beam", "4", "One.", "Two.", "Three.", "Four."]
    status, out, err = run(argv, capsys)
    assert status == 0 and len(out.splitlines()) == 4, err
    assert not (tmp_path / "gone").exists()
    argv = ["train", *TINY, "--steps", "2", "--out", str(tmp_path / "run")]
    assert_one_line_error(*run(argv, capsys), "home folder", "does not exist", bible.CACHE_ENV)
    assert not (tmp_path / "gone").exists()


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("given, said", [
    ("~nosuchuser-transformer-lit/cache", "home folder does not exist"),
    ("dangling", "a link to nothing"),
])
def test_a_cache_folder_that_cannot_be_is_one_line(given, said, tmp_path, monkeypatch, capsys):
    "~nosuchuser was a RuntimeError traceback; a dangling link was '(File exists)'."
    from transformer_lit import files
    if given == "dangling":
        (tmp_path / "dangling").symlink_to(tmp_path / "gone")
        given = str(tmp_path / "dangling")
    monkeypatch.setenv(files.CACHE_ENV, given)
    with pytest.raises(files.CacheError, match=said):
        files.cache_dir()
    argv = ["train", *TINY, "--steps", "2", "--out", str(tmp_path / "run")]
    assert_one_line_error(*run(argv, capsys), said, files.CACHE_ENV)


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


def test_a_checked_file_is_never_written_through_a_planted_name(tmp_path):
    victim, path = tmp_path / "victim.txt", tmp_path / "verses.tsv"
    victim.write_text("precious\n")
    # the fixed names of earlier versions, planted as links to the victim
    for name in ("verses.tsv.part", f".verses.tsv.{os.getpid()}.tmp"):
        (tmp_path / name).symlink_to(victim)
    bible.write_checked(["a header", "a row"], path)
    assert bible.read_checked(path) == ["a header", "a row"]
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
