"""benchmarks/bench_mfu.py on the CPU: the work it counts for a training step is forward plus
backward (three times the forward's products, as PyTorch's own counter counts them), it grows
with the batch, and the datasheet lookup knows the GPUs it names. No speed is asserted here."""
from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from transformer_lit.model import Transformer
from transformer_lit.recipe import preset_config, preset_settings
from transformer_lit.training import make_optimizer

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))   # the benchmarks import each other as top-level modules
try:
    import bench_mfu
finally:
    sys.path.remove(str(BENCHMARKS))


def test_a_step_counts_forward_and_backward():
    torch.manual_seed(0)
    settings = preset_settings("tiny", max_steps=1)
    model = Transformer(preset_config("tiny", 500)).train()
    optimizer = make_optimizer(model, settings)
    batch = bench_mfu.random_batch(4, 12, 500, torch.device("cpu"), seed=0)
    with FlopCounterMode(display=False) as forward:
        model(batch.src, batch.tgt_in)
    step = bench_mfu.counted_flops(model, batch, settings, optimizer)
    assert step == 3 * forward.get_total_flops()
    double = bench_mfu.random_batch(8, 12, 500, torch.device("cpu"), seed=1)
    assert bench_mfu.counted_flops(model, double, settings, optimizer) == 2 * step


def test_datasheet_peak():
    assert bench_mfu.datasheet_peak("NVIDIA H100 80GB HBM3") == 989.4e12
    assert bench_mfu.datasheet_peak("NVIDIA H200") == 989.4e12
    assert bench_mfu.datasheet_peak("Tesla T4") is None
