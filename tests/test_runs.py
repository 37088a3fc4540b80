"""Training runs you can trust (chapter 11's `train`, chapter 09's `fit`): periodic checkpoints,
signals, validated settings, bit-exact resume, no silent overwrite. On a small synthetic corpus
written into a temporary cache, so no network is needed and subprocesses see it too."""
from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import transformer_lit.cli as cli
from transformer_lit import data
from transformer_lit.data import Verse, encode_pairs, train_tokenizer, version_pairs, write_verses_tsv
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.checkpoints import load_checkpoint
from transformer_lit.recipe import TrainSettings
from transformer_lit.training import fit, make_optimizer

from test_cli import ENGLISH, FRENCH   # the same six sentence pairs

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py

VERSES = [Verse(book, 1, v, {"4": ENGLISH[v % 6], "k": ENGLISH[(v + 1) % 6], "3": ENGLISH[v % 6].lower(),
                             "l": FRENCH[v % 6], "5": FRENCH[(v + 2) % 6]})
          for book in (1, 2, 17, 8) for v in range(1, 13)]
COMMAND = [sys.executable, "-c", "import sys; from transformer_lit.cli import main; sys.exit(main())"]
TINY = ["--preset", "tiny", "--vocab-size", "90", "--device", "cpu", "--threads", "1", "--quiet",
        "--bleu-sentences", "0"]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    "A cache folder holding the synthetic verses, used by this process and its subprocesses."
    folder = tmp_path / "cache"
    folder.mkdir()
    write_verses_tsv(VERSES, tuple(data.VERSIONS), folder / data.VERSES_TSV)
    monkeypatch.setenv(data.CACHE_ENV, str(folder))
    return folder


def train(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(COMMAND + ["train", *args], capture_output=True, text=True, env=env, timeout=300)


def one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    for w in words:
        assert w in done.stderr, (w, done.stderr)


def same_tensors(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_tensors(x, y) for x, y in zip(a, b))
    return a == b


def test_resume_is_bit_exact_through_the_command_line(cache, tmp_path):
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    assert train(*TINY, "--steps", "24", "--seed", "7", "--out", str(straight)).returncode == 0
    assert train(*TINY, "--steps", "12", "--seed", "7", "--out", str(halves)).returncode == 0
    done = train("--steps", "24", "--out", str(halves), "--resume", "--quiet", "--threads", "1",
                 "--bleu-sentences", "0")   # no --seed: the run's own seed (7) must be used
    assert done.returncode == 0, done.stderr
    for name in ("model.pt", "checkpoint.pt"):
        a, b = load_checkpoint(straight / name), load_checkpoint(halves / name)
        assert same_tensors(a["model"], b["model"]), name
    a, b = load_checkpoint(straight / "checkpoint.pt"), load_checkpoint(halves / "checkpoint.pt")
    assert same_tensors(a["optimizer"], b["optimizer"]) and same_tensors(a["snapshots"], b["snapshots"])
    assert a["settings"]["seed"] == b["settings"]["seed"] == 7


def test_sigterm_saves_a_resumable_checkpoint_and_says_so(cache, tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(COMMAND + ["train", *TINY, "--steps", "100000", "--checkpoint-every", "20",
                             "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    while not (out / "checkpoint.pt").exists() and time.time() < deadline:   # the first periodic save
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM == 143 and stderr.count("\n") == 1, stderr
    assert "stopped by SIGTERM at step" in stderr and "checkpoint.pt" in stderr and "--resume" in stderr
    step = int(stderr.split("at step ")[1].split(";")[0])
    assert load_checkpoint(out / "checkpoint.pt")["state"]["step"] == step
    assert not list(out.glob(".*.tmp"))
    done = train("--steps", str(step + 3), "--out", str(out), "--resume", "--quiet", "--bleu-sentences", "0")
    assert done.returncode == 0 and load_checkpoint(out / "model.pt")["record"]["steps"] == step + 3


def test_checkpoints_are_written_while_training(cache, tmp_path):
    out = tmp_path / "run"
    done = train(*TINY, "--steps", "10", "--checkpoint-every", "4", "--out", str(out))
    assert done.returncode == 0
    # a run cut at step 9 would find the save of step 8: check fit's callback directly
    saved = []
    settings = TrainSettings(max_steps=9, max_tokens=512, warmup=2, checkpoint_every=4)
    tok = train_tokenizer(ENGLISH + FRENCH, vocab_size=90)
    pairs, _ = encode_pairs(version_pairs(VERSES), tok)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(tok.vocab_size, tok.vocab_size, share_embeddings=True))
    fit(model, make_optimizer(model, settings), pairs, pairs, settings, progress=False, log=None,
        on_checkpoint=lambda s: saved.append(s.step))
    assert saved == [4, 8]


def test_a_folder_holding_a_run_is_not_overwritten(cache, tmp_path):
    out = tmp_path / "run"
    assert train(*TINY, "--steps", "3", "--out", str(out)).returncode == 0
    before = (out / "checkpoint.pt").read_bytes()
    one_line_error(train(*TINY, "--steps", "3", "--out", str(out)), "holds a run", "--resume", "--force")
    assert (out / "checkpoint.pt").read_bytes() == before
    assert train(*TINY, "--steps", "3", "--out", str(out), "--force").returncode == 0


def test_bad_output_folders_are_refused_before_training(cache, tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    one_line_error(train(*TINY, "--steps", "3", "--out", str(afile)), "is a file")
    one_line_error(train(*TINY, "--steps", "3", "--out", "/proc/no-such-dir"), "not writable")


def test_stale_temporary_files_are_cleaned(cache, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / ".checkpoint.pt.abc.tmp").write_bytes(b"half a save")
    assert train(*TINY, "--steps", "2", "--out", str(out)).returncode == 0
    assert not list(out.glob(".*.tmp"))


@pytest.mark.parametrize("option, value, words", [
    ("--lr-factor", "nan", ["--lr-factor", "nan"]), ("--lr-factor", "-1", ["--lr-factor"]),
    ("--minutes", "nan", ["--minutes"]), ("--minutes", "-1", ["--minutes"]),
    ("--label-smoothing", "1.5", ["--label-smoothing"]), ("--dropout", "1.5", ["--dropout"]),
    ("--warmup", "0", ["--warmup"]), ("--max-tokens", "-3", ["--max-tokens"]),
    ("--english", "4,x", ["--english"]), ("--french", "", ["--french"])])
def test_settings_that_cannot_train_are_refused(cache, tmp_path, option, value, words):
    done = train(*TINY, "--steps", "3", "--out", str(tmp_path / "run"), option, value)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    for w in words:
        assert w in done.stderr
    assert "_" not in done.stderr.split("error: ")[1].split(" ")[0]   # an option, not a parameter name
    assert not (tmp_path / "run").exists()   # refused before --out was touched


def test_options_that_cannot_change_on_resume_are_refused(cache, tmp_path):
    out = tmp_path / "run"
    assert train(*TINY, "--steps", "3", "--out", str(out)).returncode == 0
    for option, value in (("--dropout", "0.3"), ("--vocab-size", "50"), ("--seed", "3"), ("--english", "k")):
        one_line_error(train("--steps", "5", "--out", str(out), "--resume", option, value), option)


@pytest.mark.parametrize("kw", [dict(clip_norm=-1.0), dict(label_smoothing=1.5), dict(lr_factor=math.inf),
                                dict(max_minutes=float("nan")), dict(eps=0.0), dict(checkpoint_minutes=0)])
def test_train_settings_validate_every_number(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        TrainSettings(max_steps=1, **kw)


def test_fit_refuses_empty_data_instead_of_looping():
    model = Transformer(TransformerConfig.tiny(20, 20))
    settings = TrainSettings(max_steps=3)
    with pytest.raises(ValueError, match="training and validation pairs"):
        fit(model, make_optimizer(model, settings), [], [], settings, progress=False)


def test_a_non_finite_loss_stops_the_run_naming_the_step():
    tok = train_tokenizer(ENGLISH + FRENCH, vocab_size=90)
    pairs, _ = encode_pairs(version_pairs(VERSES), tok)
    model = Transformer(TransformerConfig.tiny(tok.vocab_size, tok.vocab_size, share_embeddings=True))
    settings = TrainSettings(max_steps=5, max_tokens=512, warmup=2)
    with torch.no_grad():  # the output projection's matrix: every training path reads it
        model.tgt_embed.weight.fill_(float("nan"))
    with pytest.raises(FloatingPointError, match="at step 1"):
        fit(model, make_optimizer(model, settings), pairs, pairs, settings, progress=False, log=None)


def test_evaluating_on_zero_tokens_raises():
    model = Transformer(TransformerConfig.tiny(20, 20))
    from transformer_lit.training import evaluate
    with pytest.raises(ValueError, match="at least one target token"):
        evaluate(model, [])


def test_a_vocabulary_too_small_is_one_line(cache, tmp_path):
    for size in ("3", "10"):
        options = TINY[:2] + TINY[4:]   # TINY without its --vocab-size
        one_line_error(train(*options, "--vocab-size", size, "--steps", "2", "--out", str(tmp_path / size)),
                       "--vocab-size")


def test_a_cache_path_that_is_a_file_is_one_line(tmp_path, monkeypatch):
    afile = tmp_path / "cache-file"
    afile.write_text("x")
    monkeypatch.setenv(data.CACHE_ENV, str(afile))
    one_line_error(train(*TINY, "--steps", "2", "--out", str(tmp_path / "run")), "is a file", data.CACHE_ENV)


def test_resume_with_another_preset_is_refused(cache, tmp_path):
    out = tmp_path / "run"
    assert train(*TINY, "--steps", "2", "--out", str(out)).returncode == 0
    one_line_error(train("--preset", "cpu", "--steps", "4", "--out", str(out), "--resume"), "--preset")
    assert train("--preset", "tiny", "--steps", "4", "--out", str(out), "--resume", "--quiet",
                 "--bleu-sentences", "0").returncode == 0


def test_after_kill_9_the_last_checkpoint_resumes(cache, tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(COMMAND + ["train", *TINY, "--steps", "100000", "--checkpoint-every", "3",
                                       "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.time() + 120
    while not (out / "checkpoint.pt").exists() and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(2.0)   # several more saves, one of them perhaps under way
    proc.kill()
    proc.communicate(timeout=60)
    step = load_checkpoint(out / "checkpoint.pt")["state"]["step"]
    assert step >= 3 and step % 3 == 0
    done = train("--steps", str(step + 2), "--out", str(out), "--resume", "--quiet", "--bleu-sentences", "0")
    assert done.returncode == 0, done.stderr
    assert not list(out.glob(".*.tmp"))


def test_a_batch_budget_below_the_longest_pair_is_refused_and_not_saved(cache, tmp_path):
    out = tmp_path / "run"
    assert train(*TINY, "--steps", "2", "--out", str(out)).returncode == 0
    before = (out / "checkpoint.pt").read_bytes()
    one_line_error(train("--steps", "4", "--out", str(out), "--resume", "--max-tokens", "10"), "--max-tokens 10")
    assert (out / "checkpoint.pt").read_bytes() == before   # the bad setting was not written
    assert train("--steps", "4", "--out", str(out), "--resume", "--quiet", "--bleu-sentences", "0").returncode == 0
