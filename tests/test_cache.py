"""The KV cache's contract (chapter 15, issue 47): the attention computes its queries, keys
and values in every mode and the cache only stores and hands them back; no module but
attention.py calls a projection of the attention; a mask given with a cache is combined
with the cache's own or refused, never dropped."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from transformer_lit.attention import MultiHeadAttention, split_heads
from transformer_lit.cache import CrossSlot, KVCache, SelfSlot
from transformer_lit.masking import causal_mask, padding_mask
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.validate import ArgumentError

PACKAGE = Path(__file__).resolve().parents[1] / "transformer_lit"
B, H, S, D, L = 2, 4, 5, 16, 3


def empty_cache(max_len: int = 6, static: bool = False) -> KVCache:
    g = torch.Generator().manual_seed(0)
    cross = torch.randn(L, B, H, S, D // H, generator=g)
    return KVCache(cross, cross + 1, None, max_len, static)


def test_update_writes_the_slot_and_hands_back_the_filled_prefix():
    cache = empty_cache()
    k, v = torch.randn(B, H, 1, D // H), torch.randn(B, H, 1, D // H)
    keys, values, mask = cache.update(1, k, v)
    assert mask is None and keys.shape == (B, H, 1, D // H)
    assert torch.equal(keys, k) and torch.equal(values, v)
    cache.advance()
    keys, values, _ = cache.update(1, 2 * k, 2 * v)
    assert torch.equal(keys, torch.cat([k, 2 * k], dim=2))
    assert torch.equal(cache.self_k[1, :, :, :2], keys)
    assert not cache.self_k[0].any()   # another layer's slots untouched


def test_the_static_mode_hands_back_every_slot_and_a_mask_of_the_filled_ones():
    cache = empty_cache(max_len=4, static=True)
    k = torch.randn(B, H, 1, D // H)
    cache.update(0, k, k)
    cache.advance()
    keys, _, mask = cache.update(0, k, k)
    assert keys.shape == (B, H, 4, D // H)
    assert mask.tolist() == [[[[True, True, False, False]]]]


def test_the_cache_refuses_what_it_cannot_store():
    cache = empty_cache(max_len=1)
    with pytest.raises(ArgumentError, match="one new position"):
        cache.update(0, torch.randn(B, H, 2, D // H), torch.randn(B, H, 2, D // H))
    k = torch.randn(B, H, 1, D // H)
    cache.update(0, k, k)
    cache.advance()
    with pytest.raises(ArgumentError, match="full"):
        cache.update(0, k, k)
    with pytest.raises(ArgumentError, match="cross_k and cross_v"):
        KVCache(torch.zeros(L, B, H, S, 4), torch.zeros(L, B, H, S, 5), None, 4)
    with pytest.raises(ArgumentError, match="static"):
        KVCache(torch.zeros(L, B, H, S, 4), torch.zeros(L, B, H, S, 4), None, 4, static=1)


def test_the_cross_slot_keeps_what_the_attention_computed_and_can_take_new_ones():
    torch.manual_seed(1)
    model = Transformer(TransformerConfig.tiny()).eval()
    memory = torch.randn(B, S, 32)
    cache = KVCache.for_decoder(model.decoder, memory, None, 4)
    for i, layer in enumerate(model.decoder.layers):
        expected = layer.cross_attn.keys_values(memory, memory)
        stored = cache[i].cross_attn.stored()
        assert all(torch.equal(a, b) for a, b in zip(stored, expected))
        assert cache[i].self_attn.stored() is None
    slot = CrossSlot(cache, 0)
    k = torch.randn_like(cache.cross_k[0])
    keys, values, mask = slot.update(k, -k)
    assert mask is None and torch.equal(slot.stored()[0], k) and torch.equal(slot.stored()[1], -k)


def test_the_attention_computes_its_keys_and_values_and_the_cache_only_stores_them():
    "A cached self-attention step writes the attention's own projection of the new position."
    torch.manual_seed(2)
    attn = MultiHeadAttention(D, H).eval()
    x = torch.randn(B, 3, D)
    cache = KVCache(torch.zeros(1, B, H, S, D // H), torch.zeros(1, B, H, S, D // H), None, 3)
    with torch.no_grad():
        outs = []
        for t in range(3):
            outs.append(attn(x[:, t:t + 1], x[:, t:t + 1], x[:, t:t + 1], cache=SelfSlot(cache, 0)))
            cache.advance()
        # each position's projection on its own: a matrix product over three rows may
        # round differently from three products over one (it does on some processors)
        steps = [attn.keys_values(x[:, t:t + 1], x[:, t:t + 1]) for t in range(3)]
        k, v = (torch.cat(parts, dim=-2) for parts in zip(*steps))
        full = attn(x, x, x, mask=causal_mask(3))
    assert torch.equal(cache.self_k[0], k) and torch.equal(cache.self_v[0], v)
    torch.testing.assert_close(torch.cat(outs, dim=1), full)


def test_a_stored_slot_skips_the_key_and_value_projections():
    torch.manual_seed(3)
    attn = MultiHeadAttention(D, H).eval()
    memory, x = torch.randn(B, S, D), torch.randn(B, 1, D)
    calls = []
    hooks = [p.register_forward_hook(lambda *_: calls.append(1)) for p in (attn.k_proj, attn.v_proj)]
    slot = KVCache(*[torch.stack([t]) for t in attn.keys_values(memory, memory)], None, 2)[0]
    calls.clear()
    with torch.no_grad():
        out = attn(x, None, None, cache=slot.cross_attn)   # the memory is not read
        expected = attn(x, memory, memory)
    for h in hooks:
        h.remove()
    assert len(calls) == 2   # the expected output's two projections, none for the cached call
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("static", [False, True])
def test_a_mask_given_with_a_cache_is_combined_not_dropped(static):
    torch.manual_seed(4)
    attn = MultiHeadAttention(D, H).eval()
    x = torch.randn(B, 4, D)
    blocked = causal_mask(4) & (torch.arange(4) != 1)   # key 1 blocked for every query
    with torch.no_grad():
        full = attn(x, x, x, mask=blocked)
        cache = KVCache(torch.zeros(1, B, H, S, D // H), torch.zeros(1, B, H, S, D // H), None, 4, static)
        outs = []
        for t in range(4):
            row = blocked[t:t + 1, : 4 if static else t + 1]
            outs.append(attn(x[:, t:t + 1], x[:, t:t + 1], x[:, t:t + 1], row, SelfSlot(cache, 0)))
            cache.advance()
    torch.testing.assert_close(torch.cat(outs, dim=1), full)
    unmasked = attn(x, x, x, mask=causal_mask(4))
    assert not torch.allclose(full[:, 2:], unmasked[:, 2:])   # the mask mattered


def test_a_mask_that_does_not_fit_the_cached_keys_is_refused():
    attn = MultiHeadAttention(D, H).eval()
    x = torch.randn(B, 1, D)
    cache = KVCache(torch.zeros(1, B, H, S, D // H), torch.zeros(1, B, H, S, D // H), None, 4)
    with pytest.raises(ArgumentError, match="does not broadcast"):
        attn(x, x, x, torch.ones(1, 3, dtype=torch.bool), SelfSlot(cache, 0))


def test_the_decoder_refuses_a_cache_of_another_depth():
    model = Transformer(TransformerConfig.tiny()).eval()
    src = torch.randint(3, 50, (B, S))
    cache = KVCache.for_decoder(model.decoder, model.encode(src), padding_mask(src, 0), 4)
    with pytest.raises(ArgumentError, match="layers"):
        model.decoder(torch.randn(B, 1, 32), None, cache=list(cache)[:1])


def test_no_module_but_attention_calls_a_projection_of_the_attention():
    "The cache, the decoder and inference hand tensors around; only attention.py projects."
    call = re.compile(r"\.(?:q|k|v|out)_proj\(")
    offenders = [p.name for p in PACKAGE.rglob("*.py")
                 if p.name != "attention.py" and call.search(p.read_text())]
    assert offenders == []


def test_a_layer_outside_the_cache_is_refused():
    "Issue 61: KVCache.update(layer=-1, ...) wrote the last layer's slot."
    from transformer_lit.model import Transformer, TransformerConfig
    from transformer_lit.inference import new_cache
    from transformer_lit.validate import ArgumentError

    model = Transformer(TransformerConfig.tiny()).eval()
    src = torch.randint(4, 50, (1, 3))
    cache = new_cache(model, model.encode(src), src, max_len=4)
    k = torch.zeros(1, 4, 1, 8)
    for layer in (-1, 2):
        with pytest.raises(ArgumentError, match=r"layer must be in \[0, 2\)"):
            cache.update(layer, k, k)


def test_a_memory_that_does_not_match_its_source_is_refused():
    """Issue 61: new_cache with a memory of 2 rows and a source of 1 row applied the one
    row's padding to both."""
    from transformer_lit.model import Transformer, TransformerConfig
    from transformer_lit.inference import new_cache
    from transformer_lit.validate import ArgumentError

    model = Transformer(TransformerConfig.tiny()).eval()
    src = torch.tensor([[5, 6, 0]])
    memory = model.encode(torch.randint(4, 50, (2, 3)))
    with pytest.raises(ArgumentError, match=r"memory \(B, S, D\) = \(2, 3, 32\) does not"):
        new_cache(model, memory, src, max_len=4)
