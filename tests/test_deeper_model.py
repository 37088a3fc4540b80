"""transformer_lit.model_support (page 38): the model's size and field checks, and the
copying of PyTorch's layers by renaming their state dicts."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_lit.decoder import DecoderLayer
from transformer_lit.encoder import EncoderLayer
from transformer_lit.model_support import (DECODER_PARTS, ENCODER_PARTS, check_fields, check_layer_sizes,
                                           check_memory, check_per_layer, copy_from_torch_encoder_layer,
                                           renamed_state)
from transformer_lit.validate import ArgumentError, ArgumentTypeError


def test_renamed_state_splits_in_proj_and_names_every_part_ours():
    theirs = nn.TransformerDecoderLayer(16, 4, 32, batch_first=True)
    state = renamed_state(theirs, DECODER_PARTS)
    assert set(state) == set(DecoderLayer(16, 4, 32).state_dict())
    q, k, v = theirs.self_attn.in_proj_weight.chunk(3)
    assert torch.equal(state["self_attn.k_proj.weight"], k)
    assert torch.equal(state["cross_attn.v_proj.bias"], theirs.multihead_attn.in_proj_bias.chunk(3)[2])
    assert set(renamed_state(nn.TransformerEncoderLayer(16, 4, 32), ENCODER_PARTS)) == set(
        EncoderLayer(16, 4, 32).state_dict())


def test_the_copy_is_strict():
    "A PyTorch layer with a weight we have no place for is refused, not half copied."
    theirs = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    theirs.self_attn.bias_k = nn.Parameter(torch.zeros(1, 1, 16))
    with pytest.raises(RuntimeError, match="bias_k"):
        copy_from_torch_encoder_layer(EncoderLayer(16, 4, 32), theirs)


def test_size_and_field_checks_name_what_is_wrong():
    with pytest.raises(ArgumentError, match="^n_layers"):
        check_layer_sizes(0, d_model=8)
    with pytest.raises(ArgumentError, match="^d_ff"):
        check_layer_sizes(d_model=8, d_ff=-1)
    check_per_layer("cache", None, 3)
    with pytest.raises(ArgumentError, match="^cache has slots for 2 layers, the decoder has 3$"):
        check_per_layer("cache", [(None, None)] * 2, 3)
    with pytest.raises(ArgumentTypeError, match="^a config must be a dict, got list$"):
        check_fields("config", [], ["a"], ())
    with pytest.raises(ArgumentError, match="^config has no a$"):
        check_fields("config", {}, ["a"], ("a",))
    with pytest.raises(ArgumentError, match="memory"):
        check_memory(torch.zeros(2, 5, 8), torch.zeros(2, 4, dtype=torch.long))
