"""Analysis (chapter 20), inside the model: attention_maps records every head's weights of the
three kinds, equal to what the attention modules compute themselves; head_statistics measures a
head on weights whose answers are known (an even spread, a diagonal, a shifted diagonal)."""
from __future__ import annotations

import math

import pytest
import torch

from transformer_lit.analysis import ATTENTION_KINDS, attention_maps, head_statistics
from transformer_lit.masking import padding_mask
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.validate import ArgumentError


@pytest.fixture
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(TransformerConfig.tiny(n_layers=3)).eval()


@pytest.fixture
def batch() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    src = torch.randint(3, 50, (2, 7))
    src[1, 5:] = 0  # the second source has 2 padding positions
    return src, torch.randint(3, 60, (2, 5))


def test_attention_maps_shapes_and_rows(model, batch):
    src, tgt = batch
    maps = attention_maps(model, src, tgt)
    L, H, (B, S), T = 3, 4, src.shape, tgt.shape[1]
    assert tuple(maps) == ATTENTION_KINDS
    assert maps["encoder"].shape == (L, B, H, S, S)
    assert maps["decoder"].shape == (L, B, H, T, T)
    assert maps["cross"].shape == (L, B, H, T, S)
    for w in maps.values():
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    # padding keys get nothing; the decoder never looks ahead
    assert (maps["encoder"][:, 1, :, :, 5:] == 0).all()
    assert (maps["cross"][:, 1, :, :, 5:] == 0).all()
    ahead = torch.ones(T, T, dtype=torch.bool).triu(1)
    assert (maps["decoder"][..., ahead] == 0).all()


def test_attention_maps_equal_the_modules_own_weights(model, batch):
    "The first encoder layer (post-norm) reads the embedded source itself."
    src, tgt = batch
    maps = attention_maps(model, src, tgt)
    with torch.no_grad():
        x = model.pos(model.src_embed(src) * math.sqrt(model.config.d_model))
        _, theirs = model.encoder.layers[0].self_attn.forward_with_weights(
            x, x, x, mask=padding_mask(src, model.config.pad_id))
    torch.testing.assert_close(maps["encoder"][0], theirs)


def test_attention_maps_remove_their_hooks_and_refuse_training_mode(model, batch):
    src, tgt = batch
    attention_maps(model, src, tgt)
    assert not any(m._forward_hooks for m in model.modules())
    with pytest.raises(ArgumentError, match="model.eval"):
        attention_maps(model.train(), src, tgt)


def test_head_statistics_of_an_even_spread():
    n = 6
    stats = head_statistics(torch.full((2, 3, n, n), 1 / n))  # (L, H, Tq, Tk)
    assert stats["entropy"].shape == (2, 3)
    torch.testing.assert_close(stats["entropy"], torch.full((2, 3), math.log(n)))
    for name in ("diagonal", "previous", "next", "first", "last"):
        torch.testing.assert_close(stats[name], torch.full((2, 3), 1 / n))


def test_head_statistics_of_diagonals():
    ones = head_statistics(torch.eye(5))
    assert ones["diagonal"] == 1 and ones["entropy"] == 0
    assert ones["previous"] == ones["next"] == 0
    assert ones["first"] == ones["last"] == 1 / 5
    back = head_statistics(torch.eye(5).roll(-1, dims=1))  # row i reads key i - 1
    assert back["previous"] == 1 and back["diagonal"] == 0
    ahead = head_statistics(torch.eye(5).roll(1, dims=1))  # row i reads key i + 1
    assert ahead["next"] == 1 and ahead["previous"] == 0
    # 3 queries over 5 keys: the diagonal is the same place in the sentence, keys 0, 2, 4
    assert head_statistics(torch.eye(5)[[0, 2, 4]])["diagonal"] == 1


def test_head_statistics_same_counts_only_marked_rows():
    weights = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.25, 0.75]])  # (Tq, Tk) = (2, 3)
    same = torch.tensor([[False, False, False], [False, False, True]])  # row 1 only
    stats = head_statistics(weights, same)
    assert stats["same"] == 0.75
    with pytest.raises(ArgumentError, match="same must be"):
        head_statistics(weights, same.T)
    with pytest.raises(ArgumentError, match="weights must be"):
        head_statistics(torch.ones(3))
