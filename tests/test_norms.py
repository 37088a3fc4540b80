"""transformer_lit.norms: LayerNorm matches nn.LayerNorm; ResidualNorm places norm and dropout as nn.TransformerEncoderLayer."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lit.norms import LayerNorm, ResidualNorm

SHAPES = [(1, 16), (5, 16), (1, 1, 16), (1, 7, 16), (4, 9, 16), (2, 3, 5, 16)]


def random_reference(d_model: int, eps: float = 1e-5) -> nn.LayerNorm:
    "An nn.LayerNorm with random weight and bias, so the affine part is really compared."
    ref = nn.LayerNorm(d_model, eps=eps)
    with torch.no_grad():
        ref.weight.normal_()
        ref.bias.normal_()
    return ref


def copied(ref: nn.LayerNorm) -> LayerNorm:
    ours = LayerNorm(ref.normalized_shape[0], eps=ref.eps)
    ours.load_state_dict(ref.state_dict())
    return ours


# ---------------------------------------------------------------- LayerNorm

@pytest.mark.parametrize("shape", SHAPES)
def test_layernorm_matches_torch(shape):
    torch.manual_seed(0)
    ref = random_reference(shape[-1])
    x = 3.0 * torch.randn(shape) + 1.5
    torch.testing.assert_close(copied(ref)(x), ref(x))


@pytest.mark.parametrize("shape", SHAPES)
def test_layernorm_gradients_match_torch(shape):
    torch.manual_seed(1)
    ref = random_reference(shape[-1])
    ours = copied(ref)
    x_ours = torch.randn(shape, requires_grad=True)
    x_ref = x_ours.detach().clone().requires_grad_(True)
    grad_out = torch.randn(shape)
    ours(x_ours).backward(grad_out)
    ref(x_ref).backward(grad_out)
    torch.testing.assert_close(x_ours.grad, x_ref.grad)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad)
    torch.testing.assert_close(ours.bias.grad, ref.bias.grad)


def test_layernorm_state_dict_maps_one_to_one():
    ours, ref = LayerNorm(12), nn.LayerNorm(12)
    assert set(ours.state_dict()) == set(ref.state_dict()) == {"weight", "bias"}
    torch.testing.assert_close(ours.weight, torch.ones(12))
    torch.testing.assert_close(ours.bias, torch.zeros(12))
    ref.load_state_dict(ours.state_dict())      # and back, strict


def test_layernorm_statistics_are_per_token_and_biased():
    torch.manual_seed(2)
    x = torch.randn(3, 4, 10) * 5 + 2
    y = LayerNorm(10, eps=1e-12)(x).detach()
    torch.testing.assert_close(y.mean(-1), torch.zeros(3, 4), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.var(-1, correction=0), torch.ones(3, 4), atol=1e-5, rtol=0)
    # each token is normalised on its own: changing one token leaves the others unchanged
    x2 = x.clone()
    x2[0, 0] = 100.0
    y2 = LayerNorm(10, eps=1e-12)(x2).detach()
    torch.testing.assert_close(y2[1:], y[1:])
    torch.testing.assert_close(y2[0, 1:], y[0, 1:])


@pytest.mark.parametrize("eps", [1e-5, 0.1, 2.0])
def test_layernorm_respects_eps(eps):
    torch.manual_seed(3)
    x = 0.1 * torch.randn(4, 6, 8)              # small variance, so eps matters
    ref = random_reference(8, eps=eps)
    torch.testing.assert_close(copied(ref)(x), ref(x))
    other = LayerNorm(8, eps=1e-5 if eps != 1e-5 else 1.0)
    other.load_state_dict(ref.state_dict())
    assert not torch.allclose(other(x), ref(x), atol=1e-3)


def test_layernorm_constant_token_is_finite():
    y = LayerNorm(8)(torch.full((2, 8), 3.0))
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y, torch.zeros(2, 8))


def test_layernorm_float64():
    torch.manual_seed(4)
    ref = random_reference(8)
    ours = copied(ref).double()
    ref.double()
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    torch.testing.assert_close(ours(x), ref(x))


@pytest.mark.parametrize("d_model", [0, -4, 2.5, "8", True, None])
def test_layernorm_rejects_bad_d_model(d_model):
    with pytest.raises(ValueError, match="d_model"):
        LayerNorm(d_model)


@pytest.mark.parametrize("eps", [0, -1e-5, "small", True])
def test_layernorm_rejects_bad_eps(eps):
    with pytest.raises(ValueError, match="eps"):
        LayerNorm(8, eps=eps)


@pytest.mark.parametrize("shape", [(2, 5, 7), (8, 2), (3,)])
def test_layernorm_rejects_wrong_last_dim(shape):
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., D\) with D = d_model = 8"):
        LayerNorm(8)(torch.randn(shape))


def test_layernorm_rejects_scalar_and_non_tensor():
    with pytest.raises(ValueError, match="x must have shape"):
        LayerNorm(1)(torch.tensor(1.0))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        LayerNorm(3)([1.0, 2.0, 3.0])


# ---------------------------------------------------------------- ResidualNorm

def wrapped(d_model: int, norm_first: bool, dropout: float = 0.0) -> tuple[ResidualNorm, nn.LayerNorm]:
    "A ResidualNorm and an nn.LayerNorm holding the same random weights."
    ref = random_reference(d_model)
    res = ResidualNorm(d_model, dropout=dropout, norm_first=norm_first)
    res.norm.load_state_dict(ref.state_dict())
    return res, ref


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("shape", [(1, 1, 16), (3, 5, 16), (6, 16)])
def test_residualnorm_equals_formula(norm_first, shape):
    torch.manual_seed(5)
    res, ref = wrapped(16, norm_first)
    sublayer = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
    x = torch.randn(shape)
    expected = x + sublayer(ref(x)) if norm_first else ref(x + sublayer(x))
    torch.testing.assert_close(res(x, sublayer), expected)


@pytest.mark.parametrize("norm_first", [False, True])
def test_residualnorm_dropout_is_on_the_sublayer_output(norm_first):
    "Training mode, p = 0.3: the mask falls on Sublayer(.) before the addition, nowhere else."
    torch.manual_seed(6)
    res, ref = wrapped(16, norm_first, dropout=0.3)
    res.train()
    sublayer = nn.Linear(16, 16)
    x = torch.randn(4, 5, 16)
    torch.manual_seed(7)
    got = res(x, sublayer)
    torch.manual_seed(7)
    if norm_first:
        expected = x + F.dropout(sublayer(ref(x)), 0.3, training=True)
    else:
        expected = ref(x + F.dropout(sublayer(x), 0.3, training=True))
    torch.testing.assert_close(got, expected)
    res.eval()                                   # evaluation: dropout is the identity
    expected_eval = x + sublayer(ref(x)) if norm_first else ref(x + sublayer(x))
    torch.testing.assert_close(res(x, sublayer), expected_eval)


def rebuilt_encoder_layer(ref: nn.TransformerEncoderLayer):
    "ref's forward, written with two ResidualNorms around ref's own sub-layers (norm1/2 -> .norm, dropout1/2 -> .dropout)."
    d_model = ref.linear1.in_features
    wraps = []
    for norm, drop in ((ref.norm1, ref.dropout1), (ref.norm2, ref.dropout2)):
        w = ResidualNorm(d_model, dropout=drop.p, norm_first=ref.norm_first, eps=norm.eps)
        w.norm.load_state_dict(norm.state_dict())
        w.train(ref.training)
        wraps.append(w)
    self_attention = lambda h: ref.self_attn(h, h, h, need_weights=False)[0]
    feed_forward = lambda h: ref.linear2(ref.dropout(ref.activation(ref.linear1(h))))
    return lambda x: wraps[1](wraps[0](x, self_attention), feed_forward)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("B,S", [(1, 1), (1, 6), (3, 8)])
def test_residualnorm_rebuilds_torch_encoder_layer(norm_first, training, B, S):
    torch.manual_seed(8)
    ref = nn.TransformerEncoderLayer(32, nhead=4, dim_feedforward=64, dropout=0.1,
                                     batch_first=True, norm_first=norm_first)
    with torch.no_grad():
        for norm in (ref.norm1, ref.norm2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    ref.train(training)
    ours = rebuilt_encoder_layer(ref)
    x = torch.randn(B, S, 32)
    torch.manual_seed(9)
    expected = ref(x)
    torch.manual_seed(9)
    got = ours(x)
    torch.testing.assert_close(got, expected)


def test_residualnorm_attributes_and_state_dict():
    res = ResidualNorm(8, dropout=0.2, norm_first=True, eps=1e-6)
    assert isinstance(res.norm, LayerNorm) and res.norm.eps == 1e-6 and res.norm.d_model == 8
    assert isinstance(res.dropout, nn.Dropout) and res.dropout.p == 0.2
    assert res.norm_first is True
    assert set(res.state_dict()) == {"norm.weight", "norm.bias"}
    assert ResidualNorm(8).norm_first is False and ResidualNorm(8).dropout.p == 0.1   # paper defaults


@pytest.mark.parametrize("d_model", [0, -1, 3.0, True])
def test_residualnorm_rejects_bad_d_model(d_model):
    with pytest.raises(ValueError, match="d_model"):
        ResidualNorm(d_model)


@pytest.mark.parametrize("dropout", [-0.1, 1.5, "0.1", True])
def test_residualnorm_rejects_bad_dropout(dropout):
    with pytest.raises(ValueError, match="dropout"):
        ResidualNorm(8, dropout=dropout)


def test_residualnorm_rejects_bad_norm_first():
    with pytest.raises(TypeError, match="norm_first"):
        ResidualNorm(8, norm_first="yes")


@pytest.mark.parametrize("norm_first", [False, True])
def test_residualnorm_rejects_wrong_x(norm_first):
    res = ResidualNorm(8, dropout=0.0, norm_first=norm_first)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., D\) with D = d_model = 8"):
        res(torch.randn(2, 3, 5), lambda h: h)


@pytest.mark.parametrize("norm_first", [False, True])
def test_residualnorm_rejects_sublayer_of_wrong_shape(norm_first):
    res = ResidualNorm(8, dropout=0.0, norm_first=norm_first)
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match="sublayer must return"):
        res(x, lambda h: h[:, :1])          # (2, 1, 8) would broadcast silently
    with pytest.raises(ValueError, match="sublayer must return"):
        res(x, lambda h: (h, None))         # a tuple, as nn.MultiheadAttention returns


@pytest.mark.parametrize("shape", [(1, 16), (4, 7, 16), (2, 3, 5, 16)])
def test_explicit_path_equals_fused(shape):
    "The written-out formula (explicit) and the fused kernel (forward) are the same function, gradients included."
    torch.manual_seed(7)
    ln = LayerNorm(16)
    with torch.no_grad():
        ln.weight.normal_(); ln.bias.normal_()
    x1 = torch.randn(shape, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    g = torch.randn(shape)
    ln(x1).backward(g)
    ln.explicit(x2).backward(g)
    torch.testing.assert_close(x1.grad, x2.grad)
    torch.testing.assert_close(ln(x1), ln.explicit(x1))
