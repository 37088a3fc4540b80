"""transformer_lit.onnx_export (chapter 30): the model as two ONNX graphs for onnxruntime and
the browser.

Run by Python's onnxruntime, the shipped model's folder writes greedy_decode's tokens on 200
test verses, an empty line, `<s>` typed as text and a source past the length limit, and returns
the attention weights of forward_with_weights within 1e-4; the zero-length cache of the first
step; tiny models of every arrangement (post- and pre-norm, learned positions, GELU, separate
embeddings) give the model's logits; the web tokenizer and the decoding rule are sentencepiece's;
the folder is the same bytes twice, its weights stored once; bad arguments are one line. One
export of the shipped model per session; everything offline, on one thread.
"""
from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from torch import nn

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

from transformer_lit.corpus import load_verses  # noqa: E402
from transformer_lit.data import (  # noqa: E402
    BOS_ID, EOS_ID, PAD_ID, UNK_ID, reference_set, split_by_book, train_tokenizer,
)
from transformer_lit.export import EXPORT_MARKER  # noqa: E402
from transformer_lit.inference import (  # noqa: E402
    InputTruncatedWarning, OutputTruncatedWarning, greedy_decode, output_limit, translate,
)
from transformer_lit.model import Transformer, TransformerConfig  # noqa: E402
from transformer_lit.norms import LayerNorm  # noqa: E402
from transformer_lit.onnx_export import (  # noqa: E402
    FORMAT, ONNX_EXTRA, WEIGHTS, OnnxTranslator, decode_pieces, export_onnx,
    require_onnx_writer, require_onnxruntime, torch_attention, web_tokenizer,
)
from transformer_lit.pretrained import load_pretrained  # noqa: E402
from transformer_lit.validate import ArgumentError  # noqa: E402

VERSES = 200   # test verses decoded by both engines (all 547: the same, measured once)
ATTENTION_VERSES = 40   # of those, the attention compared weight by weight
SPECIAL = ["", "<s> and </s> typed as text", "light " * 300]   # empty, typed, too long
AWKWARD = ["", "   ", "  two  spaces ", "a\tb\nc", "Noe\u0308l, e\u0301te\u0301", "ﬁn ① ½",
           "日本語 ok", "😀😀x", "«Oui»", "<s> hi </s> <pad>", "<unk>", "a ▁ b", "x" * 300]
FILES = {"encoder.onnx", "decoder.onnx", WEIGHTS, "tokenizer.json", "web.json", "README.md",
         EXPORT_MARKER}

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.xdist_group("onnx")]


def quiet_export(*args, **kwargs):
    "export_onnx without the tracer's notes on the Python conditions it froze."
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return export_onnx(*args, **kwargs)


@pytest.fixture(scope="module")
def shipped():
    return load_pretrained()


@pytest.fixture(scope="module")
def folder(tmp_path_factory, shipped):
    return quiet_export(*shipped, tmp_path_factory.mktemp("onnx") / "shipped")


@pytest.fixture(scope="module")
def translator(folder):
    return OnnxTranslator(folder, threads=1)


@pytest.fixture(scope="module")
def texts():
    sources, _ = reference_set(split_by_book(load_verses())["test"])
    return sources[:VERSES] + SPECIAL


@pytest.fixture(scope="module")
def decoded(translator, texts):
    return [translator.greedy(translator.encode(t)) for t in texts]


def package_greedy(model, ids: list[list[int]]) -> list[list[int]]:
    "greedy_decode in length-sorted batches, each row to output_limit, as translate runs it."
    limits = [output_limit(len(x), model.config.max_len) for x in ids]
    order, rows = sorted(range(len(ids)), key=lambda i: len(ids[i])), [None] * len(ids)
    for k in range(0, len(order), 64):
        chunk = order[k:k + 64]
        src = torch.full((len(chunk), max(len(ids[i]) for i in chunk)), PAD_ID)
        for r, i in enumerate(chunk):
            src[r, :len(ids[i])] = torch.tensor(ids[i])
        out = greedy_decode(model, src, torch.tensor([limits[i] for i in chunk]), BOS_ID, EOS_ID)
        for r, i in enumerate(chunk):
            row = out[r, 1:1 + limits[i]].tolist()
            rows[i] = row[:row.index(EOS_ID) + 1] if EOS_ID in row else row
    return rows


def test_onnxruntime_writes_greedy_decodes_tokens(shipped, decoded, texts):
    model, tokenizer = shipped
    ids = [x[:model.config.max_len - 1] + [EOS_ID] for x in tokenizer.encode(texts)]
    assert [r.src for r in decoded] == ids   # tokenizer.json, cut and </s> as translate
    ours = package_greedy(model, ids)
    same = [r.out == o for r, o in zip(decoded, ours)]
    assert sum(same) == len(texts), [t for t, s in zip(texts, same) if not s][:3]
    assert [r.text for r in decoded] == [tokenizer.decode(o) for o in ours]


def test_the_special_sources_are_translates(shipped, decoded, texts):
    model, tokenizer = shipped
    empty, typed, long = decoded[-3:]
    assert empty.src == [EOS_ID] and empty.out[-1] == EOS_ID
    assert typed.src == tokenizer.encode([SPECIAL[1]])[0] + [EOS_ID]
    assert BOS_ID not in typed.src[:-1] and EOS_ID not in typed.src[:-1]
    limit = model.config.max_len - 1
    assert len(long.src) == model.config.max_len and len(long.out) == limit
    assert EOS_ID not in long.out   # stopped at the limit, as translate stops
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert translate(model, tokenizer, [SPECIAL[2]]) == [long.text]
    assert {type(w.message) for w in caught} == {InputTruncatedWarning, OutputTruncatedWarning}
    assert translate(model, tokenizer, SPECIAL[:2]) == [empty.text, typed.text]


def test_the_attention_is_forward_with_weights(shipped, decoded):
    model, _ = shipped
    worst = 0.0
    for r in decoded[:ATTENTION_VERSES] + decoded[-3:-1]:
        theirs = torch_attention(model, torch.tensor([r.src]), torch.tensor([[BOS_ID] + r.out[:-1]]))
        L, H, S = theirs["enc"].shape[:3]
        assert r.enc_attn.shape == (L, H, S, S) and r.cross_attn.shape == (len(r.out), L, H, S)
        worst = max(worst, float(np.abs(theirs["enc"].numpy() - r.enc_attn).max()))
        worst = max(worst, float(np.abs(theirs["cross"].numpy() - r.cross_attn.transpose(1, 2, 0, 3)).max()))
        for t, w in enumerate(r.self_attn):
            assert w.shape == (L, H, t + 1)
            worst = max(worst, float(np.abs(theirs["self"][:, :, t, :t + 1].numpy() - w).max()))
    assert worst < 1e-4, worst


def test_the_first_step_takes_a_zero_length_cache(shipped, folder, translator):
    model, _ = shipped
    c = model.config
    L, H, Dh = c.n_layers, c.n_heads, c.d_model // c.n_heads
    src = [5, 6, 7, EOS_ID]
    cross_k, cross_v, _ = translator.encoder.run(None, {"src": np.array([src])})
    empty = np.zeros((L, H, 0, Dh), np.float32)
    logits, k, v, self_w, cross_w = translator.decoder.run(None, {
        "token": np.array([[BOS_ID]]), "position": np.array([0]), "self_k": empty,
        "self_v": empty, "cross_k": cross_k, "cross_v": cross_v})
    assert k.shape == v.shape == (L, H, 1, Dh) and self_w.shape == (L, H, 1)
    np.testing.assert_allclose(self_w, 1.0, atol=1e-6)   # one key: all the weight
    np.testing.assert_allclose(cross_w.sum(-1), 1.0, atol=1e-5)
    with torch.no_grad():
        theirs = model(torch.tensor([src]), torch.tensor([[BOS_ID]]))[0]   # (1, V)
    np.testing.assert_allclose(logits, theirs.numpy(), atol=1e-4, rtol=0)


def test_the_folder_holds_what_the_page_needs(shipped, folder):
    model, tokenizer = shipped
    assert {p.name for p in folder.iterdir()} == FILES
    web = json.loads((folder / "web.json").read_text(encoding="utf-8"))
    c = model.config
    assert web["format"] == FORMAT and (web["source_language"], web["target_language"]) == ("en", "fr")
    assert (web["bos_id"], web["eos_id"], web["pad_id"], web["unk_id"]) == (BOS_ID, EOS_ID, PAD_ID, UNK_ID)
    assert (web["n_layers"], web["n_heads"], web["d_head"], web["max_len"]) == (
        c.n_layers, c.n_heads, c.d_model // c.n_heads, c.max_len)
    assert web["vocab_size"] == len(web["pieces"]) == tokenizer.vocab_size
    assert web["pieces"] == tokenizer.pieces(range(tokenizer.vocab_size))
    rule = web["max_new_tokens"]
    for n in (1, 2, 7, 100, 170, 171, 256):   # web.json's rule is output_limit
        assert min(n + n // 2 + rule["plus"], rule["cap"]) == output_limit(n, c.max_len)
    assert web["max_source_pieces"] == c.max_len - 1
    from transformer_lit.files import sha256_of
    assert web["files"] == {n: sha256_of(folder / n) for n in
                            ("decoder.onnx", "encoder.onnx", "tokenizer.json", WEIGHTS)}
    readme = (folder / "README.md").read_text()
    assert "onnxruntime" in readme and "```python" in readme


def external(path) -> dict[str, tuple[str, str, tuple[int, ...], int]]:
    "Each external initializer of an ONNX file: name -> (offset, length, dims, data type)."
    graph = onnx.load(str(path), load_external_data=False).graph
    return {i.name: ({e.key: e.value for e in i.external_data}["offset"],
                     {e.key: e.value for e in i.external_data}["length"], tuple(i.dims), i.data_type)
            for i in graph.initializer if i.data_location == onnx.TensorProto.EXTERNAL}


def test_the_weights_are_stored_once_in_float16(shipped, folder):
    model, _ = shipped
    V, D = model.config.tgt_vocab_size, model.config.d_model
    tensors = external(folder / "encoder.onnx") | external(folder / "decoder.onnx")
    embedding = {(o, n) for o, n, dims, _ in tensors.values() if dims == (V, D)}
    assert len(embedding) == 1   # one place in weights.bin, read by both graphs
    assert not [d for *_, d, _ in tensors.values() if d == (D, V)]   # no transposed copy
    ranges = {(int(o), int(n)) for o, n, *_ in tensors.values()}
    assert sum(n for _, n in ranges) <= (folder / WEIGHTS).stat().st_size
    stored = {name: t for name, (*_, t) in tensors.items() if not name.startswith("onnx::")}
    assert onnx.TensorProto.FLOAT16 in stored.values()
    params = sum(p.numel() for p in model.parameters())   # each matrix once (tied)
    assert (folder / WEIGHTS).stat().st_size < 2 * params + 300_000   # float16 + the table
    total = sum(p.stat().st_size for p in folder.iterdir())
    assert total < 17e6, total


def test_the_web_tokenizer_is_sentencepiece(shipped, folder):
    from tokenizers import Tokenizer
    model, tokenizer = shipped
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    assert data["added_tokens"] == [] and data["post_processor"] is None
    web = Tokenizer.from_file(str(folder / "tokenizer.json"))
    sources, references = reference_set(split_by_book(load_verses())["test"])
    pool = sources + sum(references.values(), []) + AWKWARD
    assert [e.ids for e in web.encode_batch(pool)] == tokenizer.encode(pool)
    assert web.encode("<s>").ids == tokenizer.encode(["<s>"])[0] != [BOS_ID]


def test_decode_pieces_is_sentencepieces_decoding(shipped):
    _, tokenizer = shipped
    pieces = tokenizer.pieces(range(tokenizer.vocab_size))
    rng = np.random.default_rng(0)
    cases = [[], [UNK_ID], [UNK_ID, 100], [100, UNK_ID, 200], [UNK_ID, UNK_ID], [BOS_ID, 5, EOS_ID],
             [PAD_ID, PAD_ID]]
    cases += [rng.integers(0, len(pieces), 12).tolist() for _ in range(500)]
    for ids in cases:
        assert decode_pieces(pieces, ids) == tokenizer.decode(ids), ids


def test_the_readme_loop_translates_without_transformer_lit(shipped, folder):
    model, tokenizer = shipped
    readme = (folder / "README.md").read_text()
    code = readme.split("```python\n")[1].split("```")[0].replace("path/to/this/folder", str(folder))
    r = subprocess.run([sys.executable, "-c", "import sys; sys.modules['transformer_lit'] = None\n" + code],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == translate(model, tokenizer, ["And God said, Let there be light."])[0] + "\n"


@pytest.fixture(scope="module")
def tiny_tok():
    return train_tokenizer(["In the beginning God created the heavens and the earth.",
                            "Au commencement, Dieu créa les cieux et la terre."], vocab_size=60)


def tiny_model(vocab: int, **choices) -> Transformer:
    "Chapter 09's tiny model, seeded, its LayerNorms and biases random too, in eval mode."
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(vocab, vocab, **choices)).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (LayerNorm, nn.Linear)) and m.bias is not None:
                m.bias.normal_(0, 0.3)
            if isinstance(m, LayerNorm):
                m.weight.normal_(1, 0.3)
    return model


ARRANGEMENTS = {"post-norm": {}, "pre-norm": {"norm_first": True},
                "learned, gelu": {"positional": "learned", "activation": "gelu", "norm_first": True},
                "separate": {"share_embeddings": False, "norm_eps": 1e-6},
                "shared": {"share_embeddings": True}}


@pytest.mark.parametrize("choices", ARRANGEMENTS.values(), ids=ARRANGEMENTS.keys())
def test_every_arrangement_gives_the_models_logits(tmp_path, tiny_tok, choices):
    model = tiny_model(tiny_tok.vocab_size, **choices)
    onnx_model = OnnxTranslator(quiet_export(model, tiny_tok, tmp_path / "out"), threads=1)
    g = torch.Generator().manual_seed(1)
    for S in (1, 4, 9):
        src = [*torch.randint(4, tiny_tok.vocab_size, (S - 1,), generator=g).tolist(), EOS_ID]
        r = onnx_model.greedy(src)
        ours = greedy_decode(model, torch.tensor([src]), len(r.out), BOS_ID, EOS_ID)[0, 1:]
        assert r.out == ours.tolist()[:len(r.out)]
        cross_k, cross_v, _ = onnx_model.encoder.run(None, {"src": np.array([src])})
        c = model.config
        k = v = np.zeros((c.n_layers, c.n_heads, 0, c.d_model // c.n_heads), np.float32)
        tgt = [BOS_ID] + r.out
        with torch.no_grad():
            whole = model(torch.tensor([src]), torch.tensor([tgt]))[0].numpy()
        for t, token in enumerate(tgt):
            logits, k, v, _, _ = onnx_model.decoder.run(None, {
                "token": np.array([[token]]), "position": np.array([t]), "self_k": k, "self_v": v,
                "cross_k": cross_k, "cross_v": cross_v})
            np.testing.assert_allclose(logits[0], whole[t], atol=1e-5, rtol=0)


def test_the_export_is_the_same_bytes_twice(tmp_path, tiny_tok):
    model = tiny_model(tiny_tok.vocab_size, norm_first=True)
    a = quiet_export(model, tiny_tok, tmp_path / "a")
    b = quiet_export(model, tiny_tok, tmp_path / "b")
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    assert all((a / n).read_bytes() == (b / n).read_bytes() for n in names)
    assert model.training is False   # the exporter left the model's mode alone


def test_float32_weights_stay_float32(tmp_path, tiny_tok):
    "Random float32 weights are not float16 numbers: stored as they are, the same logits."
    model = tiny_model(tiny_tok.vocab_size)
    folder = quiet_export(model, tiny_tok, tmp_path / "out")
    types = {t for *_, t in (external(folder / "encoder.onnx") | external(folder / "decoder.onnx")).values()}
    assert types == {onnx.TensorProto.FLOAT}


def one_line(call) -> str:
    with pytest.raises((ValueError, TypeError, FileExistsError)) as e:
        call()
    assert "\n" not in str(e.value)
    return str(e.value)


def test_bad_arguments_are_refused_in_one_line(tmp_path, tiny_tok):
    model = tiny_model(tiny_tok.vocab_size)
    out = tmp_path / "out"
    assert "training mode" in one_line(lambda: export_onnx(model.train(), tiny_tok, out))
    model.eval()
    assert "tokenizer's" in one_line(lambda: export_onnx(tiny_model(50), tiny_tok, out))
    assert "out must be a path" in one_line(lambda: export_onnx(model, tiny_tok, 3))
    assert "force" in one_line(lambda: export_onnx(model, tiny_tok, out, force="yes"))
    assert "model must be a Transformer" in one_line(lambda: export_onnx(nn.Linear(2, 2), tiny_tok, out))
    assert not out.exists()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    assert "no export wrote" in one_line(lambda: export_onnx(model, tiny_tok, tmp_path / "other", force=True))
    quiet_export(model, tiny_tok, out)
    assert "force=True" in one_line(lambda: export_onnx(model, tiny_tok, out))
    quiet_export(model, tiny_tok, out, force=True)   # over an earlier export: allowed
    assert isinstance(one_line(lambda: export_onnx(model, tiny_tok, out)), str)


def test_a_damaged_folder_is_refused_when_read(tmp_path, tiny_tok):
    folder = quiet_export(tiny_model(tiny_tok.vocab_size), tiny_tok, tmp_path / "out")
    (folder / WEIGHTS).write_bytes((folder / WEIGHTS).read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(ValueError, match="not the file web.json names"):
        OnnxTranslator(folder)
    with pytest.raises(FileNotFoundError):
        OnnxTranslator(tmp_path / "missing")
    with pytest.raises(ArgumentError, match="folder must be a path"):
        OnnxTranslator(None)


def test_missing_engines_name_the_extra(monkeypatch):
    for name, require in (("onnx", require_onnx_writer), ("onnxruntime", require_onnxruntime)):
        monkeypatch.setitem(sys.modules, name, None)
        with pytest.raises(ImportError, match=ONNX_EXTRA.replace("[", r"\[").replace("]", r"\]")):
            require()
    assert ort.get_device() == "CPU"
