"""transformer_lit.files (chapter 33): atomic writes that change no mode by name and read
the umask without changing it, and the one lock helper that runs and exports share."""
from __future__ import annotations

import errno
import fcntl
import os
import threading
from pathlib import Path

import pytest

from transformer_lit import files
from transformer_lit.files import (
    LockBusy, check_unlocked, current_umask, holding_lock, release_lock, take_lock,
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
