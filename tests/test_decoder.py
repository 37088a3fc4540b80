"""transformer_lit.decoder: parity with nn.TransformerDecoderLayer / nn.TransformerDecoder (values and gradients),
causality, memory padding, train vs eval, bad input."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from parity import assert_grads_match, ffn_and_norm_pairs, keep_mask, mha_pairs, randomize_
from transformer_lit.decoder import Decoder, DecoderLayer
from transformer_lit.model_support import copy_from_torch_decoder_layer

pytestmark = pytest.mark.usefixtures("no_mha_fastpath")
from transformer_lit.masking import causal_mask

SHAPES = [(1, 4, 6, 16, 4, 32), (3, 7, 5, 24, 3, 40), (4, 6, 9, 32, 8, 64)]   # (B, S, T, D, H, F), S != T


def torch_layer(D: int, H: int, F: int, norm_first: bool, seed: int) -> nn.TransformerDecoderLayer:
    torch.manual_seed(seed)
    return randomize_(nn.TransformerDecoderLayer(D, H, F, 0.0, batch_first=True, norm_first=norm_first))


def make_pair(D: int, H: int, F: int, norm_first: bool, seed: int) -> tuple[DecoderLayer, nn.TransformerDecoderLayer]:
    theirs = torch_layer(D, H, F, norm_first, seed)
    ours = copy_from_torch_decoder_layer(DecoderLayer(D, H, F, dropout=0.0, norm_first=norm_first), theirs)
    return ours, theirs


def masks(B: int, S: int, T: int, seed: int, tgt_padding: bool = False):
    "Ours (True = may attend) and theirs (True = blocked): causal target mask, source padding, optional target padding."
    src_keep = keep_mask(B, S, seed)
    causal = causal_mask(T)                                                   # (T, T)
    ours = dict(tgt_mask=causal, memory_mask=src_keep[:, None, None, :])      # (T, T) and (B, 1, 1, S)
    theirs = dict(tgt_mask=~causal, memory_key_padding_mask=~src_keep)
    if tgt_padding:                                                           # position 0 stays real: no empty rows
        tgt_keep = keep_mask(B, T, seed + 1)
        ours["tgt_mask"] = causal & tgt_keep[:, None, None, :]               # (B, 1, T, T)
        theirs["tgt_key_padding_mask"] = ~tgt_keep
    return ours, theirs


def layer_pairs(ours: DecoderLayer, theirs: nn.TransformerDecoderLayer):
    "Every parameter of ours, grouped as the matching parameter of theirs."
    return mha_pairs("self_attn", ours.self_attn, theirs.self_attn) + \
        mha_pairs("multihead_attn", ours.cross_attn, theirs.multihead_attn) + \
        ffn_and_norm_pairs(ours, theirs, {"self_res": "norm1", "cross_res": "norm2", "ffn_res": "norm3"})


# ---------------------------------------------------------------- one layer

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("tgt_padding", [False, True])
def test_layer_matches_torch(shape, norm_first, tgt_padding):
    B, S, T, D, H, F = shape
    ours, theirs = make_pair(D, H, F, norm_first, seed=B * 10 + T)
    ours.eval(); theirs.eval()
    torch.manual_seed(1)
    y, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    m_ours, m_theirs = masks(B, S, T, seed=2, tgt_padding=tgt_padding)
    with torch.no_grad():
        got, expected = ours(y, memory, **m_ours), theirs(y, memory, **m_theirs)
    assert got.shape == (B, T, D)
    torch.testing.assert_close(got, expected)


def test_layer_without_masks_matches_torch():
    ours, theirs = make_pair(16, 4, 32, norm_first=False, seed=0)
    ours.eval(); theirs.eval()
    torch.manual_seed(1)
    y, memory = torch.randn(2, 5, 16), torch.randn(2, 3, 16)
    with torch.no_grad():
        torch.testing.assert_close(ours(y, memory), theirs(y, memory))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_layer_gradients_match_torch(shape, norm_first, mode):
    "Same scalar loss through both (dropout 0): equal gradients for y, memory and every parameter."
    B, S, T, D, H, F = shape
    ours, theirs = make_pair(D, H, F, norm_first, seed=T)
    ours.train(mode == "train"); theirs.train(mode == "train")
    torch.manual_seed(3)
    y1, mem1 = torch.randn(B, T, D, requires_grad=True), torch.randn(B, S, D, requires_grad=True)
    y2, mem2 = y1.detach().clone().requires_grad_(), mem1.detach().clone().requires_grad_()
    m_ours, m_theirs = masks(B, S, T, seed=4)
    weight = torch.randn(B, T, D)
    (ours(y1, mem1, **m_ours) * weight).sum().backward()
    (theirs(y2, mem2, **m_theirs) * weight).sum().backward()
    torch.testing.assert_close(y1.grad, y2.grad)
    torch.testing.assert_close(mem1.grad, mem2.grad)
    assert_grads_match(layer_pairs(ours, theirs), ours)


def test_copy_returns_ours_and_checks_norm_first():
    theirs = torch_layer(16, 4, 32, norm_first=True, seed=0)
    ours = DecoderLayer(16, 4, 32, norm_first=True)
    assert copy_from_torch_decoder_layer(ours, theirs) is ours
    with pytest.raises(ValueError, match="norm_first"):
        copy_from_torch_decoder_layer(DecoderLayer(16, 4, 32, norm_first=False), theirs)


def test_copy_from_gelu_layer_raises():
    "Our layers are the paper's ReLU: copying a GELU layer must fail loudly, not compute something else."
    theirs = nn.TransformerDecoderLayer(16, 4, 32, 0.0, activation="gelu", batch_first=True)
    with pytest.raises(ValueError, match="activation"):
        copy_from_torch_decoder_layer(DecoderLayer(16, 4, 32, dropout=0.0), theirs)


# ---------------------------------------------------------------- the stack

def make_stacks(N: int, D: int, H: int, F: int, norm_first: bool, seed: int) -> tuple[Decoder, nn.TransformerDecoder]:
    "nn.TransformerDecoder with a final LayerNorm only for pre-norm, as our Decoder; weights copied layer by layer."
    torch.manual_seed(seed)
    final = randomize_(nn.LayerNorm(D)) if norm_first else None
    theirs = nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H, F, 0.0, batch_first=True, norm_first=norm_first),
                                   N, norm=final)
    randomize_(theirs)
    ours = Decoder(N, D, H, F, dropout=0.0, norm_first=norm_first)
    for o, t in zip(ours.layers, theirs.layers):
        copy_from_torch_decoder_layer(o, t)
    if norm_first:
        ours.norm.load_state_dict(final.state_dict())
    else:
        assert isinstance(ours.norm, nn.Identity)
    return ours, theirs


@pytest.mark.parametrize("shape", SHAPES[:2])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_matches_torch_values_and_gradients(shape, norm_first):
    B, S, T, D, H, F = shape
    ours, theirs = make_stacks(2, D, H, F, norm_first, seed=B)
    ours.eval(); theirs.eval()
    torch.manual_seed(5)
    y1, mem1 = torch.randn(B, T, D, requires_grad=True), torch.randn(B, S, D, requires_grad=True)
    y2, mem2 = y1.detach().clone().requires_grad_(), mem1.detach().clone().requires_grad_()
    m_ours, m_theirs = masks(B, S, T, seed=6)
    got, expected = ours(y1, mem1, **m_ours), theirs(y2, mem2, **m_theirs)
    torch.testing.assert_close(got, expected)
    weight = torch.randn(B, T, D)
    (got * weight).sum().backward(); (expected * weight).sum().backward()
    torch.testing.assert_close(y1.grad, y2.grad)
    torch.testing.assert_close(mem1.grad, mem2.grad)
    pairs = [p for o, t in zip(ours.layers, theirs.layers) for p in layer_pairs(o, t)]
    if norm_first:
        pairs += [(f"norm.{n}", [getattr(ours.norm, n)], getattr(theirs.norm, n)) for n in ("weight", "bias")]
    assert_grads_match(pairs, ours)


# ---------------------------------------------------------------- properties

@pytest.mark.parametrize("norm_first", [False, True])
def test_causal_mask_hides_the_future(norm_first):
    "Changing y at position t leaves the outputs at positions < t bit-identical."
    torch.manual_seed(7)
    dec = Decoder(2, 24, 3, 40, dropout=0.0, norm_first=norm_first).eval()
    B, S, T = 3, 5, 7
    y, memory = torch.randn(B, T, 24), torch.randn(B, S, 24)
    keep = keep_mask(B, S, seed=8)[:, None, None, :]
    with torch.no_grad():
        base = dec(y, memory, causal_mask(T), keep)
        for t in range(T):
            changed = y.clone()
            changed[:, t] = torch.randn(B, 24)
            out = dec(changed, memory, causal_mask(T), keep)
            assert torch.equal(out[:, :t], base[:, :t]), f"position < {t} saw position {t}"
            assert not torch.allclose(out[:, t], base[:, t])


@pytest.mark.parametrize("norm_first", [False, True])
def test_outputs_ignore_padded_memory(norm_first):
    "Memory positions that are masked out (or appended as extra padding) do not change the outputs."
    torch.manual_seed(9)
    dec = Decoder(2, 16, 4, 32, dropout=0.0, norm_first=norm_first).eval()
    B, S, T, extra = 3, 6, 4, 3
    y, memory = torch.randn(B, T, 16), torch.randn(B, S, 16)
    keep = keep_mask(B, S, seed=10)
    junk = torch.where(keep[..., None], memory, 7 * torch.randn(B, S, 16))        # other values at the padding
    long = torch.cat([memory, torch.randn(B, extra, 16)], dim=1)
    keep_long = torch.cat([keep, torch.zeros(B, extra, dtype=torch.bool)], dim=1)
    with torch.no_grad():
        base = dec(y, memory, causal_mask(T), keep[:, None, None, :])
        torch.testing.assert_close(dec(y, junk, causal_mask(T), keep[:, None, None, :]), base)
        torch.testing.assert_close(dec(y, long, causal_mask(T), keep_long[:, None, None, :]), base)


def test_train_eval_changes_only_dropout():
    torch.manual_seed(11)
    y, memory, tgt_mask = torch.randn(3, 5, 16), torch.randn(3, 4, 16), causal_mask(5)
    dec = Decoder(2, 16, 4, 32, dropout=0.0)
    with torch.no_grad():
        assert torch.equal(dec.train()(y, memory, tgt_mask), dec.eval()(y, memory, tgt_mask))
        dec = Decoder(2, 16, 4, 32, dropout=0.3)
        torch.manual_seed(0); a = dec.train()(y, memory, tgt_mask)
        torch.manual_seed(1); b = dec(y, memory, tgt_mask)
        assert not torch.allclose(a, b)
        torch.manual_seed(0); c = dec.eval()(y, memory, tgt_mask)
        torch.manual_seed(1); d = dec(y, memory, tgt_mask)
        assert torch.equal(c, d)


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs, name", [
    (dict(d_model=0), "d_model"), (dict(n_heads=0), "n_heads"), (dict(d_ff=-1), "d_ff"), (dict(d_ff=2.5), "d_ff"),
])
def test_layer_rejects_bad_sizes(kwargs, name):
    with pytest.raises(ValueError, match=name):
        DecoderLayer(**{**dict(d_model=16, n_heads=4, d_ff=32), **kwargs})


@pytest.mark.parametrize("n_layers", [0, -2, False])
def test_decoder_rejects_bad_n_layers(n_layers):
    with pytest.raises(ValueError, match="n_layers"):
        Decoder(n_layers, 16, 4, 32)


def test_layer_rejects_bad_input():
    layer = DecoderLayer(16, 4, 32)
    y, memory = torch.randn(2, 5, 16), torch.randn(2, 3, 16)
    with pytest.raises(ValueError, match="d_model"):
        layer(torch.randn(2, 5, 8), memory)
    with pytest.raises(ValueError, match="key"):
        layer(y, torch.randn(2, 3, 8))                                   # memory of the wrong width
    with pytest.raises(ValueError, match="batch"):
        layer(y, torch.randn(3, 3, 16))                                  # memory of another batch size
    with pytest.raises(TypeError, match="mask"):
        layer(y, memory, tgt_mask=causal_mask(5).float())
    with pytest.raises(ValueError, match="mask"):
        layer(y, memory, tgt_mask=causal_mask(4))                        # (4, 4) for T = 5


# ---------------------------------------------------------------- the cached step is the layer's own forward

def _step_by_step(decoder, y, cache):
    "y (B, T, D) through the decoder one position at a time, advancing the cache -> (B, T, D)."
    outs = []
    for t in range(y.shape[1]):
        outs.append(decoder(y[:, t:t + 1], None, memory_mask=cache.memory_mask, cache=cache))
        cache.advance()
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_with_a_cache_equals_the_decoder_without(norm_first):
    "Decoder.forward(..., cache=...) position by position == one uncached pass; a batch == each row alone."
    from transformer_lit.inference import new_cache
    from transformer_lit.masking import causal_mask, padding_mask
    from transformer_lit.model import Transformer, TransformerConfig
    torch.manual_seed(31)
    model = Transformer(TransformerConfig.tiny(norm_first=norm_first)).eval()
    g = torch.Generator().manual_seed(32)
    src, tgt = torch.randint(3, 50, (3, 7), generator=g), torch.randint(3, 60, (3, 6), generator=g)
    src[1, 4:] = 0
    with torch.no_grad():
        memory = model.encode(src)
        y = model.pos(model.tgt_embed(tgt) * model.config.d_model ** 0.5)        # (B, T, D)
        full = model.decoder(y, memory, causal_mask(6), padding_mask(src, 0))   # (B, T, D)
        cache = new_cache(model, memory, src, max_len=6)
        steps = _step_by_step(model.decoder, y, cache)
        assert cache.length == 6
        torch.testing.assert_close(steps, full)
        for b in range(3):   # one row alone, its padding cut off
            s = src[b:b + 1, : int((src[b] != 0).sum())]
            alone = new_cache(model, model.encode(s), s, max_len=6)
            torch.testing.assert_close(_step_by_step(model.decoder, y[b:b + 1], alone), full[b:b + 1])


def test_the_cache_is_duck_typed():
    "The decoder and the attention import no cache: they know only KVSlot's two methods."
    import inspect

    import transformer_lit.attention as attention
    import transformer_lit.decoder as decoder
    for module in (attention, decoder):
        source = inspect.getsource(module)
        head = source.split('"""', 2)[2].split("__all__")[0]
        assert "inference" not in head and "cache" not in head, module   # no import of chapter 15 or 16
