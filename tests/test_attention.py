"""transformer_lit.attention: parity with PyTorch, the two paths, gradients, masks, dropout, bad input."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lit.attention import (MultiHeadAttention, attention_weights, copy_from_torch_mha, fused_attention,
                                       merge_heads, scaled_dot_product_attention, split_heads, to_torch_attn_mask)

SHAPES = [(1, 5, 5, 16, 4), (3, 4, 9, 24, 3), (2, 7, 3, 32, 8)]   # (B, Tq, Tk, D, H)
MASK_KINDS = [None, "padding", "causal", "padding+causal", "full"]


def make_mask(kind: str | None, B: int, H: int, Tq: int, Tk: int, seed: int) -> torch.Tensor | None:
    "A mask (True = may attend) in which every query row keeps at least one key."
    if kind is None:
        return None
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, Tk + 1, (B,), generator=g)
    padding = (torch.arange(Tk) < lengths[:, None])[:, None, None, :]                         # (B, 1, 1, Tk)
    causal = torch.ones(Tq, Tk, dtype=torch.bool).tril(diagonal=max(Tk - Tq, 0))              # (Tq, Tk)
    if kind == "padding":
        return padding
    if kind == "causal":
        return causal
    if kind == "padding+causal":
        return padding & causal                                                             # (B, 1, Tq, Tk)
    full = torch.rand(B, H, Tq, Tk, generator=g) > 0.4                                      # (B, H, Tq, Tk)
    full[..., 0] = True
    return full


def make_pair(D: int, H: int, seed: int) -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(D, H, batch_first=True)
    nn.init.normal_(theirs.in_proj_bias); nn.init.normal_(theirs.out_proj.bias)   # PyTorch starts them at zero
    return copy_from_torch_mha(MultiHeadAttention(D, H), theirs).eval(), theirs.eval()



def call(mha, q, k, v, mask, need_weights: bool):
    "mha's output (B, Tq, D) by the fused path (forward) or the explicit one (forward_with_weights)."
    return mha.forward_with_weights(q, k, v, mask=mask)[0] if need_weights else mha(q, k, v, mask=mask)

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("need_weights", [False, True])
def test_matches_torch_multihead_attention(shape, kind, need_weights):
    B, Tq, Tk, D, H = shape
    ours, theirs = make_pair(D, H, seed=B * 100 + Tq)
    torch.manual_seed(1)
    query, memory = torch.randn(B, Tq, D), torch.randn(B, Tk, D)
    mask = make_mask(kind, B, H, Tq, Tk, seed=2)
    attn_mask = None if mask is None else to_torch_attn_mask(mask, (B, H, Tq, Tk))   # theirs: True = blocked
    expected, expected_weights = theirs(query, memory, memory, attn_mask=attn_mask, need_weights=need_weights)
    if need_weights:   # the explicit path, which also returns the weights
        got, weights = ours.forward_with_weights(query, memory, memory, mask=mask)
        assert weights.shape == (B, H, Tq, Tk)
        torch.testing.assert_close(weights.mean(dim=1), expected_weights)   # theirs averages over heads
    else:
        got = ours(query, memory, memory, mask=mask)
        assert isinstance(got, torch.Tensor)   # one tensor, whatever is passed
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("B, T, D, H", [(1, 6, 16, 4), (4, 9, 24, 3)])
@pytest.mark.parametrize("kind", [None, "padding+causal"])
def test_self_attention_and_gradients_match_torch(B, T, D, H, kind):
    "Self-attention (the stacked in-projection) matches in value and in every gradient."
    ours, theirs = make_pair(D, H, seed=T)
    torch.manual_seed(3)
    x1 = torch.randn(B, T, D, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    mask = make_mask(kind, B, H, T, T, seed=4)
    attn_mask = None if mask is None else to_torch_attn_mask(mask, (B, H, T, T))
    out_ours = ours(x1, x1, x1, mask=mask)
    out_theirs, _ = theirs(x2, x2, x2, attn_mask=attn_mask, need_weights=False)
    torch.testing.assert_close(out_ours, out_theirs)
    grad_out = torch.randn_like(out_ours)
    out_ours.backward(grad_out); out_theirs.backward(grad_out)
    torch.testing.assert_close(x1.grad, x2.grad)
    w_grad = torch.cat([ours.q_proj.weight.grad, ours.k_proj.weight.grad, ours.v_proj.weight.grad])
    b_grad = torch.cat([ours.q_proj.bias.grad, ours.k_proj.bias.grad, ours.v_proj.bias.grad])
    torch.testing.assert_close(w_grad, theirs.in_proj_weight.grad)
    torch.testing.assert_close(b_grad, theirs.in_proj_bias.grad)
    torch.testing.assert_close(ours.out_proj.weight.grad, theirs.out_proj.weight.grad)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", MASK_KINDS)
def test_explicit_and_fused_paths_agree(shape, kind):
    B, Tq, Tk, D, H = shape
    torch.manual_seed(5)
    mha = MultiHeadAttention(D, H).eval()
    query, memory = torch.randn(B, Tq, D), torch.randn(B, Tk, D)
    mask = make_mask(kind, B, H, Tq, Tk, seed=6)
    explicit, _ = mha.forward_with_weights(query, memory, memory, mask=mask)
    torch.testing.assert_close(mha(query, memory, memory, mask=mask), explicit)
    if Tq == Tk:   # self-attention: stacked projection == three separate projections
        torch.testing.assert_close(mha(query, query, query, mask=mask), mha(query, query.clone(), query.clone(), mask=mask))


@pytest.mark.parametrize("q_shape, k_shape, v_shape", [((5, 8), (7, 8), (7, 3)), ((2, 5, 8), (2, 7, 8), (2, 7, 8)),
                                                       ((2, 3, 4, 6), (2, 3, 9, 6), (2, 3, 9, 5))])
@pytest.mark.parametrize("masked", [False, True])
def test_sdpa_matches_torch_function(q_shape, k_shape, v_shape, masked):
    torch.manual_seed(7)
    q, k, v = torch.randn(q_shape), torch.randn(k_shape), torch.randn(v_shape)
    mask = None
    if masked:
        mask = torch.rand(q_shape[-2], k_shape[-2]) > 0.5
        mask[:, 0] = True
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    if masked:
        assert (weights[..., ~mask] == 0).all()
    torch.testing.assert_close(fused_attention(q, k, v, mask), out)


def test_gradcheck_scaled_dot_product_attention():
    torch.manual_seed(8)
    q = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.rand(2, 3, 5) > 0.4
    mask[0, 1] = False                      # one query with no allowed key: zeros, and zero gradient
    assert torch.autograd.gradcheck(lambda *t: scaled_dot_product_attention(*t)[0], (q, k, v))
    assert torch.autograd.gradcheck(lambda *t: scaled_dot_product_attention(*t, mask)[0], (q, k, v))
    assert torch.autograd.gradcheck(lambda *t: fused_attention(*t, mask), (q, k, v))


@pytest.mark.parametrize("need_weights", [False, True])
def test_gradcheck_multihead_attention(need_weights):
    torch.manual_seed(9)
    mha = MultiHeadAttention(8, 2).double().eval()
    query = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    key = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    value = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, False, False], [True, True, True, True]])[:, None, None, :]   # (B, 1, 1, Tk)

    def f(q, k, v):
        return call(mha, q, k, v, mask, need_weights)

    assert torch.autograd.gradcheck(f, (query, key, value))
    assert torch.autograd.gradcheck(lambda x: call(mha, x, x, x, None, need_weights), (query,))
    f(query, key, value).sum().backward()
    for name, p in mha.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("need_weights", [False, True])
def test_fully_masked_rows_give_zeros(dtype, need_weights):
    torch.manual_seed(10)
    B, T, D, H = 2, 5, 16, 4
    mha = MultiHeadAttention(D, H).to(dtype).eval()
    x = torch.randn(B, T, D, dtype=dtype)
    mask = torch.ones(B, 1, T, T, dtype=torch.bool).tril()
    mask[0, :, :, 0] = False                 # batch 0: query 0 may attend to nothing
    q, k, v = mha.project_qkv(x, x, x)
    explicit, weights = scaled_dot_product_attention(q, k, v, mask)
    fused = fused_attention(q, k, v, mask)
    for heads in (explicit, fused):
        assert not heads.isnan().any()
        assert (heads[0, :, 0] == 0).all()
    assert (weights[0, :, 0] == 0).all()
    out = call(mha, x, x, x, mask, need_weights)
    assert out.dtype == dtype and not out.isnan().any()
    torch.testing.assert_close(out[0, 0], mha.out_proj.bias)   # zero heads: only W^O's bias is left


@pytest.mark.parametrize("need_weights", [False, True])
def test_fully_masked_rows_have_finite_gradients(need_weights):
    torch.manual_seed(11)
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(1, 3, 8, requires_grad=True)
    mask = torch.tensor([[False, False, False], [True, False, False], [True, True, False]])
    call(mha, x, x, x, mask, need_weights).sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())


def test_eval_is_deterministic_and_dropout_acts_only_in_training():
    torch.manual_seed(12)
    x = torch.randn(2, 6, 16)
    mha = MultiHeadAttention(16, 4, dropout=0.3)
    mha.eval()
    for need_weights in (False, True):
        a, b = call(mha, x, x, x, None, need_weights), call(mha, x, x, x, None, need_weights)
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    evaluated = mha(x, x, x)
    mha.train()
    assert not torch.allclose(mha(x, x, x), mha(x, x, x))
    assert not torch.allclose(mha.forward_with_weights(x, x, x)[0], evaluated)
    plain = MultiHeadAttention(16, 4, dropout=0.0)
    plain.load_state_dict(mha.state_dict())
    plain.train()
    torch.testing.assert_close(plain(x, x, x), evaluated)   # without dropout, training mode changes nothing


def test_split_and_merge_heads():
    torch.manual_seed(13)
    x = torch.randn(3, 5, 12)
    heads = split_heads(x, 4)
    assert heads.shape == (3, 4, 5, 3)
    torch.testing.assert_close(heads[:, 1], x[..., 3:6])   # head 1 = features 3..5
    torch.testing.assert_close(merge_heads(heads), x)


def test_parameter_count():
    for D, H in [(512, 8), (64, 1), (96, 12)]:
        assert sum(p.numel() for p in MultiHeadAttention(D, H).parameters()) == 4 * D * D + 4 * D


def test_to_torch_attn_mask_inverts_and_stacks():
    mask = torch.tensor([True, True, False])[None, None, None, :].expand(2, 1, 1, 3)   # (B, 1, 1, Tk)
    converted = to_torch_attn_mask(mask, (2, 3, 4, 3))
    assert converted.shape == (6, 4, 3) and converted.dtype == torch.bool
    assert (converted == torch.tensor([False, False, True])).all()


def test_copy_from_torch_mha_refuses_mismatches():
    with pytest.raises(ValueError, match="embed_dim, num_heads"):
        copy_from_torch_mha(MultiHeadAttention(16, 4), nn.MultiheadAttention(16, 2))
    with pytest.raises(ValueError, match="in_proj_weight"):
        copy_from_torch_mha(MultiHeadAttention(16, 4), nn.MultiheadAttention(16, 4, kdim=8, vdim=8))
    with pytest.raises(ValueError, match="add_bias_kv"):
        copy_from_torch_mha(MultiHeadAttention(16, 4), nn.MultiheadAttention(16, 4, add_bias_kv=True))


B, T, S, D, H = 2, 5, 7, 16, 4
MHA = MultiHeadAttention(D, H)
X, MEM = torch.randn(B, T, D), torch.randn(B, S, D)
BAD_INPUTS = [
    ("d_model not divisible", lambda: MultiHeadAttention(10, 3), ValueError, "d_model .* n_heads"),
    ("zero heads", lambda: MultiHeadAttention(8, 0), ValueError, "n_heads"),
    ("dropout out of range", lambda: MultiHeadAttention(8, 2, dropout=1.0), ValueError, "dropout"),
    # the same rules, and words, as TransformerConfig's (validate's checks)
    ("d_model a float", lambda: MultiHeadAttention(8.0, 2), ValueError,
     r"^d_model must be a positive int, got 8\.0$"),
    ("heads a bool", lambda: MultiHeadAttention(8, True), ValueError,
     "^n_heads must be a positive int, got True$"),
    ("dropout below 0", lambda: MultiHeadAttention(8, 2, dropout=-0.1), ValueError,
     r"^dropout must be a number in \[0\.0, 1\.0\), got -0\.1$"),
    ("query rank", lambda: MHA(X[0], MEM, MEM), ValueError, "query"),
    ("query width", lambda: MHA(X[..., :8], MEM, MEM), ValueError, "query"),
    ("key width", lambda: MHA(X, MEM[..., :8], MEM), ValueError, "key"),
    ("value rank", lambda: MHA(X, MEM, MEM[None]), ValueError, "value"),
    ("key/value length", lambda: MHA(X, MEM, MEM[:, :4]), ValueError, "key and value"),
    ("batch sizes", lambda: MHA(X, MEM[:1], MEM[:1]), ValueError, "batch size"),
    ("query not a tensor", lambda: MHA(X.tolist(), MEM, MEM), TypeError, "query"),
    ("float mask", lambda: MHA(X, MEM, MEM, mask=torch.ones(T, S)), TypeError, "mask"),
    ("int mask", lambda: MHA(X, MEM, MEM, mask=torch.ones(B, 1, 1, S, dtype=torch.long)), TypeError, "mask"),
    ("(B, S) mask", lambda: MHA(X, MEM, MEM, mask=torch.ones(B, S, dtype=torch.bool)), ValueError, "mask.*padding_mask"),
    ("3-D mask", lambda: MHA(X, MEM, MEM, mask=torch.ones(B, T, S, dtype=torch.bool)), ValueError, "mask"),
    ("wrong Tk", lambda: MHA(X, MEM, MEM, mask=torch.ones(T, S + 1, dtype=torch.bool)), ValueError, "mask"),
    ("wrong head count", lambda: MHA(X, MEM, MEM, mask=torch.ones(B, 3, T, S, dtype=torch.bool)), ValueError, "mask"),
    ("wrong mask on the explicit path", lambda: MHA.forward_with_weights(X, MEM, MEM, mask=torch.ones(B, S, dtype=torch.bool)),
     ValueError, "mask"),
    ("sdpa q/k widths", lambda: scaled_dot_product_attention(X, MEM[..., :8], MEM), ValueError, "q and k"),
    ("sdpa k/v lengths", lambda: scaled_dot_product_attention(X, MEM, MEM[:, :3]), ValueError, "k and v"),
    ("sdpa float mask", lambda: attention_weights(X, MEM, torch.zeros(T, S)), TypeError, "mask"),
]


@pytest.mark.parametrize("what, fn, exc, match", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_raises_naming_the_argument(what, fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
