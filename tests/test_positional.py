"""transformer_lit.positional: the sinusoidal table against an independent float64 version of §3.5,
the relative-position property, PositionalEncoding / LearnedPositionalEncoding behaviour and errors."""
from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from transformer_lit.positional import LearnedPositionalEncoding, PositionalEncoding, sinusoidal_encoding


def reference_table(max_len: int, d_model: int) -> torch.Tensor:
    "The paper's formula entry by entry in float64: PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(...)."
    out = torch.empty(max_len, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        wavelength_factor = 10000.0 ** (2 * i / d_model)
        for pos in range(max_len):
            out[pos, 2 * i] = math.sin(pos / wavelength_factor)
            out[pos, 2 * i + 1] = math.cos(pos / wavelength_factor)
    return out


def rotation(k: int, d_model: int) -> torch.Tensor:
    "Block-diagonal float64 matrix M_k with PE[pos + k] = M_k @ PE[pos], built from the angle-addition formulas."
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        a = k / 10000.0 ** (2 * i / d_model)
        m[2 * i, 2 * i], m[2 * i, 2 * i + 1] = math.cos(a), math.sin(a)
        m[2 * i + 1, 2 * i], m[2 * i + 1, 2 * i + 1] = -math.sin(a), math.cos(a)
    return m


# ---------------------------------------------------------------- sinusoidal_encoding

@pytest.mark.parametrize("max_len,d_model", [(1, 2), (7, 4), (50, 16), (128, 64), (2000, 32), (300, 512)])
def test_table_matches_the_formula(max_len, d_model):
    pe = sinusoidal_encoding(max_len, d_model)
    assert pe.shape == (max_len, d_model) and pe.dtype == torch.float32
    assert_close(pe.double(), reference_table(max_len, d_model), atol=1e-7, rtol=0)


def test_first_rows_at_d_model_16():
    "The values a hand-typed table easily gets wrong: pos=1, dims 2-3 are (0.311, 0.950)."
    pe = sinusoidal_encoding(20, 16)
    assert_close(pe[1, 2:4], torch.tensor([0.311, 0.950]), atol=5e-4, rtol=0)
    assert_close(pe[1, 0:2], torch.tensor([math.sin(1.0), math.cos(1.0)]))
    assert_close(pe[0], torch.tensor([0.0, 1.0] * 8))


def test_far_positions_are_accurate():
    "Computing in float64 keeps far positions exact to float32 rounding (a float32 recipe is off by ~1e-4)."
    pe = sinusoidal_encoding(5000, 64)
    ref = reference_table(5000, 64)
    assert (pe.double() - ref).abs().max() < 1e-7


@pytest.mark.parametrize("d_model", [2, 16, 64])
@pytest.mark.parametrize("k", [1, 2, 5, 37, -3, -20])
def test_shift_is_a_fixed_rotation(k, d_model):
    pe = sinusoidal_encoding(300, d_model).double()
    m = rotation(k, d_model)
    src = torch.arange(max(0, -k), 300 - max(0, k))
    assert_close(pe[src + k], pe[src] @ m.T, atol=1e-6, rtol=0)
    assert_close(m @ m.T, torch.eye(d_model, dtype=torch.float64))


def test_dot_product_depends_only_on_offset():
    pe = sinusoidal_encoding(200, 32).double()
    for k in (0, 1, 9, 60):
        dots = (pe[: 200 - k] * pe[k:]).sum(-1)   # PE[p] . PE[p + k] for every p
        assert_close(dots, torch.full_like(dots, dots[0].item()), atol=1e-5, rtol=0)


@pytest.mark.parametrize("d_model", [0, 1, 3, 15, -2, 4.0, True])
def test_table_refuses_bad_d_model(d_model):
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal_encoding(10, d_model)


@pytest.mark.parametrize("max_len", [0, -1, 2.5, True])
def test_table_refuses_bad_max_len(max_len):
    with pytest.raises(ValueError, match="max_len"):
        sinusoidal_encoding(max_len, 8)


# ---------------------------------------------------------------- PositionalEncoding

@pytest.mark.parametrize("B,T,D", [(1, 1, 8), (1, 10, 16), (3, 7, 32), (2, 50, 64)])
def test_eval_output_is_x_plus_table(B, T, D):
    torch.manual_seed(0)
    module = PositionalEncoding(D, max_len=50).eval()
    x = torch.randn(B, T, D)
    out = module(x)
    assert out.shape == (B, T, D) and out.dtype == torch.float32
    assert_close(out, x + sinusoidal_encoding(50, D)[:T])


@pytest.mark.parametrize("offset,T", [(0, 4), (3, 1), (10, 5), (45, 5), (49, 1)])
def test_offset_selects_later_positions(offset, T):
    torch.manual_seed(1)
    module = PositionalEncoding(16, max_len=50).eval()
    x = torch.randn(2, T, 16)
    assert_close(module(x, offset=offset), x + sinusoidal_encoding(50, 16)[offset:offset + T])


def test_offset_accepts_int_like_values():
    module = PositionalEncoding(8, max_len=20).eval()
    x = torch.zeros(1, 2, 8)
    assert_close(module(x, offset=torch.tensor(3)), module(x, offset=3))


def test_one_token_at_a_time_equals_whole_sequence():
    torch.manual_seed(2)
    module = PositionalEncoding(32, max_len=40).eval()
    x = torch.randn(3, 40, 32)
    steps = torch.cat([module(x[:, t:t + 1], offset=t) for t in range(40)], dim=1)
    assert_close(steps, module(x))


def test_table_is_a_non_persistent_buffer():
    module = PositionalEncoding(16, max_len=30)
    assert "pe" in dict(module.named_buffers())
    assert list(module.state_dict()) == [] and list(module.parameters()) == []
    fresh = PositionalEncoding(16, max_len=30)
    fresh.load_state_dict(module.state_dict())   # strict load of an empty state dict works


def test_buffer_follows_to():
    module = PositionalEncoding(16, max_len=30)
    assert module.to(torch.float64).pe.dtype == torch.float64
    assert module.to("meta").pe.device.type == "meta"
    if torch.cuda.is_available():
        module = PositionalEncoding(16, max_len=30).to("cuda").eval()
        x = torch.randn(2, 5, 16, device="cuda")
        assert module(x).device.type == "cuda"
        assert_close(module(x).cpu(), x.cpu() + sinusoidal_encoding(30, 16)[:5])


def test_output_takes_the_dtype_of_x():
    module = PositionalEncoding(8, max_len=10).eval()
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    out = module(x)
    assert out.dtype == torch.float64
    assert_close(out, x + sinusoidal_encoding(10, 8)[:4].double())


def test_dropout_only_in_train_mode():
    torch.manual_seed(3)
    module = PositionalEncoding(16, max_len=500, dropout=0.1)
    x = torch.rand(4, 500, 16) + 1.0   # strictly positive, so zeros come from dropout only
    expected = x + sinusoidal_encoding(500, 16)
    module.train()
    out = module(x)
    kept = out != 0
    assert abs((~kept).float().mean().item() - 0.1) < 0.01
    assert_close(out[kept], expected[kept] / 0.9)
    module.eval()
    assert_close(module(x), expected)
    assert_close(PositionalEncoding(16, max_len=500, dropout=0.0).train()(x), expected)


def test_sequence_longer_than_max_len_is_a_value_error():
    module = PositionalEncoding(16, max_len=10)
    with pytest.raises(ValueError, match="max_len"):
        module(torch.zeros(1, 11, 16))
    with pytest.raises(ValueError, match="max_len"):
        module(torch.zeros(1, 3, 16), offset=8)
    module(torch.zeros(1, 10, 16))          # exactly max_len is fine
    module(torch.zeros(1, 1, 16), offset=9)


@pytest.mark.parametrize("shape", [(16,), (5, 16), (1, 2, 5, 16)])
def test_wrong_rank_is_a_value_error(shape):
    with pytest.raises(ValueError, match="x must have shape"):
        PositionalEncoding(16, max_len=10)(torch.zeros(shape))


def test_wrong_width_is_a_value_error():
    with pytest.raises(ValueError, match="d_model=16"):
        PositionalEncoding(16, max_len=10)(torch.zeros(2, 5, 8))


def test_odd_d_model_is_a_value_error():
    with pytest.raises(ValueError, match="d_model"):
        PositionalEncoding(15)


def test_bad_offset():
    module = PositionalEncoding(8, max_len=10)
    with pytest.raises(ValueError, match="offset"):
        module(torch.zeros(1, 2, 8), offset=-1)
    with pytest.raises(TypeError, match="offset"):
        module(torch.zeros(1, 2, 8), offset=1.5)


# ---------------------------------------------------------------- LearnedPositionalEncoding

def test_learned_same_interface():
    torch.manual_seed(4)
    module = LearnedPositionalEncoding(12, max_len=20).eval()
    assert sum(p.numel() for p in module.parameters()) == 20 * 12
    x = torch.randn(3, 6, 12)
    assert_close(module(x), x + module.embedding.weight[:6])
    assert_close(module(x[:, 2:5], offset=2), x[:, 2:5] + module.embedding.weight[2:5])
    assert list(module.state_dict()) == ["embedding.weight"]


def test_learned_gradients_reach_used_rows_only():
    torch.manual_seed(5)
    module = LearnedPositionalEncoding(8, max_len=10, dropout=0.0)
    module(torch.randn(2, 4, 8), offset=3).sum().backward()
    grad = module.embedding.weight.grad
    used = torch.zeros(10, dtype=torch.bool)
    used[3:7] = True
    assert (grad[used] != 0).all() and (grad[~used] == 0).all()


def test_learned_errors():
    module = LearnedPositionalEncoding(8, max_len=10)
    with pytest.raises(ValueError, match="max_len"):
        module(torch.zeros(1, 11, 8))
    with pytest.raises(ValueError, match="x must have shape"):
        module(torch.zeros(11, 8))
    with pytest.raises(ValueError, match="d_model"):
        LearnedPositionalEncoding(0)
    with pytest.raises(ValueError, match="max_len"):
        LearnedPositionalEncoding(8, max_len=0)
