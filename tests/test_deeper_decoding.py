"""transformer_lit.decoding_extras (page 41): what translate uses around the decoder, the
no-repeat processor, cross-attention maps and stored translations read back; and the old
import paths (inference, scoring) give the same objects."""
from __future__ import annotations

import warnings

import pytest
import torch

from transformer_lit import decoding_extras as extras
from transformer_lit.attention import attention_weights
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.validate import ArgumentError


def test_the_old_import_paths_give_the_same_objects():
    from transformer_lit import inference, scoring, validate
    for name in ("Decoded", "DecodeFn", "InputTruncatedWarning", "OutputTruncatedWarning",
                 "cross_attention_maps", "decode_in_batches", "no_repeat_ngram", "output_limit"):
        assert getattr(inference, name) is getattr(extras, name), name
    assert scoring.translated_verses is extras.translated_verses
    assert inference.MAX_LENGTH_PENALTY == validate.MAX_LENGTH_PENALTY == 10.0


def test_pad_rows_and_output_limit():
    rows = extras.pad_rows([[5, 6, 2], [7, 2]], 0)
    assert torch.equal(rows, torch.tensor([[5, 6, 2], [7, 2, 0]]))
    assert extras.output_limit(10, 256) == 25 and extras.output_limit(300, 256) == 255
    with pytest.raises(ArgumentError, match="max_len"):
        extras.output_limit(3, 1)


class Pieces:
    "A tokenizer of single characters: ids 3.. for 'a'.., enough for decode_in_batches."

    def encode(self, texts):
        return [[3 + ord(ch) - ord("a") for ch in t] for t in texts]

    def decode(self, ids):
        ids = [int(i) for i in ids]
        ids = ids[: ids.index(2)] if 2 in ids else ids
        return "".join(chr(i - 3 + ord("a")) for i in ids)


def test_decode_in_batches_keeps_the_input_order_and_marks_the_cut_rows():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(max_len=8)).eval()
    seen = []

    def echo(src, limits):  # each row: bos, then its source (eos included), then padding
        seen.append(src.shape)
        out = torch.zeros(src.shape[0], 1 + int(limits.max()), dtype=torch.long)
        out[:, 0] = 1
        width = min(src.shape[1], out.shape[1] - 1)
        out[:, 1 : 1 + width] = src[:, :width]
        return out

    sentences = ["abc", "a", "abcdefghij", "ab"]
    done = extras.decode_in_batches(model, Pieces(), sentences, echo, 2, eos_id=2)
    assert done.texts == ["abc", "a", "abcdefg", "ab"]  # the long one cut to max_len - 1
    # the long one reached its limit (7) before its eos: cut
    assert done.tokens == [3, 1, 10, 2] and done.cut == [False, False, True, False]
    assert seen == [(2, 3), (2, 8)]  # sorted by length: the short ones together
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        extras.warn_cuts(done._replace(cut=[False, True, False, False]), 7)
    assert [type(w.message).__name__ for w in caught] == ["InputTruncatedWarning",
                                                          "OutputTruncatedWarning"]
    assert caught[0].message.index == 2 and caught[1].message.index == 1


def test_cross_attention_maps_are_the_attention_weights():
    "The maps equal attention_weights of each cross-attention's own projections."
    torch.manual_seed(1)
    model = Transformer(TransformerConfig.tiny()).eval()
    src, out = torch.randint(3, 50, (1, 6)), torch.randint(3, 60, (1, 4))
    by_hand = []

    def record(module, args, kwargs, _):
        q, k, _v = module.project_qkv(*args)
        by_hand.append(attention_weights(q, k, kwargs["mask"])[0].mean(0))

    hooks = [layer.cross_attn.register_forward_hook(record, with_kwargs=True)
             for layer in model.decoder.layers]
    with torch.no_grad():
        model(src, out)
    for h in hooks:
        h.remove()
    maps = extras.cross_attention_maps(model, src, out)
    assert len(maps) == len(model.decoder.layers) and maps[0].shape == (4, 6)
    for m, h in zip(maps, by_hand):
        torch.testing.assert_close(m, h)
        torch.testing.assert_close(m.sum(-1), torch.ones(4))


def test_no_repeat_ngram_forbids_a_second_bigram():
    process = extras.no_repeat_ngram(2)
    tokens = torch.tensor([[1, 5, 6, 5]])  # bigram (5, 6) written; the last token is 5
    logits = process(tokens, torch.zeros(1, 10))
    assert logits[0, 6] == float("-inf") and torch.isfinite(logits[0, :6]).all()
    with pytest.raises(ArgumentError, match="n must be"):
        extras.no_repeat_ngram(0)


def test_translated_verses_refuses_other_verses():
    from types import SimpleNamespace as Verse
    verses = [Verse(book="RUT", chapter=1, verse=i, texts={"4": "s", "l": "r"}) for i in (1, 2)]
    record = {"source": "4", "references": ["l"],
              "sets": {"test": {"keys": ["RUT:1:1", "RUT:1:2"]}}}
    kept, sources, refs = extras.translated_verses(record, "test", verses)
    assert sources == ["s", "s"] and refs == {"l": ["r", "r"]}
    with pytest.raises(ArgumentError, match="not the test verses"):
        extras.translated_verses(record, "test", verses[1:])
