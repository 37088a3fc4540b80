"""transformer_lit.checkpoints (chapter 14): the model folder (config.json, model.safetensors,
tokenizer.model) written by save_model and read by load_model, and the checks that
checkpoint.pt, a torch.load(weights_only=True) archive, still needs (issue 56, item 4)."""
from __future__ import annotations

import json
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from transformer_lit.checkpoints import (
    CONFIG_FILE, MODEL_FILES, MODEL_FORMAT, TOKENIZER_FILE, WEIGHTS_FILE, CheckpointError, load_checkpoint,
    load_model, read_model_files, save_checkpoint, save_model, stored_tensors,
)
from transformer_lit.data import train_tokenizer
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.validate import ArgumentError

from synthetic import ENGLISH, FRENCH


@pytest.fixture(scope="module")
def tok_bytes() -> bytes:
    return train_tokenizer(ENGLISH + FRENCH, vocab_size=80).to_bytes()


def tiny(seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(TransformerConfig.tiny(80, 80, **overrides)).eval()


def same_logits(a: Transformer, b: Transformer) -> None:
    ids = torch.randint(3, 80, (2, 6), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(a.eval()(ids, ids), b.eval()(ids, ids), rtol=0, atol=0)


@pytest.mark.parametrize("overrides", [
    dict(share_embeddings=True, norm_first=True),
    dict(activation="gelu", positional="learned", norm_eps=1e-6),
    dict(),
])
def test_a_model_folder_rebuilds_the_model(tmp_path, tok_bytes, overrides):
    model = tiny(**overrides)
    folder = save_model(tmp_path / "m", model, tok_bytes, record={"steps": 3, "scores": [1.5, None]})
    assert folder == tmp_path / "m"
    assert sorted(p.name for p in folder.iterdir()) == sorted(MODEL_FILES)
    meta = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    assert meta["format"] == MODEL_FORMAT and meta["config"] == {**meta["config"], **overrides}
    assert set(meta["files"]) == {WEIGHTS_FILE, TOKENIZER_FILE}
    assert (folder / TOKENIZER_FILE).read_bytes() == tok_bytes
    loaded, tokenizer, record = load_model(folder)
    assert loaded.config == model.config and tokenizer == tok_bytes
    assert record == {"steps": 3, "scores": [1.5, None]}
    same_logits(loaded, model)


def test_a_shared_embedding_is_stored_once_and_tied_again(tmp_path, tok_bytes):
    model = tiny(share_embeddings=True)
    assert "src_embed.weight" not in stored_tensors(model)
    folder = save_model(tmp_path / "m", model, tok_bytes)
    assert "src_embed.weight" not in load_file(folder / WEIGHTS_FILE)
    loaded, _, _ = load_model(folder)
    assert loaded.src_embed.weight is loaded.tgt_embed.weight
    _, tensors, _ = read_model_files(folder)
    assert tensors["src_embed.weight"] is tensors["tgt_embed.weight"]


def test_float16_weights_stay_float16_in_the_file(tmp_path, tok_bytes):
    model = tiny().half()
    folder = save_model(tmp_path / "m", model, tok_bytes)
    assert {t.dtype for t in load_file(folder / WEIGHTS_FILE).values()} == {torch.float16}
    loaded, _, _ = load_model(folder)
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}
    for name, t in loaded.state_dict().items():
        assert torch.equal(t.half(), model.state_dict()[name])


def test_a_record_that_is_not_json_is_refused_before_anything_is_written(tmp_path, tok_bytes):
    with pytest.raises(ArgumentError, match="^record must be plain JSON data: "):
        save_model(tmp_path / "m", tiny(), tok_bytes, record={"when": object()})
    assert not (tmp_path / "m").exists()


def spoiled(folder, tmp_path, name="bad"):
    return shutil.copytree(folder, tmp_path / name)


@pytest.fixture
def folder(tmp_path, tok_bytes):
    return save_model(tmp_path / "good", tiny(share_embeddings=True), tok_bytes)


def rewrite_config(folder, change):
    meta = json.loads((folder / CONFIG_FILE).read_text())
    change(meta)
    (folder / CONFIG_FILE).write_text(json.dumps(meta))


def test_a_missing_folder_or_file_is_named(tmp_path, folder):
    with pytest.raises(FileNotFoundError, match="^no model at .*nowhere: it holds no config.json$"):
        load_model(tmp_path / "nowhere")
    bad = spoiled(folder, tmp_path)
    (bad / TOKENIZER_FILE).unlink()
    with pytest.raises(FileNotFoundError, match="^no tokenizer.model in "):
        load_model(bad)


def test_a_changed_byte_of_the_weights_or_the_tokenizer_is_refused(tmp_path, folder):
    for name in (WEIGHTS_FILE, TOKENIZER_FILE):
        bad = spoiled(folder, tmp_path, name)
        data = bytearray((bad / name).read_bytes())
        data[-1] ^= 1
        (bad / name).write_bytes(bytes(data))
        with pytest.raises(CheckpointError, match=f"{name} is damaged: it does not match the SHA-256 that config.json"):
            load_model(bad)


@pytest.mark.parametrize("change, words", [
    (lambda m: m["config"].update(activaton="gelu"), "config has unknown field 'activaton'"),
    (lambda m: m["config"].update(positional="rotary"), "positional must be one of learned, sinusoidal"),
    (lambda m: m["config"].update(d_model=64), "weight tgt_embed.weight has shape (80, 32) in the file"),
    (lambda m: m["config"].update(share_embeddings=False), "weight src_embed.weight has shape None"),
    (lambda m: m.update(config=[1]), "a config must be a dict"),
])
def test_a_config_that_does_not_describe_the_weights_is_refused(tmp_path, folder, change, words):
    bad = spoiled(folder, tmp_path)
    rewrite_config(bad, change)
    with pytest.raises(CheckpointError, match=f"^{re.escape(str(bad / CONFIG_FILE))} does not describe the weights "
                                              f"beside it: .*{re.escape(words)}"):
        load_model(bad)


@pytest.mark.parametrize("text, words", [
    ("not json", "config.json is not ours: "),
    ('{"format": "something else"}', "config.json is not a 'transformer-lit model v1' file"),
    ('{"format": "transformer-lit model v1", "config": {}}', "config.json gives no SHA-256 for model.safetensors"),
    ('[1, 2]', "is not a 'transformer-lit model v1' file"),
])
def test_a_config_json_that_is_not_ours_is_refused(tmp_path, folder, text, words):
    bad = spoiled(folder, tmp_path)
    (bad / CONFIG_FILE).write_text(text)
    with pytest.raises(CheckpointError, match=words):
        load_model(bad)


def resigned(folder, tensors):
    "folder's model.safetensors replaced by tensors, with config.json's digest made to match."
    import hashlib
    save_file(tensors, folder / WEIGHTS_FILE)
    digest = hashlib.sha256((folder / WEIGHTS_FILE).read_bytes()).hexdigest()
    rewrite_config(folder, lambda m: m["files"].update({WEIGHTS_FILE: digest}))


@pytest.mark.parametrize("spoil, words", [
    (lambda t: torch.full_like(t, float("nan")), "holds NaN or infinite values"),
    (lambda t: t.to(torch.int64), "of dtype torch.int64"),
    (lambda t: t[:3], "has shape \\(3, 32\\) in the file, the config needs \\(80, 32\\)"),
])
def test_weights_that_are_not_the_models_are_refused_even_when_resigned(tmp_path, folder, spoil, words):
    bad = spoiled(folder, tmp_path)
    tensors = load_file(bad / WEIGHTS_FILE)
    tensors["tgt_embed.weight"] = spoil(tensors["tgt_embed.weight"]).contiguous()
    resigned(bad, tensors)
    with pytest.raises(CheckpointError, match=words):
        load_model(bad)


def test_a_file_that_is_not_safetensors_is_refused_in_one_line(tmp_path, folder):
    import hashlib
    bad = spoiled(folder, tmp_path)
    (bad / WEIGHTS_FILE).write_bytes(b"\xff" * 64)
    digest = hashlib.sha256(b"\xff" * 64).hexdigest()
    rewrite_config(bad, lambda m: m["files"].update({WEIGHTS_FILE: digest}))
    with pytest.raises(CheckpointError, match="model.safetensors is not a safetensors file \\(") as e:
        load_model(bad)
    assert "\n" not in str(e.value)


def test_a_sparse_tensor_in_a_checkpoint_is_refused_not_a_traceback(tmp_path):
    """A checkpoint.pt whose weight is sparse, its checksums re-signed: the checksum itself ended
    in 'RuntimeError: unsupported memory format option Contiguous' (a traceback in the CLI)."""
    path = save_checkpoint(tmp_path / "c.pt", tiny())
    ckpt = torch.load(path, weights_only=True)
    ckpt["model"]["tgt_embed.weight"] = ckpt["model"]["tgt_embed.weight"].to_sparse()
    torch.save(ckpt, tmp_path / "sparse.pt")
    with pytest.raises(CheckpointError, match=r"holds a sparse tensor at \['model'\]\['tgt_embed.weight'\]"):
        load_checkpoint(tmp_path / "sparse.pt")
    ckpt["optimizer"] = {"state": {0: {"exp_avg": torch.zeros(3).to_sparse()}}}
    torch.save(ckpt, tmp_path / "sparse2.pt")
    with pytest.raises(CheckpointError, match="holds a sparse tensor at"):
        load_checkpoint(tmp_path / "sparse2.pt")


def test_a_checkpoint_keeps_every_choice_of_the_config(tmp_path):
    from transformer_lit.checkpoints import model_from_checkpoint
    model = tiny(activation="gelu", positional="learned", norm_eps=1e-6)
    loaded = model_from_checkpoint(load_checkpoint(save_checkpoint(tmp_path / "c.pt", model)))
    assert loaded.config == model.config
    same_logits(loaded, model)


def test_a_model_pt_of_an_earlier_version_still_loads(tmp_path, tok_bytes):
    "Before model folders, `train` left model.pt: a checkpoint holding the tokenizer and the record."
    model = tiny(share_embeddings=True)
    old = save_checkpoint(tmp_path / "model.pt", model, tokenizer=tok_bytes, record={"steps": 2})
    loaded, tokenizer, record = load_model(old)
    assert tokenizer == tok_bytes and record == {"steps": 2}
    same_logits(loaded, model)
    bare = save_checkpoint(tmp_path / "bare.pt", model)
    with pytest.raises(CheckpointError, match="bare.pt holds no tokenizer: it is not a model$"):
        load_model(bare)
