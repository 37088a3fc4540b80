"""Shared helpers for the tests that compare our layers with PyTorch's (weights copied across)."""
from __future__ import annotations

import torch
from torch import nn


def randomize_(module: nn.Module) -> nn.Module:
    "PyTorch starts biases at 0 and LayerNorm at (1, 0); draw them at random so that they are really compared."
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return module


def keep_mask(B: int, L: int, seed: int) -> torch.Tensor:
    "(B, L) bool, True at real tokens: row b keeps a different number of tokens (at least 1), padding at the end."
    g = torch.Generator().manual_seed(seed)
    lengths = (L - torch.randperm(L, generator=g)[:B]).clamp(min=1) if B <= L else torch.randint(1, L + 1, (B,), generator=g)
    return torch.arange(L) < lengths[:, None]


def mha_pairs(prefix: str, ours, theirs) -> list[tuple[str, list[torch.Tensor], torch.Tensor]]:
    "(name, our parameters that make it up, their parameter) for one attention block."
    return [(f"{prefix}.in_proj_weight", [ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight], theirs.in_proj_weight),
            (f"{prefix}.in_proj_bias", [ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias], theirs.in_proj_bias),
            (f"{prefix}.out_proj.weight", [ours.out_proj.weight], theirs.out_proj.weight),
            (f"{prefix}.out_proj.bias", [ours.out_proj.bias], theirs.out_proj.bias)]


def ffn_and_norm_pairs(ours: nn.Module, theirs: nn.Module, norms: dict[str, str]) -> list:
    "Pairs for linear1/linear2 (in our ffn) and for each (our ResidualNorm attribute -> their norm) of a layer."
    pairs = [(f"{lin}.{p}", [getattr(getattr(ours.ffn, lin), p)], getattr(getattr(theirs, lin), p))
             for lin in ("linear1", "linear2") for p in ("weight", "bias")]
    pairs += [(f"{norm}.{p}", [getattr(getattr(ours, res).norm, p)], getattr(getattr(theirs, norm), p))
              for res, norm in norms.items() for p in ("weight", "bias")]
    return pairs


def assert_grads_match(pairs, ours: nn.Module) -> None:
    "Every parameter of ours is in pairs, and its gradient equals the matching part of theirs."
    covered = {id(p) for _, group, _ in pairs for p in group}
    assert covered == {id(p) for p in ours.parameters()}, "the name mapping must cover every parameter of ours"
    for name, group, theirs in pairs:
        got = torch.cat([p.grad for p in group])
        torch.testing.assert_close(got, theirs.grad, msg=lambda m: f"gradient of {name}: {m}")
