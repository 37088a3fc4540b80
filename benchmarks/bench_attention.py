"""Benchmark: our MultiHeadAttention against torch.nn.MultiheadAttention, forward + backward.

Run: .venv/bin/python benchmarks/bench_attention.py [--device cpu|cuda] [--repeats N]

Self-attention at the paper's base sizes (B=32, T=128, D=512, H=8). Both modules hold the same
weights, see the same input and take their fused path (PyTorch's with need_weights=False, ours by
default). They are timed in alternation after a warm-up, so that a slow spell of the machine hits
both alike; the script prints the median times and their ratio and writes
transformer_lit/results/attention_<device>.json. Goal: ours / torch <= 1.05.

A third entry times ours with three separate input projections (key and value passed as other
tensor objects than query), to show what the stacked self-attention projection is worth.
"""
from __future__ import annotations

import argparse

import torch
from torch import nn

from _common import device_name, interleaved_medians, write_result
from transformer_lit.attention import MultiHeadAttention, copy_from_torch_mha

B, T, D, H = 32, 128, 512, 8
GOAL = 1.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    device = torch.device(args.device)

    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(D, H, batch_first=True).to(device)
    ours = copy_from_torch_mha(MultiHeadAttention(D, H), theirs).to(device)
    x = torch.randn(B, T, D, device=device, requires_grad=True)
    grad_out = torch.randn(B, T, D, device=device)
    torch.testing.assert_close(ours(x, x, x), theirs(x, x, x, need_weights=False)[0])   # same computation

    def step(module: nn.Module, forward) -> None:
        module.zero_grad(set_to_none=True)
        x.grad = None
        forward().backward(grad_out)

    fns = {
        "torch": lambda: step(theirs, lambda: theirs(x, x, x, need_weights=False)[0]),
        "ours": lambda: step(ours, lambda: ours(x, x, x)),
        "ours_separate_projections": lambda: step(ours, lambda: ours(x, x.view_as(x), x.view_as(x))),
    }
    seconds = interleaved_medians(fns, device, repeats=args.repeats, warmup=args.warmup)
    ratio = seconds["ours"] / seconds["torch"]

    print(f"device: {device_name(device)}, torch {torch.__version__}")
    print(f"forward + backward, self-attention, B={B} T={T} D={D} H={H}, median of {args.repeats}:")
    for name, s in seconds.items():
        print(f"  {name:<27s} {s * 1e3:8.1f} ms")
    print(f"  ratio ours / torch          {ratio:8.3f}   (goal <= {GOAL}: {'met' if ratio <= GOAL else 'MISSED'})")
    path = write_result("attention", device, {
        "what": "MultiHeadAttention vs nn.MultiheadAttention(batch_first=True), forward + backward, self-attention, "
                "fused paths (need_weights=False)",
        "shape": {"B": B, "T": T, "D": D, "H": H},
        "repeats": args.repeats, "warmup": args.warmup,
        "median_seconds": seconds,
        "ratio_ours_to_torch": ratio,
        "ratio_separate_projections_to_torch": seconds["ours_separate_projections"] / seconds["torch"],
        "goal": GOAL, "goal_met": ratio <= GOAL,
    })
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
