"""transformer_lit.checkpoints (chapter 14): the model folder (config.json, model.safetensors,
tokenizer.model) written by save_model and read by load_model_folder, and the checks that
checkpoint.pt, a torch.load(weights_only=True) archive, still needs (issue 56, item 4)."""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from synthetic import (
    ENGLISH,
    FRENCH,
    TINY,
    altered,
    assert_one_line_error,
    env,
    one_line_error,
    run,
)

from transformer_lit.checkpoints import (
    CONFIG_FILE,
    MAX_LEN_LIMIT,
    MODEL_FILES,
    MODEL_FORMAT,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    CheckpointError,
    load_checkpoint,
    load_model_folder,
    read_model_files,
    save_checkpoint,
    save_model,
    stored_tensors,
)
from transformer_lit.data import train_tokenizer
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.validate import ArgumentError


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
    loaded, tokenizer, record = load_model_folder(folder)
    assert loaded.config == model.config and tokenizer == tok_bytes
    assert record == {"steps": 3, "scores": [1.5, None]}
    same_logits(loaded, model)


def test_a_shared_embedding_is_stored_once_and_tied_again(tmp_path, tok_bytes):
    model = tiny(share_embeddings=True)
    assert "src_embed.weight" not in stored_tensors(model)
    folder = save_model(tmp_path / "m", model, tok_bytes)
    assert "src_embed.weight" not in load_file(folder / WEIGHTS_FILE)
    loaded, _, _ = load_model_folder(folder)
    assert loaded.src_embed.weight is loaded.tgt_embed.weight
    _, tensors, _ = read_model_files(folder)
    assert tensors["src_embed.weight"] is tensors["tgt_embed.weight"]


def test_float16_weights_stay_float16_in_the_file(tmp_path, tok_bytes):
    model = tiny().half()
    folder = save_model(tmp_path / "m", model, tok_bytes)
    assert {t.dtype for t in load_file(folder / WEIGHTS_FILE).values()} == {torch.float16}
    loaded, _, _ = load_model_folder(folder)
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
        load_model_folder(tmp_path / "nowhere")
    bad = spoiled(folder, tmp_path)
    (bad / TOKENIZER_FILE).unlink()
    with pytest.raises(FileNotFoundError, match="^no tokenizer.model in "):
        load_model_folder(bad)


def test_a_changed_byte_of_the_weights_or_the_tokenizer_is_refused(tmp_path, folder):
    for name in (WEIGHTS_FILE, TOKENIZER_FILE):
        bad = spoiled(folder, tmp_path, name)
        data = bytearray((bad / name).read_bytes())
        data[-1] ^= 1
        (bad / name).write_bytes(bytes(data))
        with pytest.raises(CheckpointError, match=f"{name} is damaged: it does not match the SHA-256 that config.json"):
            load_model_folder(bad)


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
        load_model_folder(bad)


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
        load_model_folder(bad)


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
        load_model_folder(bad)


def test_a_file_that_is_not_safetensors_is_refused_in_one_line(tmp_path, folder):
    import hashlib
    bad = spoiled(folder, tmp_path)
    (bad / WEIGHTS_FILE).write_bytes(b"\xff" * 64)
    digest = hashlib.sha256(b"\xff" * 64).hexdigest()
    rewrite_config(bad, lambda m: m["files"].update({WEIGHTS_FILE: digest}))
    with pytest.raises(CheckpointError, match="model.safetensors is not a safetensors file \\(") as e:
        load_model_folder(bad)
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
    loaded, tokenizer, record = load_model_folder(old)
    assert tokenizer == tok_bytes and record == {"steps": 2}
    same_logits(loaded, model)
    bare = save_checkpoint(tmp_path / "bare.pt", model)
    with pytest.raises(CheckpointError, match="bare.pt holds no tokenizer: it is not a model$"):
        load_model_folder(bare)


# --- from the hostile-input rounds (issues 32, 39, 47, 50) --------------------


@pytest.fixture
def resumable(cache, tmp_path, capsys) -> Path:
    out = tmp_path / "run"
    assert run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys)[0] == 0
    return out


@pytest.mark.usefixtures("one_thread")
def test_a_crafted_config_is_refused_before_any_allocation(model_pt, tmp_path):
    ckpt = load_checkpoint(model_pt)
    crafted = altered(model_pt, tmp_path / "crafted.pt", config={**ckpt["config"], "d_model": 2048, "n_layers": 6,
                                                                 "d_ff": 8192, "n_heads": 8})
    assert crafted.stat().st_size < 2**21
    script = ("import resource, sys; from transformer_lit.cli import main; rc = main(sys.argv[2:]); "
              "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)); sys.exit(rc)")
    rss = tmp_path / "rss"
    done = subprocess.run([sys.executable, "-c", script, str(rss), "translate", "--device", "cpu", "--checkpoint",
                           str(crafted), "Hi."], capture_output=True, text=True, env=env(), timeout=300)
    one_line_error(done, "does not fit", "crafted.pt")
    assert int(rss.read_text()) < 1_500_000   # KiB: the 2048-wide model would have taken about 3 GB


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("entry, words", [(b"\x00garbage bytes", ["'tokenizer'", "unusable"]),
                                          ("a str", ["'tokenizer'", "str"]), (7, ["'tokenizer'", "int"]),
                                          ("small", ["tokenizer has", "pieces"])])
def test_a_damaged_tokenizer_is_one_line(model_pt, tmp_path, capsys, entry, words):
    if entry == "small":
        entry = train_tokenizer(ENGLISH + FRENCH, vocab_size=60).to_bytes()
    bad = altered(model_pt, tmp_path / "bad.pt", tokenizer=entry)
    assert_one_line_error(*run(["translate", "--checkpoint", str(bad), "Hi."], capsys), "damaged", *words)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("entry, value", [
    ("state", {"step": "two"}), ("state", "not a dict"), ("rng", {"torch": torch.zeros(3)}),
    ("snapshots", [[2, {"x": torch.zeros(1)}]]), ("settings", {"warmup": -4}), ("tokenizer", b"\x00"),
    ("optimizer", {"state": {}, "param_groups": []}), ("corpus", {"english": 5})])
def test_a_damaged_checkpoint_does_not_resume(resumable, capsys, entry, value):
    path = resumable / "checkpoint.pt"
    ckpt = load_checkpoint(path)
    if entry == "state" and isinstance(value, dict):
        value = {**ckpt["state"], **value}
    altered(path, path, **{entry: value})
    argv = ["train", "--steps", "4", "--out", str(resumable), "--resume", "--quiet"]
    assert_one_line_error(*run(argv, capsys), "damaged", repr(entry))


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("what", ["moments", "betas", "eps"])
def test_a_resigned_optimizer_that_is_not_finite_is_damaged(resumable, capsys, what):
    """Issue 61: moments or betas made NaN in a re-signed checkpoint.pt ended in "the loss
    is nan ... lower the learning rate", blaming the user's settings; the entry is damaged."""
    path = resumable / "checkpoint.pt"
    optimizer = load_checkpoint(path)["optimizer"]
    group = optimizer["param_groups"][0]
    if what == "moments":
        moments = next(iter(optimizer["state"].values()))
        moments["exp_avg_sq"] = torch.full_like(moments["exp_avg_sq"], float("nan"))
    elif what == "betas":
        group["betas"] = (float("nan"), group["betas"][1])
    else:
        group["eps"] = float("inf")
    altered(path, path, optimizer=optimizer)
    argv = ["train", "--steps", "4", "--out", str(resumable), "--resume", "--quiet"]
    assert_one_line_error(*run(argv, capsys), "damaged", "'optimizer'", "finite")


@pytest.mark.usefixtures("one_thread")
def test_a_changed_weight_is_refused_and_old_checkpoints_still_load(model_pt, tmp_path, capsys):
    raw = bytearray(model_pt.read_bytes())
    with zipfile.ZipFile(model_pt) as zf:
        info = next(i for i in zf.infolist() if "/data/" in i.filename and i.file_size >= 64)
    name_len, extra_len = (int.from_bytes(raw[info.header_offset + k:info.header_offset + k + 2], "little")
                           for k in (26, 28))
    raw[info.header_offset + 30 + name_len + extra_len + 17] ^= 0x04   # one bit of one weight
    flipped = tmp_path / "flipped.pt"
    flipped.write_bytes(raw)
    assert_one_line_error(*run(["translate", "--checkpoint", str(flipped), "Hi."], capsys), "damaged", "checksum")
    old = altered(model_pt, tmp_path / "old.pt", weights_sha256=None, sha256=None)   # before the checksums
    status, out, err = run(["translate", "--checkpoint", str(old), "Hi."], capsys)
    assert status == 0 and len(out.splitlines()) == 1, err


def translate_with(path: Path, capsys) -> tuple[int, str, str]:
    return run(["translate", "--checkpoint", str(path), "Hi."], capsys)


@pytest.mark.usefixtures("one_thread")
def test_every_entry_has_a_checksum(model_pt):
    ckpt = torch.load(model_pt, weights_only=True)
    assert set(ckpt["sha256"]) == set(ckpt) - {"sha256"}
    assert {"config", "model", "tokenizer"} <= set(ckpt["sha256"])


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("entry", ["config", "tokenizer", "added"])
def test_an_edited_entry_is_refused_naming_it(model_pt, tmp_path, capsys, entry):
    ckpt = load_checkpoint(model_pt)
    other = train_tokenizer([s.upper() for s in ENGLISH + FRENCH], vocab_size=80) if entry == "tokenizer" else None
    value = {"config": {**ckpt["config"], "max_len": 8},      # a smaller max_len: shorter output
             "tokenizer": other and other.to_bytes(),          # another tokenizer of the same size
             "added": "an entry no run wrote"}[entry]
    if entry == "tokenizer":
        assert value != ckpt["tokenizer"] and other.vocab_size == 80
    edited = altered(model_pt, tmp_path / "edited.pt", seal=False, **{entry: value})
    assert_one_line_error(*translate_with(edited, capsys), "damaged", repr(entry))
    # the same content with its checksums recomputed passes them: the checksums are what refused it
    if entry != "added":
        status, out, err = translate_with(altered(model_pt, tmp_path / "sealed.pt", seal=True,
                                                    **{entry: value}), capsys)
        assert status == 0 and "damaged" not in err, err


@pytest.mark.usefixtures("one_thread")
def test_a_resumed_run_refuses_an_edited_corpus_or_tokenizer(tmp_path, capsys, cache):
    out = tmp_path / "run"
    assert run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys)[0] == 0
    path = out / "checkpoint.pt"
    ckpt = load_checkpoint(path)
    swapped = {**ckpt["corpus"], "english": ckpt["corpus"]["french"], "french": ckpt["corpus"]["english"]}
    altered(path, path, seal=False, corpus=swapped)
    argv = ["train", "--steps", "4", "--out", str(out), "--resume", "--quiet"]
    assert_one_line_error(*run(argv, capsys), "damaged", "'corpus'")


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("field, value, words", [
    ("max_len", 131072, ["max_len", str(MAX_LEN_LIMIT)]),   # a decode without end
    ("max_len", 1, ["max_len"]),                            # no room for a single token
    ("pad_id", 5, ["pad_id", "5"]),                         # the tokenizer pads with 0
])
def test_a_crafted_config_is_refused(model_pt, tmp_path, capsys, field, value, words):
    ckpt = load_checkpoint(model_pt)
    crafted = altered(model_pt, tmp_path / "crafted.pt", seal=True,
                        config={**ckpt["config"], field: value})
    assert_one_line_error(*translate_with(crafted, capsys), *words)


@pytest.mark.usefixtures("one_thread")
def test_an_older_checkpoint_is_named_as_such(model_pt, tmp_path, capsys):
    ckpt = torch.load(model_pt, weights_only=True)
    del ckpt["sha256"]
    torch.save(ckpt, tmp_path / "old.pt")
    status, out, err = translate_with(tmp_path / "old.pt", capsys)
    assert status == 0 and len(out.splitlines()) == 1
    assert "no checksum of its entries" in err and "only its weights are checked" in err, err


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("spoil, said", [
    (lambda t: t.to_sparse(), "is sparse"),
    (lambda t: torch.full_like(t, float("nan")), "NaN or infinite"),
    (lambda t: torch.full_like(t, float("inf")), "NaN or infinite"),
    (lambda t: t.to(torch.complex64), "dtype torch.complex64"),
    (lambda t: t.to(torch.int64), "dtype torch.int64"),
    (lambda t: t.bool(), "dtype torch.bool"),
])
def test_weights_that_are_not_dense_finite_floats_are_refused(spoil, said, tmp_path, capsys):
    """Re-signed checksums around a sparse weight (a traceback from the checksum), NaN or
    infinite weights (empty translations, exit 0), complex, int or bool weights (taken)."""
    from transformer_lit.checkpoints import (
        CheckpointError,
        model_from_checkpoint,
    )
    from transformer_lit.model import Transformer, TransformerConfig
    model = Transformer(TransformerConfig.tiny(20, 20))
    ckpt = {"config": dataclasses.asdict(model.config),
            "model": dict(model.state_dict())}
    name = "src_embed.weight"
    ckpt["model"][name] = spoil(ckpt["model"][name])
    with pytest.raises(CheckpointError, match=said):
        model_from_checkpoint(ckpt)


@pytest.mark.usefixtures("one_thread")
def test_a_checkpoint_with_compressed_entries_is_refused_before_it_is_inflated(tmp_path):
    """A 1 MB model.pt whose entry inflates to 1 GiB cost translate 1 GB of memory before it
    was refused; torch.save never compresses, so a compressed entry is refused unread."""
    import zipfile

    from transformer_lit.checkpoints import (
        CheckpointError,
        load_checkpoint,
        save_checkpoint,
    )
    from transformer_lit.model import Transformer, TransformerConfig
    model = Transformer(TransformerConfig.tiny(20, 20))
    plain, packed = tmp_path / "plain.pt", tmp_path / "packed.pt"
    save_checkpoint(plain, model)
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(packed, "w") as dst:
        for info in src.infolist():   # the same entries, deflated: torch.load reads them
            dst.writestr(info.filename, src.read(info), zipfile.ZIP_DEFLATED)
    assert load_checkpoint(plain)["config"]
    with pytest.raises(CheckpointError, match="compressed entries"):
        load_checkpoint(packed)


def test_a_tokenizer_that_is_not_bytes_is_refused_in_one_line(tmp_path, tok_bytes):
    from transformer_lit.data import SubwordTokenizer
    with pytest.raises(ArgumentError, match=r"^tokenizer must be the tokenizer's bytes \(SubwordTokenizer.to_bytes\(\)\), "
                                            "got SubwordTokenizer$"):
        save_model(tmp_path / "m", tiny(), SubwordTokenizer(tok_bytes))
    assert not (tmp_path / "m").exists()
