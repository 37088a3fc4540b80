"""transformer_lit.masking: the masks are what they claim, combine as the book says, and agree with PyTorch."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lit.attention import MultiHeadAttention, copy_from_torch_mha, scaled_dot_product_attention
from transformer_lit.masking import causal_mask, padding_mask

PAD = 0


def random_tokens(B: int, S: int, seed: int, left: bool = False) -> torch.Tensor:
    "Token ids (B, S) in 1..19, each row padded with PAD to a random length of at least 1."
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, 20, (B, S), generator=g)
    lengths = torch.randint(1, S + 1, (B,), generator=g)
    real = torch.arange(S) < lengths[:, None]
    if left:
        real = real.flip(-1)
    return tokens.masked_fill(~real, PAD)


@pytest.mark.parametrize("size", [1, 2, 5, 17])
def test_causal_mask_values(size):
    mask = causal_mask(size)
    assert mask.shape == (size, size) and mask.dtype == torch.bool and mask.device.type == "cpu"
    want = torch.tensor([[j <= i for j in range(size)] for i in range(size)])
    assert torch.equal(mask, want)


def test_causal_mask_device():
    assert causal_mask(3, device="cpu").device.type == "cpu"
    assert causal_mask(3, device=torch.device("cpu")).device.type == "cpu"
    assert causal_mask(3, device="meta").device.type == "meta"
    if torch.cuda.is_available():
        assert causal_mask(3, device="cuda").device.type == "cuda"


def test_causal_mask_is_the_additive_mask():
    "True -> 0, False -> -inf gives the M of `softmax(QK^T / sqrt(d_k) + M)` (nn.Transformer's version of it)."
    for size in (1, 4, 9):
        additive = torch.zeros(size, size).masked_fill(~causal_mask(size), float("-inf"))
        torch.testing.assert_close(additive, nn.Transformer.generate_square_subsequent_mask(size))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("B, S", [(1, 4), (3, 7)])
def test_padding_mask_values(B, S, dtype):
    tokens = random_tokens(B, S, seed=B * S).to(dtype)
    mask = padding_mask(tokens, PAD)
    assert mask.shape == (B, 1, 1, S) and mask.dtype == torch.bool and mask.device == tokens.device
    assert torch.equal(mask[:, 0, 0], tokens != PAD)
    other = padding_mask(tokens, 3)                         # any id can be the padding id
    assert torch.equal(other[:, 0, 0], tokens != 3)


def test_masks_combine_and_broadcast():
    B, T, H = 3, 6, 4
    tokens = random_tokens(B, T, seed=1)
    combined = padding_mask(tokens, PAD) & causal_mask(T)   # (B, 1, 1, T) & (T, T)
    assert combined.shape == (B, 1, T, T)
    assert torch.broadcast_shapes(combined.shape, (B, H, T, T)) == (B, H, T, T)
    for b in range(B):
        for i in range(T):
            for j in range(T):
                assert combined[b, 0, i, j] == (j <= i and tokens[b, j] != PAD)


@pytest.mark.parametrize("B, S, T, D, H", [(1, 6, 6, 16, 4), (3, 8, 5, 24, 3), (2, 4, 9, 32, 8)])
@pytest.mark.parametrize("need_weights", [False, True])
def test_masks_match_torch_key_padding_and_attn_mask(B, S, T, D, H, need_weights):
    "Our masks vs nn.MultiheadAttention's key_padding_mask / attn_mask, whose bool convention is True = blocked."
    torch.manual_seed(B + S + T)
    theirs = nn.MultiheadAttention(D, H, batch_first=True).eval()
    ours = copy_from_torch_mha(MultiHeadAttention(D, H), theirs).eval()
    src, tgt = random_tokens(B, S, seed=2), random_tokens(B, T, seed=3)
    x_src, x_tgt = torch.randn(B, S, D), torch.randn(B, T, D)
    src_mask, tgt_mask = padding_mask(src, PAD), padding_mask(tgt, PAD) & causal_mask(T)
    cases = [  # (query, key/value, our mask, their key_padding_mask, their attn_mask): theirs = ~ours
        (x_src, x_src, src_mask, ~src_mask[:, 0, 0], None),                                   # encoder self
        (x_tgt, x_tgt, tgt_mask, ~padding_mask(tgt, PAD)[:, 0, 0], ~causal_mask(T)),          # decoder self
        (x_tgt, x_src, src_mask, ~src_mask[:, 0, 0], None),                                   # cross
    ]
    for query, kv, mask, key_padding_mask, attn_mask in cases:
        expected, _ = theirs(query, kv, kv, key_padding_mask=key_padding_mask, attn_mask=attn_mask, need_weights=False)
        if need_weights:   # the explicit path, which also returns the weights
            got = ours.forward_with_weights(query, kv, kv, mask=mask)[0]
        else:
            got = ours(query, kv, kv, mask=mask)
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("mask_kind", ["padding", "causal", "both"])
def test_masks_mean_the_same_to_torch_sdpa(mask_kind):
    "F.scaled_dot_product_attention reads our masks with the same convention."
    torch.manual_seed(4)
    B, H, T, Dh = 2, 3, 6, 5
    q, k, v = (torch.randn(B, H, T, Dh) for _ in range(3))
    tokens = random_tokens(B, T, seed=5)
    mask = {"padding": padding_mask(tokens, PAD), "causal": causal_mask(T),
            "both": padding_mask(tokens, PAD) & causal_mask(T)}[mask_kind]
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@pytest.mark.parametrize("B, T, D, H", [(1, 5, 16, 4), (3, 8, 24, 6)])
def test_causal_pass_equals_prefix_passes(B, T, D, H):
    torch.manual_seed(T)
    layer1, layer2 = MultiHeadAttention(D, H).eval(), MultiHeadAttention(D, H).eval()

    def decoder_like(x, mask):
        h = x + layer1(x, x, x, mask=mask)
        return h + layer2(h, h, h, mask=mask)

    x = torch.randn(B, T, D)
    parallel = decoder_like(x, causal_mask(T))
    prefixes = torch.stack([decoder_like(x[:, :t + 1], causal_mask(t + 1))[:, -1] for t in range(T)], dim=1)
    torch.testing.assert_close(parallel, prefixes)
    assert not torch.allclose(decoder_like(x, None)[:, :-1], prefixes[:, :-1])


def test_extra_padding_changes_nothing_at_real_positions():
    torch.manual_seed(6)
    D, H = 16, 4
    embed, mha = nn.Embedding(20, D), MultiHeadAttention(D, H).eval()
    tokens = random_tokens(4, 6, seed=7)
    longer = torch.cat([tokens, torch.full((4, 3), PAD)], dim=1)
    real = tokens != PAD
    short_out = mha(embed(tokens), embed(tokens), embed(tokens), mask=padding_mask(tokens, PAD))
    long_out = mha(embed(longer), embed(longer), embed(longer), mask=padding_mask(longer, PAD))[:, :6]
    torch.testing.assert_close(long_out[real], short_out[real])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("need_weights", [False, True])
def test_left_padding_with_causal_mask_gives_zeros_not_nan(dtype, need_weights):
    torch.manual_seed(8)
    B, T, D, H = 4, 6, 16, 4
    tokens = random_tokens(B, T, seed=9, left=True)
    tokens[0, :3] = PAD                                     # guarantee some empty rows
    mask = padding_mask(tokens, PAD) & causal_mask(T)
    empty = ~mask.any(-1)                                   # (B, 1, T): queries with no allowed key
    assert empty.any()
    mha = MultiHeadAttention(D, H).to(dtype).eval()
    x = torch.randn(B, T, D).to(dtype)
    if need_weights:
        out, weights = mha.forward_with_weights(x, x, x, mask=mask)
        assert (weights.masked_select(empty[..., None]) == 0).all()
    else:
        out = mha(x, x, x, mask=mask)
    assert out.dtype == dtype and not out.isnan().any()
    torch.testing.assert_close(out[empty[:, 0]], mha.out_proj.bias.expand(int(empty.sum()), D))


def test_left_padding_gradients_are_finite():
    torch.manual_seed(10)
    tokens = random_tokens(3, 5, seed=11, left=True)
    tokens[0, :2] = PAD
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(3, 5, 8, requires_grad=True)
    mha(x, x, x, mask=padding_mask(tokens, PAD) & causal_mask(5)).sum().backward()
    assert torch.isfinite(x.grad).all() and all(torch.isfinite(p.grad).all() for p in mha.parameters())


BAD_INPUTS = [
    ("size zero", lambda: causal_mask(0), ValueError, "size"),
    ("size negative", lambda: causal_mask(-3), ValueError, "size"),
    ("size float", lambda: causal_mask(2.5), TypeError, "size"),
    ("size bool", lambda: causal_mask(True), TypeError, "size"),
    ("size tensor", lambda: causal_mask(torch.tensor([3, 4])), TypeError, "size"),
    ("tokens 1-D", lambda: padding_mask(torch.tensor([1, 2, 0]), PAD), ValueError, "tokens"),
    ("tokens 3-D", lambda: padding_mask(torch.ones(2, 3, 4, dtype=torch.long), PAD), ValueError, "tokens"),
    ("tokens float", lambda: padding_mask(torch.ones(2, 3), PAD), TypeError, "tokens"),
    ("tokens bool", lambda: padding_mask(torch.ones(2, 3, dtype=torch.bool), PAD), TypeError, "tokens"),
    ("tokens list", lambda: padding_mask([[1, 2, 0]], PAD), TypeError, "tokens"),
    ("pad_id float", lambda: padding_mask(torch.ones(2, 3, dtype=torch.long), 0.0), TypeError, "pad_id"),
    ("(B, S) mask in attention", lambda: MultiHeadAttention(8, 2)(torch.randn(2, 3, 8), torch.randn(2, 5, 8),
                                                                   torch.randn(2, 5, 8),
                                                                   mask=padding_mask(random_tokens(2, 5, 0), PAD)[:, 0, 0]),
     ValueError, "padding_mask"),
]


@pytest.mark.parametrize("what, fn, exc, match", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_raises_naming_the_argument(what, fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
