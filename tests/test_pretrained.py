"""The model shipped in the package (chapter 18): pinned bytes, safe loading, a working tokenizer,
and the command line's default model."""
from __future__ import annotations

import os
import shutil

import pytest
import torch

from transformer_lit import pretrained
from transformer_lit.corpus import sha256_of
from transformer_lit.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SubwordTokenizer
from transformer_lit.inference import translate
from transformer_lit.pretrained import (PRETRAINED_SHA256, export_pretrained, load_pretrained,
                                        pretrained_path, pretrained_record)

from synthetic import run

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py: `translate --threads` sets it


@pytest.fixture(scope="module")
def shipped():
    "The shipped model, with one thread (the same float sums on every machine) while this module runs."
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield load_pretrained()
    torch.set_num_threads(threads)


def test_the_shipped_file_is_in_the_package_and_pinned():
    path = pretrained_path()
    assert path.parent.name == "pretrained" and path.parent.parent.name == "transformer_lit"
    assert path.stat().st_size <= 25e6
    assert sha256_of(path) == PRETRAINED_SHA256
    assert (path.parent / "MODEL_CARD.md").is_file()


def test_the_wheel_carries_the_model(root):
    pyproject = (root / "pyproject.toml").read_text()
    assert '"pretrained/model.pt"' in pyproject and '"pretrained/MODEL_CARD.md"' in pyproject


def test_load_gives_an_eval_float32_model_and_its_tokenizer(shipped):
    model, tokenizer = shipped
    assert not model.training
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert {p.device.type for p in model.parameters()} == {"cpu"}
    assert model.config.src_vocab_size == tokenizer.vocab_size


def test_tokenizer_round_trips_english_and_french(shipped):
    _, tokenizer = shipped
    for text in ("And God said, Let there be light.", "Et Dieu dit: Que la lumière soit!",
                 "Ruth répondit: Où tu iras j'irai; ton peuple sera mon peuple."):
        ids = tokenizer.encode(text)
        assert tokenizer.decode(ids) == text
        assert not {PAD_ID, BOS_ID, EOS_ID, UNK_ID} & set(ids)


def test_it_translates(shipped):
    model, tokenizer = shipped
    out = translate(model, tokenizer, ["And God said, Let there be light.",
                                       "The king said to his servants."])
    assert "lumière" in out[0].lower() and "roi" in out[1].lower(), out


def test_the_record_says_how_it_was_made():
    record = pretrained_record()
    assert record["command"].startswith("transformer-lit train ")
    assert {"device", "steps", "minutes", "valid_log", "test_scores", "corpus"} <= record.keys()
    test = record["test_scores"]
    assert test["model"]["bleu"] > test["copy the source"]["bleu"]


def test_a_damaged_file_is_refused(monkeypatch, tmp_path):
    copy = tmp_path / "model.pt"
    data = bytearray(pretrained_path().read_bytes())
    data[len(data) // 2] ^= 1
    copy.write_bytes(bytes(data))
    monkeypatch.setattr(pretrained, "pretrained_path", lambda: copy)
    with pytest.raises(ValueError, match="damaged or not the shipped model"):
        load_pretrained()


def test_a_missing_file_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(pretrained, "pretrained_path", lambda: tmp_path / "model.pt")
    with pytest.raises(FileNotFoundError, match="reinstall"):
        load_pretrained()


class Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_no_code_runs_on_load_even_with_a_matching_digest(monkeypatch, tmp_path):
    evil = tmp_path / "model.pt"
    torch.save({"format": "transformer-lit checkpoint v1", "x": Boom()}, evil)
    monkeypatch.setattr(pretrained, "pretrained_path", lambda: evil)
    monkeypatch.setattr(pretrained, "PRETRAINED_SHA256", sha256_of(evil))
    with pytest.raises(ValueError, match="weights_only"):
        load_pretrained()


def test_export_halves_the_weights_and_keeps_the_translations_close(shipped, tmp_path):
    model, tokenizer = shipped
    from transformer_lit.checkpoints import save_checkpoint
    run = tmp_path / "run.pt"
    save_checkpoint(run, model, tokenizer=tokenizer.to_bytes(), record={"steps": 1})
    digest = export_pretrained(run, tmp_path / "out.pt", note="test")
    assert digest == sha256_of(tmp_path / "out.pt")
    stored = torch.load(tmp_path / "out.pt", weights_only=True)
    assert {v.dtype for v in stored["model"].values() if v.is_floating_point()} == {torch.float16}
    assert stored["record"] == {"steps": 1, "note": "test"}
    assert SubwordTokenizer(stored["tokenizer"]).to_bytes() == tokenizer.to_bytes()


def test_the_command_translates_with_the_shipped_model_by_default(capsys):
    status, out, err = run(["translate", "--threads", "1", "And God said, Let there be light."],
                           capsys)
    assert status == 0, err
    assert "lumière" in out.lower()
    assert len(out.strip().splitlines()) == 1


def test_the_command_takes_a_checkpoint_option(tmp_path, capsys):
    status, _, err = run(["translate", "--checkpoint", str(tmp_path / "nope.pt"), "Hello."], capsys)
    assert status == 2 and "no checkpoint at" in err
    assert "Traceback" not in err
    shutil.copy(pretrained_path(), tmp_path / "model.pt")   # the shipped file is a checkpoint too
    status, out, err = run(["translate", "--threads", "1", "--checkpoint", str(tmp_path / "model.pt"),
                            "The king said."], capsys)
    assert status == 0 and "roi" in out.lower(), err


def test_the_shipped_translations_are_of_the_shipped_model_and_complete():
    import json

    from transformer_lit.analysis import load_modern_pairs

    path = pretrained_path().parents[1] / "results" / "shipped_translations.json"
    shipped = json.loads(path.read_text(encoding="utf-8"))
    assert shipped["model_sha256"] == PRETRAINED_SHA256
    test = shipped["sets"]["test"]
    assert len(test["keys"]) == pretrained_record()["test_scores"]["sentences"]
    assert len(shipped["sets"]["modern"]["keys"]) == len(load_modern_pairs())
    for entry in shipped["sets"].values():
        assert len(entry["greedy"]) == len(entry["beam 4"]) == len(entry["keys"])


def test_the_card_compares_like_with_like_and_names_its_limits():
    card = (pretrained_path().parent / "MODEL_CARD.md").read_text(encoding="utf-8")
    like = card.split("## Test books, like for like")[1].split("\n## ")[0]
    rows = [line.split(" | ") for line in like.splitlines() if line.startswith("| Louis")
            or line.startswith("| Darby")]
    # every reference has a human row and a model row, scored against it alone
    for ref in ("Louis Segond", "Darby (French)"):
        names = [r[1] for r in rows if r[0] == f"| {ref}"]
        assert any(n.startswith("human:") for n in names) and any(n.startswith("model") for n in names)
    assert "nrefs:1|" in like
    assert "## Out of domain" in card and "## How it fails" in card
    limits = card.split("## Known limits")[1]
    assert limits.count("\n- ") >= 6


@pytest.mark.parametrize("device", ["tpu", "cuda:x", 1.5])
def test_a_device_that_is_none_is_refused_in_one_line(device):
    with pytest.raises(ValueError, match="^device must name a torch device such as 'cpu' or 'cuda', got "):
        load_pretrained(device)   # was torch's RuntimeError listing every device type
