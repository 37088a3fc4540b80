"""Chapter 25's dropout from 16 random bits per decision (keep_mask, FastDropout,
fast_dropout): its decisions against the Bernoulli law they stand for, its output and
gradient against the mask, the cases it leaves to nn.Dropout, and the fast training step
taking it where it applies."""

import pytest
import torch
from torch import nn

import transformer_lit.fast as fast
from transformer_lit.data import Batch
from transformer_lit.fast import DROPOUT_LEVELS, FastDropout, fast_dropout, keep_mask
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.validate import ArgumentError


def rounded(p: float) -> float:
    return round(p * DROPOUT_LEVELS) / DROPOUT_LEVELS


@pytest.mark.parametrize("p", [2**-10, 0.1, 0.25, 0.5, 0.9])
def test_the_decisions_follow_the_rounded_rate(p):
    "Kept share, and both of two neighbours kept (chunks of one 64-bit draw), within 5 sigma."
    torch.manual_seed(0)
    n = 1 << 21
    keep = keep_mask((n,), p)
    for share, want, m in ((keep.double().mean(), 1 - rounded(p), n),
                           ((keep[0::2] & keep[1::2]).double().mean(), (1 - rounded(p)) ** 2, n // 2),
                           ((keep[0::4] & keep[3::4]).double().mean(), (1 - rounded(p)) ** 2, n // 4)):
        sigma = (want * (1 - want) / m) ** 0.5
        assert abs(float(share) - want) < 5 * sigma, (p, float(share), want)


def test_the_rounding_is_at_most_half_a_level():
    "The package's rounding of p (dropped_levels), not this file's helper."
    for p in (0.1, 0.3, 1 / 3, 0.999):
        assert abs(fast.dropped_levels(p) / DROPOUT_LEVELS - p) <= 0.5 / DROPOUT_LEVELS


@pytest.mark.parametrize("shape", [(3, 5), (1,), (0, 7), (2, 3, 4, 5), (7,)])
def test_any_shape_and_a_count_not_a_multiple_of_four(shape):
    keep = keep_mask(shape, 0.5)
    assert keep.shape == shape and keep.dtype == torch.bool


def test_a_seed_repeats_the_mask_and_the_next_draw_differs():
    torch.manual_seed(3)
    a, b = keep_mask((4, 1000), 0.1), keep_mask((4, 1000), 0.1)
    torch.manual_seed(3)
    assert torch.equal(a, keep_mask((4, 1000), 0.1)) and not torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_output_and_gradient_are_the_mask_times_the_scale(dtype):
    x = torch.randn(33, 17, dtype=dtype).t().requires_grad_()   # not contiguous
    dy = torch.randn(17, 33, dtype=dtype)
    torch.manual_seed(4)
    y = FastDropout.apply(x, 0.3)
    torch.manual_seed(4)
    keep = keep_mask(x.shape, 0.3)
    mask = keep.to(dtype) * (1 / (1 - rounded(0.3)))   # 1 / (1 - p') in x's dtype, or 0
    assert y.dtype == dtype
    torch.testing.assert_close(y, x.detach() * mask, rtol=0, atol=0)
    exact = x.detach().double() * keep / (1 - rounded(0.3))
    torch.testing.assert_close(y.double(), exact, rtol=1e-2 if dtype == torch.bfloat16 else 1e-6, atol=0)
    (dx,) = torch.autograd.grad(y, x, dy)
    torch.testing.assert_close(dx, dy * mask, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.bfloat16])
def test_the_mask_comes_in_the_dtype_asked_for(dtype):
    torch.manual_seed(8)
    decisions = keep_mask((50, 40), 0.2)
    torch.manual_seed(8)
    mask = keep_mask((50, 40), 0.2, dtype)
    assert mask.dtype == dtype and torch.equal(mask.bool(), decisions)


def test_the_expectation_is_the_input():
    torch.manual_seed(5)
    x = torch.full((1 << 20,), 2.0)
    assert abs(float(FastDropout.apply(x, 0.1).double().mean()) - 2.0) < 5 * 2 * (0.1 / 0.9 / (1 << 20)) ** 0.5


@pytest.mark.parametrize("p", [0.0, 1e-6, 1 - 1e-6, 1.0])
def test_rates_16_bits_cannot_tell_from_0_or_1_are_left_to_the_module(p, monkeypatch):
    calls = []
    monkeypatch.setattr(fast, "keep_mask", lambda *a: calls.append(a) or keep_mask(*a))
    x = torch.randn(8, 8)
    torch.manual_seed(6)
    y = fast_dropout(x, nn.Dropout(p))
    torch.manual_seed(6)
    assert torch.equal(y, nn.Dropout(p)(x)) and not calls


def test_evaluation_mode_is_the_identity():
    x = torch.randn(8, 8)
    assert fast_dropout(x, nn.Dropout(0.1).eval()) is x


def test_the_fast_step_takes_it_for_every_residual_and_feed_forward_dropout(monkeypatch):
    "tiny: 2 + 2 layers; each encoder layer drops out 3 times (2 residuals, the FFN), each decoder layer 4."
    calls = []
    real = fast.keep_mask
    monkeypatch.setattr(fast, "keep_mask", lambda *a: calls.append(a) or real(*a))
    config = TransformerConfig.tiny(dropout=0.1)
    model = Transformer(config).train()
    torch.manual_seed(0)
    src, tgt = torch.randint(3, 50, (4, 9)), torch.randint(3, 50, (4, 8))
    src[1, 6:] = 0
    batch = Batch(src, tgt[:, :-1], tgt[:, 1:], torch.arange(4))
    loss, _ = fast.fast_loss(model, batch)
    loss.backward()
    assert len(calls) == 3 * config.n_layers + 4 * config.n_layers
    # and from the same seed the same loss: a resumed run draws the same masks
    torch.manual_seed(1)
    first = fast.fast_loss(model, batch)[0]
    torch.manual_seed(1)
    assert torch.equal(first, fast.fast_loss(model, batch)[0])


@pytest.mark.parametrize("p", [-0.1, 1.0, float("nan"), "0.1", True, None])
def test_a_rate_that_is_not_a_probability_is_refused_naming_p(p):
    with pytest.raises(ArgumentError, match=r"^p must be"):
        keep_mask((4,), p)
    with pytest.raises(ArgumentError, match=r"^p must be"):
        FastDropout.apply(torch.ones(4), p)


def test_a_rate_that_16_bits_round_to_1_is_refused_not_divided_by_zero():
    with pytest.raises(ArgumentError, match=r"^p must be below 1 - 2\^-17"):
        FastDropout.apply(torch.ones(4), 1 - 1e-6)
    torch.manual_seed(0)
    assert not keep_mask((4,), 1 - 2**-16).any()   # 65,535 of 65,536 dropped: still a rate
