"""The model shipped in the package (chapter 18): pinned bytes, safe loading, a working tokenizer,
and the command line's default model."""
from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

from transformer_lit import pretrained
from transformer_lit.files import sha256_of
from transformer_lit.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SubwordTokenizer
from transformer_lit.inference import translate
from transformer_lit.checkpoints import (CONFIG_FILE, MODEL_FILES, TOKENIZER_FILE, WEIGHTS_FILE,
                                         CheckpointError, load_model_folder, save_model, weights_sha256)
from transformer_lit.pretrained import (PRETRAINED_SHA256, export_pretrained, load_pretrained,
                                        pretrained_folder, pretrained_record)

from synthetic import run

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py: `translate --threads` sets it


@pytest.fixture(scope="module")
def shipped():
    "The shipped model, with one thread (the same float sums on every machine) while this module runs."
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield load_pretrained()
    torch.set_num_threads(threads)


def test_the_shipped_files_are_in_the_package_and_pinned():
    folder = pretrained_folder()
    assert folder.name == "pretrained" and folder.parent.name == "transformer_lit"
    assert sorted(p.name for p in folder.iterdir()) == sorted([*MODEL_FILES, "MODEL_CARD.md"])
    assert sum((folder / name).stat().st_size for name in MODEL_FILES) <= 25e6
    assert sha256_of(folder / WEIGHTS_FILE) == PRETRAINED_SHA256
    meta = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    assert meta["files"][WEIGHTS_FILE] == PRETRAINED_SHA256
    assert meta["files"][TOKENIZER_FILE] == sha256_of(folder / TOKENIZER_FILE)


def test_the_config_names_every_choice_of_the_shipped_model():
    meta = json.loads((pretrained_folder() / CONFIG_FILE).read_text(encoding="utf-8"))
    config = meta["config"]
    assert {k: config[k] for k in ("activation", "positional", "norm_eps", "norm_first", "share_embeddings")} \
        == {"activation": "relu", "positional": "sinusoidal", "norm_eps": 1e-5, "norm_first": True,
            "share_embeddings": True}


# the checksum of the weights of the earlier transformer_lit/pretrained/model.pt (torch.save,
# sha256 2e8908a8...): checkpoints.weights_sha256 over each tensor's name, dtype, shape and bytes
EARLIER_WEIGHTS_SHA256 = "4725093597da1ac36b97c86e428fea21acba4f7e852ca29fce6a8b708ddd2b2f"


def test_the_tensors_are_those_of_the_earlier_model_pt():
    "model.safetensors holds the tensors of the model.pt it replaced, bit for bit: the same checksum."
    from safetensors.torch import load_file
    stored = load_file(pretrained_folder() / WEIGHTS_FILE)
    assert {t.dtype for t in stored.values()} == {torch.float16}
    model, _, record = load_model_folder(pretrained_folder())
    order = list(model.state_dict())   # the model.pt's order: tgt_embed.weight, src_embed.weight, ...
    retied = {name: stored[name if name != "src_embed.weight" else "tgt_embed.weight"] for name in order}
    assert weights_sha256(retied) == EARLIER_WEIGHTS_SHA256
    assert record["converted_from"]["weights_sha256"] == EARLIER_WEIGHTS_SHA256
    card = (pretrained_folder() / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert PRETRAINED_SHA256 in card and EARLIER_WEIGHTS_SHA256 in card


def test_it_translates_as_the_recorded_translations(shipped):
    "The shipped translations (results/shipped_translations.json) are this model's: a sample, both decodings."
    from transformer_lit.analysis import load_modern_pairs
    model, tokenizer = shipped
    recorded = json.loads((pretrained_folder().parent / "results" / "shipped_translations.json")
                          .read_text(encoding="utf-8"))["sets"]["modern"]
    sources = [p.en for p in load_modern_pairs()]
    assert translate(model, tokenizer, sources[:12]) == recorded["greedy"][:12]
    assert translate(model, tokenizer, sources[:4], beam_size=4) == recorded["beam 4"][:4]


def test_the_wheel_carries_the_model(root):
    pyproject = (root / "pyproject.toml").read_text()
    for name in (*MODEL_FILES, "MODEL_CARD.md"):
        assert f'"pretrained/{name}"' in pyproject
    assert "model.pt" not in pyproject


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
    copy = shutil.copytree(pretrained_folder(), tmp_path / "copy")
    data = bytearray((copy / WEIGHTS_FILE).read_bytes())
    data[len(data) // 2] ^= 1
    (copy / WEIGHTS_FILE).write_bytes(bytes(data))
    monkeypatch.setattr(pretrained, "pretrained_folder", lambda: copy)
    with pytest.raises(ValueError, match="model.safetensors is damaged or not the shipped model"):
        load_pretrained()
    shutil.copy(pretrained_folder() / WEIGHTS_FILE, copy / WEIGHTS_FILE)
    (copy / TOKENIZER_FILE).write_bytes(b"x" + (copy / TOKENIZER_FILE).read_bytes()[1:])
    with pytest.raises(ValueError, match="tokenizer.model is damaged: it does not match the SHA-256"):
        load_pretrained()


@pytest.mark.parametrize("name", MODEL_FILES)
def test_a_missing_file_names_the_fix(monkeypatch, tmp_path, name):
    copy = shutil.copytree(pretrained_folder(), tmp_path / "copy")
    (copy / name).unlink()
    monkeypatch.setattr(pretrained, "pretrained_folder", lambda: copy)
    with pytest.raises(FileNotFoundError, match=f"^the shipped model is missing: no .*{name}; reinstall"):
        load_pretrained()


class Boom:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_no_code_runs_on_load_even_with_a_matching_digest(monkeypatch, tmp_path):
    "A pickle put in place of model.safetensors, every digest made to match: refused, its code never run."
    copy = shutil.copytree(pretrained_folder(), tmp_path / "copy")
    marker = tmp_path / "pwned"
    torch.save({"format": "transformer-lit checkpoint v1", "x": Boom(marker)}, copy / WEIGHTS_FILE)
    digest = sha256_of(copy / WEIGHTS_FILE)
    meta = json.loads((copy / CONFIG_FILE).read_text(encoding="utf-8"))
    meta["files"][WEIGHTS_FILE] = digest
    (copy / CONFIG_FILE).write_text(json.dumps(meta), encoding="utf-8")
    monkeypatch.setattr(pretrained, "pretrained_folder", lambda: copy)
    monkeypatch.setattr(pretrained, "PRETRAINED_SHA256", digest)
    with pytest.raises(CheckpointError, match="model.safetensors is not a safetensors file"):
        load_pretrained()
    assert not marker.exists()


def test_export_halves_the_weights_into_a_model_folder(shipped, tmp_path):
    from safetensors.torch import load_file
    model, tokenizer = shipped
    run = save_model(tmp_path / "run", model, tokenizer.to_bytes(), record={"steps": 1})
    out = tmp_path / "out"
    digest = export_pretrained(run, out, note="test")
    assert digest == sha256_of(out / WEIGHTS_FILE)
    assert {v.dtype for v in load_file(out / WEIGHTS_FILE).values()} == {torch.float16}
    exported, tok_bytes, record = load_model_folder(out)
    assert record == {"steps": 1, "note": "test"}
    assert SubwordTokenizer(tok_bytes).to_bytes() == tokenizer.to_bytes()
    for name, t in exported.state_dict().items():   # float16 weights: the halving changes nothing
        assert torch.equal(t, model.state_dict()[name])


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
    folder = shutil.copytree(pretrained_folder(), tmp_path / "shipped")   # a model folder, as train leaves
    status, out, err = run(["translate", "--threads", "1", "--checkpoint", str(folder),
                            "The king said."], capsys)
    assert status == 0 and "roi" in out.lower(), err


def test_the_shipped_translations_are_of_the_shipped_model_and_complete():
    import json

    from transformer_lit.analysis import load_modern_pairs

    path = pretrained_folder().parent / "results" / "shipped_translations.json"
    shipped = json.loads(path.read_text(encoding="utf-8"))
    assert shipped["model_sha256"] == PRETRAINED_SHA256
    test = shipped["sets"]["test"]
    assert len(test["keys"]) == pretrained_record()["test_scores"]["sentences"]
    assert len(shipped["sets"]["modern"]["keys"]) == len(load_modern_pairs())
    for entry in shipped["sets"].values():
        assert len(entry["greedy"]) == len(entry["beam 4"]) == len(entry["keys"])


def test_the_card_compares_like_with_like_and_names_its_limits():
    card = (pretrained_folder() / "MODEL_CARD.md").read_text(encoding="utf-8")
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
