"""transformer_lit.ffn: FeedForward against eq. 2 and against nn.TransformerEncoderLayer's feed-forward
block (weights copied across), the position-wise property, gradients, dropout, bad input."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from transformer_lit.ffn import FeedForward

SHAPES = [(1, 1, 8, 32), (1, 9, 16, 64), (4, 7, 16, 48), (2, 5, 512, 2048)]   # (B, T, D, F)


def copy_from(layer: nn.TransformerEncoderLayer, ffn: FeedForward) -> None:
    ffn.linear1.load_state_dict(layer.linear1.state_dict())
    ffn.linear2.load_state_dict(layer.linear2.state_dict())


def pytorch_ff(layer: nn.TransformerEncoderLayer, x: torch.Tensor) -> torch.Tensor:
    "nn.TransformerEncoderLayer's feed-forward block before its residual dropout (dropout2)."
    return layer.linear2(layer.dropout(layer.activation(layer.linear1(x))))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("B,T,D,F_", SHAPES)
def test_parity_with_transformer_encoder_layer(activation, B, T, D, F_):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, nhead=2, dim_feedforward=F_, dropout=0.1,
                                       activation=activation, batch_first=True)
    ffn = FeedForward(D, F_, dropout=0.1, activation=activation)
    copy_from(layer, ffn)
    x = torch.randn(B, T, D)
    for training in (False, True):   # in train mode the same seed gives the same dropout mask
        layer.train(training)
        ffn.train(training)
        torch.manual_seed(1)
        expected = pytorch_ff(layer, x)
        torch.manual_seed(1)
        assert_close(ffn(x), expected)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_eval_parity_with_private_ff_block(activation):
    "In eval mode dropout2 is the identity, so PyTorch's _ff_block is exactly our module."
    torch.manual_seed(2)
    layer = nn.TransformerEncoderLayer(32, 4, 128, activation=activation, batch_first=True).eval()
    ffn = FeedForward(32, 128, activation=activation).eval()
    copy_from(layer, ffn)
    x = torch.randn(3, 6, 32)
    assert_close(ffn(x), layer._ff_block(x))


def test_matches_equation_2():
    torch.manual_seed(3)
    ffn = FeedForward(24, 96).eval()
    x = torch.randn(2, 5, 24)
    W1, b1 = ffn.linear1.weight.T, ffn.linear1.bias
    W2, b2 = ffn.linear2.weight.T, ffn.linear2.bias
    assert_close(ffn(x), torch.clamp(x @ W1 + b1, min=0) @ W2 + b2)


def test_gelu_is_exact_gelu():
    torch.manual_seed(4)
    ffn = FeedForward(8, 16, activation="gelu").eval()
    x = torch.randn(3, 8)
    assert_close(ffn(x), ffn.linear2(F.gelu(ffn.linear1(x), approximate="none")))


def test_paper_sizes_and_names():
    ffn = FeedForward(512, 2048)
    assert ffn.linear1.weight.shape == (2048, 512) and ffn.linear2.weight.shape == (512, 2048)
    assert list(ffn.state_dict()) == ["linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"]
    assert sum(p.numel() for p in ffn.parameters()) == 2 * 512 * 2048 + 2048 + 512


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_position_wise(activation):
    torch.manual_seed(5)
    ffn = FeedForward(16, 64, activation=activation).eval()
    x = torch.randn(3, 8, 16)
    y = ffn(x)
    for t in range(8):
        assert_close(ffn(x[:, t:t + 1]), y[:, t:t + 1])   # one position alone == slice of the full output
    perm = torch.randperm(8)
    assert_close(ffn(x[:, perm]), y[:, perm])
    assert_close(ffn(x.reshape(24, 16)).reshape(3, 8, 16), y)
    x2 = x.clone()
    x2[:, 3] += 1.0                                      # change one position ...
    changed = (ffn(x2) - y).abs().amax(dim=(0, 2)) > 1e-6
    assert changed.tolist() == [t == 3 for t in range(8)]  # ... and only that output changes


@pytest.mark.parametrize("shape", [(16,), (5, 16), (2, 3, 16), (2, 3, 4, 16)])
def test_any_leading_dims(shape):
    torch.manual_seed(6)
    ffn = FeedForward(16, 32).eval()
    x = torch.randn(shape)
    assert ffn(x).shape == shape
    assert_close(ffn(x).reshape(-1, 16), ffn(x.reshape(-1, 16)))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_gradients_flow(activation):
    torch.manual_seed(7)
    ffn = FeedForward(16, 64, activation=activation).train()
    x = torch.randn(2, 5, 16, requires_grad=True)
    ffn(x).pow(2).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    for name, p in ffn.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_dropout_only_in_train_mode():
    torch.manual_seed(8)
    ffn = FeedForward(32, 256, dropout=0.5)
    x = torch.randn(4, 10, 32)
    ffn.eval()
    assert_close(ffn(x), ffn(x))                           # deterministic
    reference = ffn(x)
    ffn.train()
    a, b = ffn(x), ffn(x)
    assert not torch.equal(a, b) and not torch.equal(a, reference)
    no_drop = FeedForward(32, 256, dropout=0.0)
    no_drop.load_state_dict(ffn.state_dict())
    assert_close(no_drop.train()(x), reference)


def test_dropout_acts_on_the_hidden_units_only():
    "No dropout after linear2: with dropout=1 every hidden unit is zeroed and the output is exactly b2."
    torch.manual_seed(9)
    ffn = FeedForward(8, 16, dropout=0.5).train()
    ffn.dropout.p = 1.0  # past what the constructor accepts: every hidden unit zeroed
    out = ffn(torch.randn(3, 4, 8))
    assert_close(out, ffn.linear2.bias.expand(3, 4, 8))


@pytest.mark.parametrize("activation", ["tanh", "ReLU", "", None, 1])
def test_bad_activation(activation):
    with pytest.raises(ValueError, match="activation"):
        FeedForward(8, 16, activation=activation)


@pytest.mark.parametrize("name,kwargs", [
    ("d_model", dict(d_model=0, d_ff=16)), ("d_model", dict(d_model=-4, d_ff=16)),
    ("d_model", dict(d_model=8.0, d_ff=16)), ("d_model", dict(d_model=True, d_ff=16)),
    ("d_ff", dict(d_model=8, d_ff=0)), ("d_ff", dict(d_model=8, d_ff=2.5)), ("d_ff", dict(d_model=8, d_ff=None)),
])
def test_bad_sizes(name, kwargs):
    with pytest.raises(ValueError, match=name):
        FeedForward(**kwargs)


@pytest.mark.parametrize("shape", [(2, 5, 12), (16, 2), (12,)])
def test_wrong_last_dimension(shape):
    with pytest.raises(ValueError, match="d_model = 16"):
        FeedForward(16, 32)(torch.zeros(shape))


def test_scalar_input():
    with pytest.raises(ValueError, match="x must have shape"):
        FeedForward(16, 32)(torch.tensor(1.0))
