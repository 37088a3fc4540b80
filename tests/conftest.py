from __future__ import annotations

import configparser
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


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


@pytest.fixture(scope="module")
def one_thread():
    "Tiny models, small batches, one token at a time: a second thread only adds waiting (badly so on a busy machine)."
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
