"""transformer_lit.encoder: parity with nn.TransformerEncoderLayer / nn.TransformerEncoder (values and gradients),
padding invariance, train vs eval, bad input."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from parity import assert_grads_match, ffn_and_norm_pairs, keep_mask, mha_pairs, randomize_
from transformer_lit.encoder import Encoder, EncoderLayer
from transformer_lit.model_support import copy_from_torch_encoder_layer

pytestmark = pytest.mark.usefixtures("no_mha_fastpath")

SHAPES = [(1, 5, 16, 4, 32), (3, 7, 24, 3, 40), (4, 6, 32, 8, 64)]   # (B, S, D, H, F)


def torch_layer(D: int, H: int, F: int, norm_first: bool, seed: int, dropout: float = 0.0) -> nn.TransformerEncoderLayer:
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(D, H, F, dropout, batch_first=True, norm_first=norm_first)
    return randomize_(layer)


def make_pair(D: int, H: int, F: int, norm_first: bool, seed: int) -> tuple[EncoderLayer, nn.TransformerEncoderLayer]:
    theirs = torch_layer(D, H, F, norm_first, seed)
    ours = copy_from_torch_encoder_layer(EncoderLayer(D, H, F, dropout=0.0, norm_first=norm_first), theirs)
    return ours, theirs


def layer_pairs(ours: EncoderLayer, theirs: nn.TransformerEncoderLayer):
    "Every parameter of ours, grouped as the matching parameter of theirs."
    return mha_pairs("self_attn", ours.self_attn, theirs.self_attn) + \
        ffn_and_norm_pairs(ours, theirs, {"attn_res": "norm1", "ffn_res": "norm2"})


# ---------------------------------------------------------------- one layer

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_layer_matches_torch(shape, norm_first, padded):
    B, S, D, H, F = shape
    ours, theirs = make_pair(D, H, F, norm_first, seed=B * 10 + S)
    ours.eval(); theirs.eval()
    torch.manual_seed(1)
    x = torch.randn(B, S, D)
    keep = keep_mask(B, S, seed=2) if padded else None
    with torch.no_grad():
        got = ours(x, None if keep is None else keep[:, None, None, :])                # ours: (B, 1, 1, S), True = attend
        expected = theirs(x, src_key_padding_mask=None if keep is None else ~keep)     # theirs: (B, S), True = padding
    assert got.shape == (B, S, D)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_layer_gradients_match_torch(shape, norm_first, mode):
    "Same scalar loss through both (dropout 0): equal input gradients and equal gradients parameter by parameter."
    B, S, D, H, F = shape
    ours, theirs = make_pair(D, H, F, norm_first, seed=S)
    ours.train(mode == "train"); theirs.train(mode == "train")
    torch.manual_seed(3)
    x_ours = torch.randn(B, S, D, requires_grad=True)
    x_theirs = x_ours.detach().clone().requires_grad_()
    keep = keep_mask(B, S, seed=4)
    weight = torch.randn(B, S, D)
    (ours(x_ours, keep[:, None, None, :]) * weight).sum().backward()
    (theirs(x_theirs, src_key_padding_mask=~keep) * weight).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_theirs.grad)
    assert_grads_match(layer_pairs(ours, theirs), ours)


def test_copy_returns_ours_and_checks_norm_first():
    theirs = torch_layer(16, 4, 32, norm_first=True, seed=0)
    ours = EncoderLayer(16, 4, 32, norm_first=True)
    assert copy_from_torch_encoder_layer(ours, theirs) is ours
    with pytest.raises(ValueError, match="norm_first"):
        copy_from_torch_encoder_layer(EncoderLayer(16, 4, 32, norm_first=False), theirs)


def test_copy_carries_layer_norm_eps():
    torch.manual_seed(0)
    theirs = randomize_(nn.TransformerEncoderLayer(16, 4, 32, 0.0, batch_first=True, layer_norm_eps=0.5)).eval()
    ours = copy_from_torch_encoder_layer(EncoderLayer(16, 4, 32, dropout=0.0), theirs).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x))


def test_copy_from_gelu_layer_raises():
    "Our layers are the paper's ReLU: copying a GELU layer must fail loudly, not compute something else."
    theirs = nn.TransformerEncoderLayer(16, 4, 32, 0.0, activation="gelu", batch_first=True)
    with pytest.raises(ValueError, match="activation"):
        copy_from_torch_encoder_layer(EncoderLayer(16, 4, 32, dropout=0.0), theirs)


# ---------------------------------------------------------------- the stack

def make_stacks(N: int, D: int, H: int, F: int, norm_first: bool, seed: int) -> tuple[Encoder, nn.TransformerEncoder]:
    "nn.TransformerEncoder with a final LayerNorm only for pre-norm, as our Encoder; weights copied layer by layer."
    torch.manual_seed(seed)
    final = randomize_(nn.LayerNorm(D)) if norm_first else None
    theirs = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, F, 0.0, batch_first=True, norm_first=norm_first),
                                   N, norm=final, enable_nested_tensor=False)
    randomize_(theirs)
    ours = Encoder(N, D, H, F, dropout=0.0, norm_first=norm_first)
    for o, t in zip(ours.layers, theirs.layers):
        copy_from_torch_encoder_layer(o, t)
    if norm_first:
        ours.norm.load_state_dict(final.state_dict())
    else:
        assert isinstance(ours.norm, nn.Identity)   # post-norm: the last layer already ends in a LayerNorm
    return ours, theirs


@pytest.mark.parametrize("shape", SHAPES[:2])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_matches_torch_values_and_gradients(shape, norm_first):
    B, S, D, H, F = shape
    ours, theirs = make_stacks(2, D, H, F, norm_first, seed=B)
    ours.eval(); theirs.eval()
    torch.manual_seed(5)
    x_ours = torch.randn(B, S, D, requires_grad=True)
    x_theirs = x_ours.detach().clone().requires_grad_()
    keep = keep_mask(B, S, seed=6)
    got, expected = ours(x_ours, keep[:, None, None, :]), theirs(x_theirs, src_key_padding_mask=~keep)
    torch.testing.assert_close(got, expected)
    weight = torch.randn(B, S, D)
    (got * weight).sum().backward(); (expected * weight).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_theirs.grad)
    pairs = [p for o, t in zip(ours.layers, theirs.layers) for p in layer_pairs(o, t)]
    if norm_first:
        pairs += [(f"norm.{n}", [getattr(ours.norm, n)], getattr(theirs.norm, n)) for n in ("weight", "bias")]
    assert_grads_match(pairs, ours)


# ---------------------------------------------------------------- properties

@pytest.mark.parametrize("norm_first", [False, True])
def test_real_positions_ignore_extra_padding(norm_first):
    "Appending padded positions (masked out) leaves the outputs at the real positions unchanged."
    torch.manual_seed(7)
    enc = Encoder(2, 24, 3, 40, dropout=0.0, norm_first=norm_first).eval()
    B, S, extra = 3, 6, 4
    keep = keep_mask(B, S, seed=8)
    x = torch.randn(B, S, 24)
    x_long = torch.cat([x, 5 * torch.randn(B, extra, 24)], dim=1)            # (B, S + extra, D), junk at the pads
    keep_long = torch.cat([keep, torch.zeros(B, extra, dtype=torch.bool)], dim=1)
    with torch.no_grad():
        short, long = enc(x, keep[:, None, None, :]), enc(x_long, keep_long[:, None, None, :])
    torch.testing.assert_close(long[:, :S][keep], short[keep])


def test_no_mask_equals_all_true_mask():
    torch.manual_seed(9)
    enc = Encoder(2, 16, 4, 32, dropout=0.0).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        torch.testing.assert_close(enc(x), enc(x, torch.ones(2, 1, 1, 5, dtype=torch.bool)))


def test_train_eval_changes_only_dropout():
    torch.manual_seed(10)
    x, keep = torch.randn(3, 6, 16), keep_mask(3, 6, seed=11)[:, None, None, :]
    enc = Encoder(2, 16, 4, 32, dropout=0.0)
    with torch.no_grad():
        assert torch.equal(enc.train()(x, keep), enc.eval()(x, keep))
        enc = Encoder(2, 16, 4, 32, dropout=0.3)
        torch.manual_seed(0); a = enc.train()(x, keep)
        torch.manual_seed(1); b = enc(x, keep)
        assert not torch.allclose(a, b)                      # training: a fresh dropout mask per call
        torch.manual_seed(0); c = enc.eval()(x, keep)
        torch.manual_seed(1); d = enc(x, keep)
        assert torch.equal(c, d)                             # evaluation: deterministic


def test_final_norm_only_for_pre_norm():
    assert isinstance(Encoder(2, 16, 4, 32, norm_first=False).norm, nn.Identity)
    assert isinstance(Encoder(2, 16, 4, 32, norm_first=True).norm, nn.Module)
    assert len(Encoder(3, 16, 4, 32).layers) == 3


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs, name", [
    (dict(d_model=0), "d_model"), (dict(n_heads=0), "n_heads"), (dict(d_ff=-1), "d_ff"), (dict(d_ff=2.5), "d_ff"),
])
def test_layer_rejects_bad_sizes(kwargs, name):
    with pytest.raises(ValueError, match=name):
        EncoderLayer(**{**dict(d_model=16, n_heads=4, d_ff=32), **kwargs})


def test_layer_rejects_heads_that_do_not_divide_d_model():
    with pytest.raises(ValueError, match="n_heads"):
        EncoderLayer(16, 3, 32)


@pytest.mark.parametrize("n_layers", [0, -1, True, 2.0])
def test_encoder_rejects_bad_n_layers(n_layers):
    with pytest.raises(ValueError, match="n_layers"):
        Encoder(n_layers, 16, 4, 32)


def test_layer_rejects_bad_input():
    layer = EncoderLayer(16, 4, 32)
    with pytest.raises(ValueError, match="d_model"):
        layer(torch.randn(2, 5, 8))
    with pytest.raises(TypeError, match="mask"):
        layer(torch.randn(2, 5, 16), torch.ones(2, 1, 1, 5))             # float mask
    with pytest.raises(ValueError, match="mask"):
        layer(torch.randn(2, 5, 16), torch.ones(2, 5, dtype=torch.bool))   # (B, S) instead of (B, 1, 1, S)
