"""Fixtures shared by the test files; the constants and helpers they build on are in
synthetic.py."""
from __future__ import annotations

import configparser
import contextlib
import io
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from transformer_lit import corpus, files
from transformer_lit.checkpoints import save_checkpoint
from transformer_lit.cli import main
from transformer_lit.data import train_tokenizer
from transformer_lit.model import Transformer, TransformerConfig

from synthetic import ENGLISH, FRENCH, TINY, VERSES

ROOT = Path(__file__).resolve().parents[1]


def synthetic_sha256() -> str:
    "The SHA-256 of the synthetic verses' TSV, as write_cache writes it."
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / corpus.VERSES_TSV
        corpus.write_verses_tsv(VERSES, tuple(corpus.VERSIONS), path)
        return files.sha256_of(path)


# the synthetic corpus is one of ours: accepted beside the pinned one (VERSES_SHA256), in
# this process and in every subprocess a test starts
os.environ[corpus.CORPUS_SHA256_ENV] = synthetic_sha256()


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def settings() -> configparser.SectionProxy:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "settings.ini")
    return cfg["DEFAULT"]


@pytest.fixture
def no_mha_fastpath():
    "PyTorch's inference fast path returns zeros at padded query rows; the slow path computes them as we do."
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    yield
    torch.backends.mha.set_fastpath_enabled(before)


@pytest.fixture
def shown(monkeypatch):
    "What IPython's display was given, (data, metadata) each, instead of showing it (chapter 44)."
    calls = []
    import IPython.display
    monkeypatch.setattr(IPython.display, "display",
                        lambda data, raw, metadata: calls.append((data, metadata)))
    return calls


@pytest.fixture(scope="module")
def one_thread():
    "Tiny models, small batches, one token at a time: a second thread only adds waiting (badly so on a busy machine)."
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def write_cache(folder: Path) -> Path:
    "folder holding the synthetic verses as the corpus cache holds the real ones."
    folder.mkdir(parents=True)
    corpus.write_verses_tsv(VERSES, tuple(corpus.VERSIONS), folder / corpus.VERSES_TSV)
    return folder


@pytest.fixture
def cache(tmp_path_factory, monkeypatch) -> Path:
    "A fresh cache folder holding the synthetic verses, for this process and its subprocesses (not in tmp_path)."
    folder = write_cache(tmp_path_factory.mktemp("cache") / "cache")
    monkeypatch.setenv(files.CACHE_ENV, str(folder))
    return folder


@pytest.fixture(scope="session")
def model_pt(tmp_path_factory) -> Path:
    "A tiny untrained model.pt with a tiny tokenizer, as `train` writes it (with the weights' checksum); read only."
    tokenizer = train_tokenizer(ENGLISH + FRENCH, vocab_size=80)
    torch.manual_seed(0)
    V = tokenizer.vocab_size
    model = Transformer(TransformerConfig.tiny(V, V, share_embeddings=True))
    return save_checkpoint(tmp_path_factory.mktemp("model") / "model.pt", model,
                           tokenizer=tokenizer.to_bytes())


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    "The folder of a finished 3-step `train` of the tiny preset on the synthetic corpus; read only (see run_copy)."
    base = tmp_path_factory.mktemp("tiny-run")
    out = base / "run"
    argv = ["train", *TINY, "--steps", "3", "--out", str(out)]
    threads = torch.get_num_threads()
    err = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(err):
        mp.setenv(files.CACHE_ENV, str(write_cache(base / "cache")))
        status = main(argv)
    torch.set_num_threads(threads)
    assert status == 0, err.getvalue()
    return out


@pytest.fixture
def run_copy(tiny_run, tmp_path) -> Path:
    "A copy of tiny_run's folder for a test that changes it."
    return shutil.copytree(tiny_run, tmp_path / "run")
