"""What the command-line tests share: six sentence pairs, a synthetic corpus of verses
built from them, the options of a tiny training run, and the helpers that run
`transformer-lit` in this process (`run`) or as a program (`COMMAND`) and check its
one-line errors. Fixtures built on these live in conftest.py."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from transformer_lit.cli import main
from transformer_lit.corpus import Verse

ENGLISH = ["In the beginning God created the heavens and the earth.",
           "The earth was formless and empty.",
           "God said, Let there be light, and there was light.",
           "God saw the light, and saw that it was good.",
           "The king said to Daniel, Your God is the God of gods.",
           "Naomi said to Ruth, Go, my daughter."]
FRENCH = ["Au commencement, Dieu créa les cieux et la terre.",
          "La terre était informe et vide.",
          "Dieu dit: Que la lumière soit! Et la lumière fut.",
          "Dieu vit que la lumière était bonne.",
          "Le roi dit à Daniel: Votre Dieu est le Dieu des dieux.",
          "Naomi dit à Ruth: Va, ma fille."]

# 48 verses in every version, in books of the training, validation and test splits
VERSES = [Verse(book, 1, v, {"4": ENGLISH[v % 6], "k": ENGLISH[(v + 1) % 6],
                             "3": ENGLISH[v % 6].lower(), "l": FRENCH[v % 6],
                             "5": FRENCH[(v + 2) % 6]})
          for book in (1, 2, 17, 8) for v in range(1, 13)]

# `transformer-lit` as a program, for what needs a process of its own (signals, kill -9,
# a memory limit, standard input arriving line by line)
COMMAND = [sys.executable, "-c",
           "import sys; from transformer_lit.cli import main; sys.exit(main())"]

# a tiny model on the synthetic corpus: seconds per run, one thread, no BLEU
TINY = ["--preset", "tiny", "--vocab-size", "90", "--device", "cpu", "--threads", "1",
        "--quiet", "--bleu-sentences", "0"]
# what a resumed run repeats (the rest comes from its checkpoint)
RESUME = ["--resume", "--quiet", "--threads", "1", "--bleu-sentences", "0"]


def run(argv: list[str], capsys: pytest.CaptureFixture, stdin: str | None = None,
        monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    "`transformer-lit argv` in this process: (exit status, stdout, stderr)."
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    try:
        status = main(argv)
    except SystemExit as e:
        status = e.code
    out = capsys.readouterr()
    return status, out.out, out.err


def assert_one_line_error(status: int, out: str, err: str, *words: str) -> None:
    "Exit status 2, nothing on stdout, one line on stderr holding every word."
    assert status == 2 and out == "", (status, out, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


def one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    "assert_one_line_error for `transformer-lit` run as a program (COMMAND)."
    assert_one_line_error(done.returncode, done.stdout, done.stderr, *words)


def same_tensors(a, b) -> bool:
    "a and b hold equal tensors (same dtype, every bit) in the same nesting of containers."
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_tensors(x, y) for x, y in zip(a, b))
    return a == b


def sealed(ckpt: dict) -> dict:
    """ckpt with its checksums recomputed, as a crafted file would carry them: what the
    file holds is then refused by the checks on its content, not by its checksums."""
    from transformer_lit.checkpoints import entry_sha256
    return {**ckpt, "sha256": entry_sha256(ckpt)} if "sha256" in ckpt else ckpt


def altered(path: Path, dest: Path, seal: bool = True, **entries) -> Path:
    """A copy of checkpoint path with some entries replaced (None deletes one), as a crafted file would hold
    them: with its checksums recomputed (seal), or as a damaged one, with the old checksums."""
    ckpt = torch.load(path, weights_only=True)
    for k, v in entries.items():
        if v is None:
            ckpt.pop(k, None)
        else:
            ckpt[k] = v
    torch.save(sealed(ckpt) if seal else ckpt, dest)
    return dest


def env() -> dict[str, str]:
    "The environment of a subprocess: this one's (the test cache included), one thread."
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def start_run(out: Path, *options: str) -> subprocess.Popen:
    "A long tiny run in the background, once it has saved its first checkpoint."
    proc = subprocess.Popen(COMMAND + ["train", *TINY, "--steps", "100000", "--checkpoint-every", "2",
                                       "--out", str(out), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    deadline = time.time() + 120
    while not (out / "checkpoint.pt").exists() and time.time() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    return proc
