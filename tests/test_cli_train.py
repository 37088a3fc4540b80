"""transformer_lit.cli.train (chapter 23): `transformer-lit train` refuses a mistake before any work, in one line, and stops saved, with one line, on a signal, a full disk, a non-finite loss or too little memory."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess

import pytest
from synthetic import COMMAND, TINY, assert_one_line_error, env, one_line_error, run, start_run

import transformer_lit.cli.train as cli_train
from transformer_lit.checkpoints import load_checkpoint
from transformer_lit.runs import RUN_MARKER

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


# --- from the hostile-input rounds (issues 32, 39, 47, 50) --------------------


def fsize_limit(limit: int):
    "For a subprocess: files above `limit` bytes cannot be written (EFBIG), as on a full disk."
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_a_signal_saves_the_run_and_says_how_to_continue(cache, tmp_path, sig):
    "SIGHUP (the terminal closed) ended with 130 and no save (issue 50); now as SIGINT: 128 + it."
    out = tmp_path / "run"
    proc = start_run(out)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig and err.count("\n") == 1, err
    assert f"stopped by {sig.name} at step" in err and "continue with --resume" in err, err
    step = int(err.split(" at step ")[1].split(";")[0])
    assert load_checkpoint(out / "checkpoint.pt")["state"]["step"] == step   # saved where it stopped


def test_an_empty_out_and_resume_with_force_are_refused(cache, tmp_path, capsys, monkeypatch):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert_one_line_error(*run(["train", *TINY, "--steps", "1", "--out", ""], capsys), "--out", "empty")
    assert list(here.iterdir()) == []
    argv = ["train", *TINY, "--steps", "1", "--out", str(tmp_path / "run"), "--resume", "--force"]
    assert_one_line_error(*run(argv, capsys), "--resume", "--force")


def test_refusals_come_before_any_work(tmp_path, capsys, monkeypatch):
    "In-process, with the corpus and the training made to fail: the refusal must come first."
    monkeypatch.setattr(cli_train, "load_verses", lambda: pytest.fail("the corpus was read"))
    for options in (["--checkpoint-every", "0"], ["--bleu-sentences", "-1"], ["--seed", "1" + "0" * 20]):
        assert_one_line_error(*run(["train", "--steps", "1", "--out", str(tmp_path / "r"), *options], capsys),
                              options[0])


def test_a_full_disk_is_one_line_naming_the_last_good_checkpoint(cache, tmp_path, capsys):
    out = tmp_path / "run"
    assert run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys)[0] == 0
    before = (out / "checkpoint.pt").read_bytes()
    done = subprocess.run(COMMAND + ["train", "--steps", "4", "--out", str(out), "--resume", "--quiet"],
                          capture_output=True, text=True, env=env(), timeout=300, preexec_fn=fsize_limit(50_000))
    one_line_error(done, "cannot save", "File too large", "last good checkpoint (step 2)", str(out / "checkpoint.pt"))
    assert (out / "checkpoint.pt").read_bytes() == before and not list(out.glob(".*.tmp"))
    fresh = tmp_path / "fresh"
    done = subprocess.run(COMMAND + ["train", *TINY, "--steps", "4", "--out", str(fresh)],
                          capture_output=True, text=True, env=env(), timeout=300, preexec_fn=fsize_limit(50_000))
    one_line_error(done, "cannot save", "no checkpoint of this run was saved")


def test_a_non_finite_loss_before_any_checkpoint_says_so(cache, tmp_path, capsys):
    argv = ["train", *TINY, "--steps", "50", "--out", str(tmp_path / "run"), "--lr-factor", "1e30", "--warmup", "1"]
    assert_one_line_error(*run(argv, capsys), "at step", "no checkpoint of this run was saved")


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_files_follow_the_umask(cache, tmp_path, capsys, umask):
    out = tmp_path / "run"
    before = os.umask(umask)
    try:
        status, _, err = run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys)
    finally:
        os.umask(before)
    assert status == 0, err
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
    written = ["checkpoint.pt", "config.json", "model.safetensors", "tokenizer.model", "results.json", RUN_MARKER]
    assert modes == dict.fromkeys(written, 0o666 & ~umask)


def test_threads_are_bounded_by_the_cpus(model_pt, capsys):
    argv = ["translate", "--checkpoint", str(model_pt), "--threads", "100000", "Hi."]
    assert_one_line_error(*run(argv, capsys), "--threads", f"1..{os.cpu_count()}")


def test_out_of_memory_in_training_is_one_line(cache, tmp_path, capsys, monkeypatch):
    def no_memory(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")

    monkeypatch.setattr(cli_train, "fit", no_memory)
    assert_one_line_error(*run(["train", *TINY, "--steps", "2", "--out", str(tmp_path / "run")], capsys),
                          "out of memory", "--max-tokens")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_before_training_starts_leaves_no_folder(tmp_path, capsys, cache, monkeypatch, sig):
    encode, before = cli_train._encode, signal.getsignal(sig)

    def signalled(*args, **kwargs):   # arrives while the data is prepared, the folder taken
        assert (tmp_path / "new" / "run" / RUN_MARKER).exists()
        os.kill(os.getpid(), sig)
        return encode(*args, **kwargs)
    monkeypatch.setattr(cli_train, "_encode", signalled)
    status, out, err = run(["train", *TINY, "--steps", "2", "--out", str(tmp_path / "new" / "run")], capsys)
    assert status == 128 + sig and f"interrupted by {sig.name}" in err, (status, err)
    assert not (tmp_path / "new").exists()   # the folder it made, and its lock, are gone
    assert signal.getsignal(sig) is before   # the handler it found is back


def test_compile_without_a_compiler_is_one_line(tmp_path, capsys, cache, monkeypatch):
    import transformer_lit.cli.shared as shared
    monkeypatch.setattr(shared.shutil, "which", lambda name: None)   # no compiler on the PATH
    argv = ["train", *TINY, "--steps", "2", "--compile", "--out", str(tmp_path / "run")]
    assert_one_line_error(*run(argv, capsys), "--compile", "C++ compiler")
    assert not (tmp_path / "run").exists()   # refused before any work


def test_a_vocabulary_too_small_for_the_books_is_said_in_our_words(tmp_path, capsys, cache):
    "train --vocab-size 5 passed on sentencepiece's C++ line and its --character_coverage."
    argv = ["train", *TINY, "--steps", "1", "--out", str(tmp_path / "run")]
    argv[argv.index("--vocab-size") + 1] = "5"
    status, out, err = run(argv, capsys)
    assert_one_line_error(status, out, err, "--vocab-size 5: too small", "at least")
    assert "character_coverage" not in err and "trainer_interface" not in err
    assert not (tmp_path / "run").exists()


def test_results_that_cannot_be_written_name_the_cause_not_none(tmp_path, capsys, cache):
    """results.json a folder: 'cannot write the results in r1 (None); ... free some space'
    (issue 50). The cause is named and the advice fits it; the checkpoint is kept."""
    out = tmp_path / "r1"
    assert run(["train", *TINY, "--steps", "2", "--out", str(out), "--quiet"], capsys)[0] == 0
    (out / "results.json").unlink()
    (out / "results.json").mkdir()
    status, stdout, err = run(["train", "--steps", "4", "--out", str(out), "--resume",
                               "--quiet"], capsys)
    assert_one_line_error(status, stdout, err, f"{out / 'results.json'} is a folder",
                          "last good checkpoint (step 4)", "--resume")
    assert "None" not in err and "free some space" not in err


def test_an_unforeseen_file_error_names_its_file_not_the_output(monkeypatch, capsys, tmp_path):
    "Any OSError was 'cannot write the output (...)', also one about another file."
    import transformer_lit.cli.translate as translate_command

    def fails(args):
        raise IsADirectoryError(21, "Is a directory", str(tmp_path / "x.tmp"))
    monkeypatch.setattr(translate_command, "run_translate", fails)
    status, stdout, err = run(["translate", "Hi."], capsys)
    assert_one_line_error(status, stdout, err, f"{tmp_path / 'x.tmp'}: Is a directory")
    assert "output" not in err


def test_a_closed_standard_output_does_not_end_the_run(cache, tmp_path):
    """Issue 61: `train ... | head -1` stopped at the second validation line with
    status 0 and no word, saving nothing (and removing the run folder). Training goes
    on, says so once on standard error, and saves its files."""
    from transformer_lit.checkpoints import load_model_folder

    out = tmp_path / "run"
    options = [a for a in TINY if a != "--quiet"]   # a validation line every 20 steps
    proc = subprocess.Popen(COMMAND + ["train", *options, "--steps", "80", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env())
    first = proc.stdout.readline()
    proc.stdout.close()   # as `head -1` does once it has its line
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 0 and first, err[-2000:]
    assert err.count("standard output was closed by its reader") == 1, err[-2000:]
    assert "Traceback" not in err
    assert load_model_folder(out)[2]["steps"] == 80


def test_force_replaces_the_earlier_run_only_once_the_new_one_has_saved(cache, tmp_path,
                                                                        capsys):
    """Issue 61: `train --force` over a finished run deleted its checkpoint.pt, model and
    results.json before the first step; a setting found bad at step 2 (a loss of NaN)
    then left nothing of either run."""
    out = tmp_path / "run"
    assert run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys)[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = ["train", *TINY, "--steps", "4", "--out", str(out), "--force",
           "--lr-factor", "1e30"]
    assert_one_line_error(*run(bad, capsys), "nan")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    good = ["train", *TINY, "--steps", "3", "--out", str(out), "--force"]
    assert run(good, capsys)[0] == 0
    assert json.loads((out / "results.json").read_text())["steps"] == 3


def test_a_run_folder_swapped_for_a_link_writes_nothing_through_it(cache, tmp_path, capsys,
                                                                    monkeypatch):
    """Issue 61: another user who may rename entries in --out's parent moves the run folder
    away and links its name to V after the first checkpoint: every later write went by name,
    into V (its model and results replaced, status 0). The run writes through the folder it
    opened, and says where that folder now is."""
    victim, parent = tmp_path / "V", tmp_path / "P"
    victim.mkdir()
    parent.mkdir()
    for name in ("model.safetensors", "results.json", "checkpoint.pt"):
        (victim / name).write_text(f"the user's {name}")
    before = {p.name: p.read_bytes() for p in victim.iterdir()}
    out, moved = parent / "run", parent / "run.old"
    real, swapped = cli_train._save_run, []

    def swapping(run, state):   # the swap, made at the first save, before it writes
        if not swapped:
            out.rename(moved)
            out.symlink_to(victim)
            swapped.append(state.step)
        return real(run, state)

    monkeypatch.setattr(cli_train, "_save_run", swapping)
    argv = ["train", *TINY, "--steps", "4", "--checkpoint-every", "2", "--out", str(out)]
    status, stdout, err = run(argv, capsys)
    assert swapped == [2]
    assert {p.name: p.read_bytes() for p in victim.iterdir()} == before
    assert {"checkpoint.pt", "model.safetensors", "results.json"} <= {p.name for p in moved.iterdir()}
    assert_one_line_error(status, "", err, str(out), str(moved))


def test_the_wrote_line_shows_the_folder_name_escaped(cache, tmp_path, capsys, monkeypatch):
    "Issue 61: train's 'wrote ... in OUT' echoed --out's terminal escapes raw."
    monkeypatch.chdir(tmp_path)
    status, out, err = run(["train", *TINY, "--steps", "2", "--out", "r\x1b[2J"], capsys)
    assert status == 0 and "in r\\x1b[2J (translate with --checkpoint r\\x1b[2J)" in out, err
    assert "\x1b" not in out + err
