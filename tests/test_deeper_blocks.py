"""The building blocks' checks and the bridge to nn.MultiheadAttention (page 37): they
live in deeper_blocks, and the old import paths (attention, and the modules that call
them) give the same objects."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_lit import attention, deeper_blocks, norms, positional
from transformer_lit.validate import ArgumentError, ArgumentTypeError


@pytest.mark.parametrize("name", ["check_mask", "check_qkv", "copy_from_torch_mha",
                                  "to_torch_attn_mask"])
def test_attention_passes_on_the_moved_names(name):
    assert getattr(attention, name) is getattr(deeper_blocks, name)
    assert name in attention.__all__ and name in deeper_blocks.__all__


def test_the_modules_call_the_shared_checks():
    assert norms.check_last_dim is deeper_blocks.check_last_dim
    assert norms.check_same_shape is deeper_blocks.check_same_shape
    assert positional.check_positions is deeper_blocks.check_positions


def test_check_positions():
    x = torch.zeros(2, 5, 8)
    assert deeper_blocks.check_positions(x, 8, 10, 3) == 3
    with pytest.raises(ArgumentError, match="max_len >= 11"):
        deeper_blocks.check_positions(x, 8, 10, 6)
    with pytest.raises(ArgumentError, match="d_model=8"):
        deeper_blocks.check_positions(torch.zeros(5, 8), 8, 10, 0)


def test_check_last_dim_and_same_shape():
    x = torch.zeros(2, 3, 8)
    deeper_blocks.check_last_dim(x, 8)
    with pytest.raises(ArgumentTypeError):
        deeper_blocks.check_last_dim([1.0], 8)
    with pytest.raises(ArgumentError, match="d_model = 4"):
        deeper_blocks.check_last_dim(x, 4)
    assert deeper_blocks.check_same_shape(x + 1, x).shape == x.shape
    with pytest.raises(ArgumentError, match="sublayer must return"):
        deeper_blocks.check_same_shape(x[..., :1], x)


def test_check_mask_refuses_a_flat_padding_mask():
    with pytest.raises(ArgumentTypeError):
        deeper_blocks.check_mask(torch.ones(2, 2), (1, 1, 2, 2))
    with pytest.raises(ArgumentError, match=r"\(B, 1, 1, S\)"):
        deeper_blocks.check_mask(torch.ones(2, 7, dtype=torch.bool), (2, 4, 3, 7))


def test_the_bridge_copies_theirs_into_ours():
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    ours = attention.MultiHeadAttention(16, 4)
    deeper_blocks.copy_from_torch_mha(ours, theirs)
    x = torch.randn(2, 5, 16)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    attn_mask = deeper_blocks.to_torch_attn_mask(mask, (2, 4, 5, 5))  # True = blocked
    expected, _ = theirs(x, x, x, attn_mask=attn_mask)
    torch.testing.assert_close(ours.eval()(x, x, x, mask=mask), expected)
