"""Training runs you can trust (chapter 32's `train`, chapter 13's `fit`): periodic checkpoints,
signals, validated settings, bit-exact resume, no silent overwrite. On the synthetic corpus of
synthetic.py written into a temporary cache, so no network is needed. `train` runs in this
process through `main`, except where a process of its own is the point (SIGTERM, kill -9)."""
from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import time
from importlib import resources
from pathlib import Path

import pytest
import torch
from synthetic import (
    COMMAND,
    ENGLISH,
    FRENCH,
    RESUME,
    TINY,
    VERSES,
    assert_one_line_error,
    run,
    same_tensors,
    start_run,
)

import transformer_lit.cli.train as cli_train
from transformer_lit import files as package_files, runs
from transformer_lit.checkpoints import load_checkpoint, load_model_folder, read_model_files
from transformer_lit.corpus import version_pairs
from transformer_lit.data import encode_pairs, train_tokenizer
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.recipe import TrainSettings
from transformer_lit.runs import RUN_FILES, RUN_MARKER, written_by_run
from transformer_lit.training import FitOptions, evaluate, fit, make_optimizer

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py
# what a finished run's folder holds: the marker, the checkpoint, the model folder's files
RUN_LISTING = [RUN_MARKER, "checkpoint.pt", "config.json", "model.safetensors", "results.json",
               "tokenizer.model"]


def train(capsys, *args: str) -> tuple[int, str, str]:
    "`transformer-lit train args` in this process."
    return run(["train", *args], capsys)


def trained(capsys, *args: str) -> None:
    status, _, err = train(capsys, *args)
    assert status == 0, err


def start(out, every: int) -> subprocess.Popen:
    "A long tiny run as a program of its own, saving every `every` steps into out."
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(COMMAND + ["train", *TINY, "--steps", "100000", "--checkpoint-every", str(every),
                                       "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for_checkpoint(out, proc: subprocess.Popen) -> None:
    deadline = time.time() + 120
    while not (out / "checkpoint.pt").exists() and time.time() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()


def files(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_resume_is_bit_exact_through_the_command_line(cache, tmp_path, capsys):
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    trained(capsys, *TINY, "--steps", "24", "--seed", "7", "--out", str(straight))
    trained(capsys, *TINY, "--steps", "12", "--seed", "7", "--out", str(halves))
    trained(capsys, "--steps", "24", "--out", str(halves), *RESUME)   # no --seed: the run's own (7)
    a, b = read_model_files(straight)[1], read_model_files(halves)[1]
    assert same_tensors(a, b), "the model folders differ"
    a, b = load_checkpoint(straight / "checkpoint.pt"), load_checkpoint(halves / "checkpoint.pt")
    assert same_tensors(a["optimizer"], b["optimizer"]) and same_tensors(a["snapshots"], b["snapshots"])
    assert a["settings"]["seed"] == b["settings"]["seed"] == 7


def test_sigterm_saves_a_resumable_checkpoint_and_says_so(cache, tmp_path, capsys):
    out = tmp_path / "run"
    proc = start(out, every=20)
    wait_for_checkpoint(out, proc)   # the first periodic save
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM == 143 and stderr.count("\n") == 1, stderr
    assert "stopped by SIGTERM at step" in stderr and "checkpoint.pt" in stderr and "--resume" in stderr
    step = int(stderr.split("at step ")[1].split(";")[0])
    assert load_checkpoint(out / "checkpoint.pt")["state"]["step"] == step
    assert not list(out.glob(".*.tmp"))
    trained(capsys, "--steps", str(step + 3), "--out", str(out), *RESUME)
    assert load_model_folder(out)[2]["steps"] == step + 3


def test_checkpoints_are_written_while_training(cache, tmp_path, capsys, monkeypatch):
    "Through the command line: checkpoint.pt replaced at steps 4, 8 and at the end, 10."
    out = tmp_path / "run"
    saved, replace = [], os.replace

    def recording(src, dst):   # checkpoints are written beside, then renamed over
        if os.path.basename(dst) == "checkpoint.pt":
            saved.append(torch.load(src, weights_only=True)["state"]["step"])
        replace(src, dst)

    monkeypatch.setattr(os, "replace", recording)
    trained(capsys, *TINY, "--steps", "10", "--checkpoint-every", "4", "--out", str(out))
    assert saved == [4, 8, 10]
    assert load_checkpoint(out / "checkpoint.pt")["state"]["step"] == 10
    assert load_model_folder(out)[2]["steps"] == 10
    assert sorted(p.name for p in out.iterdir()) == RUN_LISTING


def test_fit_calls_back_at_every_checkpoint():
    "fit alone: a run cut at step 9 would find the save of step 8."
    saved = []
    settings = TrainSettings(max_steps=9, max_tokens=512, warmup=2, checkpoint_every=4)
    tok = train_tokenizer(ENGLISH + FRENCH, vocab_size=90)
    pairs, _ = encode_pairs(version_pairs(VERSES), tok)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(tok.vocab_size, tok.vocab_size, share_embeddings=True))
    fit(model, make_optimizer(model, settings), (pairs, pairs), settings,
        options=FitOptions(progress=False, log=None, on_checkpoint=lambda s: saved.append(s.step)))
    assert saved == [4, 8]


def test_a_folder_holding_a_run_is_not_overwritten(cache, run_copy, capsys):
    before = (run_copy / "checkpoint.pt").read_bytes()
    assert_one_line_error(*train(capsys, *TINY, "--steps", "3", "--out", str(run_copy)),
                          "holds a run", "--resume", "--force")
    assert (run_copy / "checkpoint.pt").read_bytes() == before
    trained(capsys, *TINY, "--steps", "2", "--out", str(run_copy), "--force")
    assert load_checkpoint(run_copy / "checkpoint.pt")["state"]["step"] == 2


def test_bad_output_folders_are_refused_before_training(cache, tmp_path, capsys):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    assert_one_line_error(*train(capsys, *TINY, "--steps", "3", "--out", str(afile)), "is a file")
    assert_one_line_error(*train(capsys, *TINY, "--steps", "3", "--out", "/proc/no-such-dir"),
                          "not writable")


@pytest.mark.parametrize("options, words", [
    (["--lr-factor", "nan"], ["--lr-factor", "nan"]), (["--lr-factor", "-1"], ["--lr-factor"]),
    (["--minutes", "nan"], ["--minutes"]), (["--minutes", "-1"], ["--minutes"]),
    (["--label-smoothing", "1.5"], ["--label-smoothing"]), (["--dropout", "1.5"], ["--dropout"]),
    (["--dropout", "1"], ["--dropout"]), (["--warmup", "0"], ["--warmup"]),
    (["--max-tokens", "-3"], ["--max-tokens"]), (["--english", "4,x"], ["--english"]),
    (["--french", ""], ["--french"]), (["--vocab-size", "-5"], ["--vocab-size"]),
    (["--vocab-size", "0"], ["--vocab-size", "at least"]), (["--resume"], ["no checkpoint.pt"]),
    (["--checkpoint-every", "0"], ["--checkpoint-every"]),
    (["--checkpoint-every", "-1"], ["--checkpoint-every"]),
    (["--bleu-sentences", "-1"], ["--bleu-sentences"]),
    (["--seed", "99999999999999999999"], ["--seed"]), (["--seed", "-1"], ["--seed"]),
    (["--max-tokens", "1000000000000"], ["--max-tokens", "at most"]),
    (["--max-tokens", "10"], ["--max-tokens", "at least"])])
def test_settings_that_cannot_train_are_refused(cache, tmp_path, capsys, options, words):
    "One line naming the option (not a parameter's name), before --out or its parent is made."
    out = tmp_path / "a" / "run"
    status, stdout, err = train(capsys, *TINY, "--steps", "2", "--out", str(out), *options)
    if options[0] in ("--english", "--french"):   # refused by argparse itself: its usage first
        assert err.startswith("usage: "), err
        err = err.splitlines(keepends=True)[-1]
    assert_one_line_error(status, stdout, err, *words)
    assert "_" not in err.split("error: ")[1].split(" ")[0]
    assert not (tmp_path / "a").exists()


def test_options_that_cannot_change_on_resume_are_refused(cache, tiny_run, capsys):
    before = files(tiny_run)
    for option, value in (("--dropout", "0.3"), ("--vocab-size", "50"), ("--seed", "3"), ("--english", "k")):
        assert_one_line_error(*train(capsys, "--steps", "5", "--out", str(tiny_run), "--resume", option, value),
                              option)
    assert files(tiny_run) == before


@pytest.mark.parametrize("kw", [dict(clip_norm=-1.0), dict(label_smoothing=1.5), dict(lr_factor=math.inf),
                                dict(max_minutes=float("nan")), dict(eps=0.0), dict(checkpoint_minutes=0)])
def test_train_settings_validate_every_number(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        TrainSettings(max_steps=1, **kw)


def test_fit_refuses_empty_data_instead_of_looping():
    model = Transformer(TransformerConfig.tiny(20, 20))
    settings = TrainSettings(max_steps=3)
    with pytest.raises(ValueError, match="training and validation pairs"):
        fit(model, make_optimizer(model, settings), ([], []), settings, options=FitOptions(progress=False))


def test_a_non_finite_loss_stops_the_run_naming_the_step():
    tok = train_tokenizer(ENGLISH + FRENCH, vocab_size=90)
    pairs, _ = encode_pairs(version_pairs(VERSES), tok)
    model = Transformer(TransformerConfig.tiny(tok.vocab_size, tok.vocab_size, share_embeddings=True))
    settings = TrainSettings(max_steps=5, max_tokens=512, warmup=2)
    with torch.no_grad():  # the output projection's matrix: every training path reads it
        model.tgt_embed.weight.fill_(float("nan"))
    with pytest.raises(FloatingPointError, match="at step 1"):
        fit(model, make_optimizer(model, settings), (pairs, pairs), settings, options=FitOptions(progress=False, log=None))


def test_evaluating_on_zero_tokens_raises():
    model = Transformer(TransformerConfig.tiny(20, 20))
    with pytest.raises(ValueError, match="at least one target token"):
        evaluate(model, [])


def test_a_vocabulary_too_small_is_one_line(cache, tmp_path, capsys):
    options = TINY[:2] + TINY[4:]   # TINY without its --vocab-size
    for size in ("3", "10"):
        assert_one_line_error(*train(capsys, *options, "--vocab-size", size, "--steps", "2",
                                     "--out", str(tmp_path / size)), "--vocab-size")


def test_a_cache_path_that_is_a_file_is_one_line(tmp_path, monkeypatch, capsys):
    afile = tmp_path / "cache-file"
    afile.write_text("x")
    monkeypatch.setenv(package_files.CACHE_ENV, str(afile))
    assert_one_line_error(*train(capsys, *TINY, "--steps", "2", "--out", str(tmp_path / "run")),
                          "is a file", package_files.CACHE_ENV)


def test_resume_with_another_preset_is_refused(cache, run_copy, capsys):
    assert_one_line_error(*train(capsys, "--preset", "cpu", "--steps", "4", "--out", str(run_copy), "--resume"),
                          "--preset")
    trained(capsys, "--preset", "tiny", "--steps", "4", "--out", str(run_copy), *RESUME)
    assert load_checkpoint(run_copy / "checkpoint.pt")["state"]["step"] == 4


def test_after_kill_9_the_last_checkpoint_resumes(cache, tmp_path, capsys):
    out = tmp_path / "run"
    proc = start(out, every=3)
    wait_for_checkpoint(out, proc)
    time.sleep(2.0)   # several more saves, one of them perhaps under way
    proc.kill()
    proc.communicate(timeout=60)
    step = load_checkpoint(out / "checkpoint.pt")["state"]["step"]
    assert step >= 3 and step % 3 == 0
    trained(capsys, "--steps", str(step + 2), "--out", str(out), *RESUME)
    assert load_checkpoint(out / "checkpoint.pt")["state"]["step"] == step + 2
    assert not list(out.glob(".*.tmp"))


def test_a_batch_budget_below_the_longest_pair_is_refused_and_not_saved(cache, run_copy, capsys):
    before = (run_copy / "checkpoint.pt").read_bytes()
    assert_one_line_error(*train(capsys, "--steps", "4", "--out", str(run_copy), "--resume",
                                 "--max-tokens", "10"), "--max-tokens 10")
    assert (run_copy / "checkpoint.pt").read_bytes() == before   # the bad setting was not written
    trained(capsys, "--steps", "4", "--out", str(run_copy), *RESUME)



def test_a_pipe_in_place_of_the_run_marker_is_refused_not_waited_on(tmp_path):
    """Issue 61 (round four, back): `--out DIR` with DIR/.transformer-lit-run a FIFO hung:
    the marker was opened for writing, which waits for a reader."""
    from transformer_lit.runs import RunFolderError, mark_run_folder

    def waited(*_):
        raise TimeoutError("mark_run_folder waited for a reader")

    os.mkfifo(tmp_path / RUN_MARKER)
    before = signal.signal(signal.SIGALRM, waited)
    signal.alarm(5)  # the old code waited here for ever
    try:
        with pytest.raises(RunFolderError, match="is not a regular file, which no run"):
            mark_run_folder(tmp_path)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def test_a_run_marker_that_cannot_be_read_is_not_taken_for_none(tmp_path, monkeypatch):
    """Issue 61: an unreadable marker was reported as 'not written by a run', as if the
    folder held no run's files."""
    from transformer_lit import runs

    runs.mark_run_folder(tmp_path)

    def refused(path, follow_links=True):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(runs, "open_regular", refused)
    with pytest.raises(runs.RunFolderError, match=r"\.transformer-lit-run cannot be read "
                       r"\(Permission denied\), so which files a run wrote"):
        runs.check_run_folder(tmp_path, resume=True, force=False)


def test_an_empty_home_is_no_cache_folder(monkeypatch):
    """Issue 61 (round four, back): with HOME= the cache became /.cache/transformer_lit
    (Path.home() is '/'), where `translate --beam 4` wrote."""
    from transformer_lit.files import CACHE_ENV, CacheError, cache_dir

    monkeypatch.setenv("HOME", "")
    monkeypatch.delenv(CACHE_ENV, raising=False)
    with pytest.raises(CacheError, match=r"\$HOME is set but empty; set it, or set "
                       r"\$TRANSFORMER_LIT_CACHE"):
        cache_dir()
    monkeypatch.setenv(CACHE_ENV, "/somewhere")
    assert str(cache_dir()) == "/somewhere"


def test_a_vocabulary_too_large_for_sentencepiece_names_the_bound(cache, tmp_path, capsys):
    """Issue 61: --vocab-size 2147483648 ended in sentencepiece's 'INVALID_ARGUMENT';
    like a size too small, a size too large is said in our words, with the bound."""
    from transformer_lit.data import MAX_VOCAB_SIZE

    options = TINY[:2] + TINY[4:]   # TINY without its --vocab-size
    status, out, err = train(capsys, *options, "--vocab-size", str(2**31), "--steps", "2",
                             "--out", str(tmp_path / "big"))
    assert_one_line_error(status, out, err, "--vocab-size", f"{MAX_VOCAB_SIZE}]")
    assert "INVALID_ARGUMENT" not in err and not (tmp_path / "big").exists()


# --- from the hostile-input rounds (issues 32, 39, 47, 50) --------------------


def test_two_runs_on_one_folder_the_second_is_refused(cache, tmp_path, capsys):
    out = tmp_path / "run"
    first = start_run(out)
    try:
        for extra in ([], ["--resume"], ["--force"]):
            argv = ["train", *TINY, "--steps", "2", "--out", str(out), *extra]
            assert_one_line_error(*run(argv, capsys), "in use by", f"pid {first.pid} on {socket.gethostname()}")
    finally:
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=120)
    assert first.returncode == 143, err
    step = load_checkpoint(out / "checkpoint.pt")["state"]["step"]
    argv = ["train", "--steps", str(step + 1), "--out", str(out), "--resume", "--quiet", "--bleu-sentences", "0"]
    assert run(argv, capsys)[0] == 0   # the lock went with the first run


def test_a_finished_run_without_checkpoint_is_a_run(cache, tmp_path, capsys):
    out = tmp_path / "run"
    assert run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys)[0] == 0
    (out / "checkpoint.pt").unlink()                  # the model's files and results.json remain
    before = (out / "model.safetensors").read_bytes()
    assert_one_line_error(*run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys),
                          "holds a run", "results.json", "--force")
    assert (out / "model.safetensors").read_bytes() == before
    # an interrupted --force leaves the new run alone, not beside the old one's files
    proc = start_run(out, "--force")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode == 143
    assert sorted(p.name for p in out.iterdir()) == [RUN_MARKER, "checkpoint.pt"]


def test_only_the_programs_own_temporary_files_are_removed(cache, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / ".checkpoint.pt.k2j4.tmp").write_bytes(b"half a save")
    (out / ".notes.tmp").write_text("mine")
    assert run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys)[0] == 0
    assert (out / ".notes.tmp").read_text() == "mine"
    assert not (out / ".checkpoint.pt.k2j4.tmp").exists()


@pytest.mark.parametrize("files", [["model.safetensors"], ["results.json"], ["model.pt"],
                                   ["config.json", "results.json"]])
def test_force_never_deletes_files_that_no_run_wrote(tmp_path, capsys, cache, files):
    out = tmp_path / "mine"
    out.mkdir()
    for name in files:
        (out / name).write_bytes(b"the user's own " + name.encode())
    argv = ["train", *TINY, "--steps", "2", "--out", str(out), "--force"]
    assert_one_line_error(*run(argv, capsys), "no run wrote", RUN_MARKER, *files)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {
        name: b"the user's own " + name.encode() for name in files}


def test_force_replaces_a_runs_files_and_keeps_the_others(tmp_path, capsys, cache):
    out = tmp_path / "run"
    assert run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys)[0] == 0
    assert written_by_run(out) == set(RUN_FILES)
    (out / "notes.txt").write_text("mine")
    before = (out / "model.safetensors").stat().st_mtime_ns
    assert run(["train", *TINY, "--steps", "2", "--out", str(out), "--force"], capsys)[0] == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "model.safetensors").stat().st_mtime_ns != before


def test_a_refused_run_leaves_no_folder_and_no_marker(tmp_path, capsys, cache, monkeypatch):
    def fails(*args, **kwargs):
        raise cli_train.CliError("refused after the folder was taken")
    monkeypatch.setattr(cli_train, "_encode", fails)
    out = tmp_path / "new" / "run"
    assert_one_line_error(*run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys), "refused")
    assert not (tmp_path / "new").exists()


def test_resume_on_a_users_own_files_is_refused_and_marks_nothing(tmp_path, capsys, cache):
    """--resume on a folder holding the user's own checkpoint.pt, model.pt, results.json was
    refused but left a marker naming them, so that a later --force deleted them (issue 50)."""
    out = tmp_path / "mine"
    out.mkdir()
    own = {name: b"the user's own " + name.encode() for name in RUN_FILES}
    for name, data in own.items():
        (out / name).write_bytes(data)
    resume = ["train", "--resume", "--out", str(out), "--quiet", "--bleu-sentences", "0"]
    assert_one_line_error(*run(resume, capsys), "checkpoint.pt", "not written by a run", RUN_MARKER)
    force = ["train", *TINY, "--steps", "2", "--out", str(out), "--force"]
    assert_one_line_error(*run(force, capsys), "no run wrote", *RUN_FILES)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == own   # no marker, nothing deleted


def test_a_folder_of_the_users_own_files_is_not_called_a_run(tmp_path, capsys, cache):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "model.pt").write_bytes(b"mine")
    status, stdout, err = run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys)
    assert_one_line_error(status, stdout, err, "model.pt", "which no run wrote")
    assert "holds a run" not in err


def test_the_marker_names_only_what_a_run_may_write(tmp_path):
    (tmp_path / "results.json").write_text("the user's")
    runs.mark_run_folder(tmp_path)
    assert runs.written_by_run(tmp_path) == set(runs.RUN_FILES) - {"results.json"}


def test_a_refused_out_leaves_no_folder_behind(tmp_path, capsys, cache):
    "train --out sub/<300 characters> was refused but left sub/ behind."
    out = tmp_path / "sub" / ("x" * 300)
    assert_one_line_error(*run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys), str(tmp_path / "sub"))
    assert list(tmp_path.iterdir()) == []


def test_a_folder_named_like_a_stale_temporary_file_is_left_alone(tmp_path, capsys, cache):
    """Only what a killed save leaves (a regular file .checkpoint.pt.*.tmp) is removed; a
    folder of that name was 'unlinked' and the run ended with '(Is a directory)'."""
    out = tmp_path / "r1"
    assert run(["train", *TINY, "--steps", "2", "--out", str(out), "--quiet"], capsys)[0] == 0
    (out / ".checkpoint.pt.x1.tmp").mkdir()
    (out / ".checkpoint.pt.x1.tmp" / "mine").write_text("the user's")
    (out / ".model.pt.x2.tmp").write_bytes(b"half a save")
    status, _, err = run(["train", "--steps", "3", "--out", str(out), "--resume", "--quiet"],
                         capsys)
    assert status == 0 and "Is a directory" not in err, err
    assert (out / ".checkpoint.pt.x1.tmp" / "mine").read_text() == "the user's"
    assert not (out / ".model.pt.x2.tmp").exists()


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
