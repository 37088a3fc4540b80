"""Benchmark: model FLOPs utilisation (MFU) of a training step of the base preset on a GPU.

Run: python benchmarks/bench_mfu.py [--device cuda] [--repeats 20] [--smoke]

A training step is what `transformer-lit train --preset base` runs: forward, label-smoothed
cross-entropy, backward, gradient clipping and one fused Adam step, under the device's autocast
(bf16 from compute capability 8.0). The batches hold no padding (every position is a real
token), so every counted operation is useful work. Three ways of taking the step, timed in
alternation after a warm-up (which also compiles):

- plain: chapter 13's train_step (logits at every position);
- fast step: chapter 25's fast_train_step (the projection of the target rows only, the
  closed-form loss gradient), the command line's default;
- compiled: train_step with torch.compile(model) as the forward, as `--compile` does;

at the recipe's batch (max_tokens target positions) and, plain only, at four times that.

The work of a step is counted, not estimated: torch.utils.flop_counter.FlopCounterMode counts the
floating-point operations of the matrix products and attention of one plain step (forward and
backward). MFU = those operations per second / the device's dense bf16 peak. The peak is given
two ways: the vendor's datasheet figure where the device is known (DATASHEET_BF16, cited there),
and a large bf16 matrix product measured in the same run (what the chip delivers here). The
result is written to transformer_lit/results/mfu_<device>.json; --smoke runs the tiny preset on
the CPU, writes nothing, and only checks that the script runs. Goal (GPU.md): MFU >= 35%.
"""
from __future__ import annotations

import argparse
import statistics

import torch
from torch.utils.flop_counter import FlopCounterMode

from _common import device_name, disable_cudnn_attention, interleaved_medians, timed, write_result
from transformer_lit.data import Batch
from transformer_lit.fast import fast_train_step
from transformer_lit.model import Transformer
from transformer_lit.machine import autocast_dtype, make_scaler
from transformer_lit.recipe import preset_config, preset_settings
from transformer_lit.training import StepOptions, make_optimizer, train_step

GOAL = 0.35
# dense bf16 tensor-core peak, FLOP/s, without sparsity: NVIDIA's H100 datasheet (SXM5: 989.4
# TFLOPS; the H200 datasheet gives the same figure) and A100 datasheet (312 TFLOPS)
DATASHEET_BF16 = {"H100 80GB HBM3": 989.4e12, "H200": 989.4e12, "A100": 312e12}
LENGTH = 48   # tokens per row, source and target: about a verse in 8000 BPE pieces


def datasheet_peak(name: str) -> float | None:
    "The datasheet's dense bf16 peak for a device name that contains a known key, else None."
    return next((peak for key, peak in DATASHEET_BF16.items() if key in name), None)


def matmul_rate(device: torch.device, n: int, dtype: torch.dtype) -> float:
    "FLOP/s of an n x n x n matrix product in dtype: the median of 10 after 3 warm-ups."
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):
        a @ b
    seconds = statistics.median(timed(lambda: a @ b, device)[1] for _ in range(10))
    return 2 * n**3 / seconds


def random_batch(rows: int, length: int, vocab: int, device: torch.device, seed: int) -> Batch:
    "A batch of random tokens with no padding: every position counts."
    g = torch.Generator().manual_seed(seed)
    src, tgt = (torch.randint(3, vocab, (rows, length), generator=g) for _ in range(2))
    tgt_in = torch.cat([torch.ones(rows, 1, dtype=torch.long), tgt[:, :-1]], 1)   # BOS + target
    return Batch(src, tgt_in, tgt, torch.arange(rows)).to(device)


def counted_flops(model: Transformer, batch: Batch, settings, optimizer) -> int:
    "Floating-point operations of one plain training step, as FlopCounterMode counts them."
    with FlopCounterMode(display=False) as counter:
        train_step(model, batch, optimizer, 0.0, settings)
    return counter.get_total_flops()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                        choices=["cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-compile", action="store_true", help="leave out the compiled step")
    parser.add_argument("--smoke", action="store_true", help="tiny preset on the CPU; writes nothing")
    args = parser.parse_args()
    device = torch.device("cpu" if args.smoke else args.device)
    preset = "tiny" if args.smoke else "base"
    disable_cudnn_attention(device)
    torch.manual_seed(0)
    settings = preset_settings(preset, max_steps=1)
    config = preset_config(preset, 8000 if preset == "base" else 4000)
    model = Transformer(config).to(device).train()
    optimizer = make_optimizer(model, settings)
    scaler = make_scaler(device, settings)
    rows = settings.max_tokens // LENGTH
    batches = {1: random_batch(rows, LENGTH, config.tgt_vocab_size, device, 0),
               4: random_batch(4 * rows, LENGTH, config.tgt_vocab_size, device, 1)}
    flops = {k: counted_flops(model, b, settings, optimizer) for k, b in batches.items()}
    compiled = None if args.no_compile or args.smoke else torch.compile(model)

    scaled, through = StepOptions(scaler=scaler), StepOptions(compiled, scaler)
    steps = {
        "plain": lambda: train_step(model, batches[1], optimizer, 1e-4, settings, scaled),
        "fast step": lambda: fast_train_step(model, batches[1], optimizer, 1e-4, settings, scaled),
        "plain, 4x batch": lambda: train_step(model, batches[4], optimizer, 1e-4, settings, scaled),
    }
    if compiled is not None:
        steps["compiled"] = lambda: train_step(model, batches[1], optimizer, 1e-4, settings, through)
    errors = {}
    for key in list(steps):   # a step that fails here (say, no kernel for this device) is reported, not timed
        try:
            steps[key]()
        except Exception as e:   # noqa: BLE001
            errors[key] = f"{type(e).__name__}: {e}"[:500]
            print(f"{key:>16}: FAILED, {errors[key]}", flush=True)
            del steps[key]
    seconds = interleaved_medians(steps, device, repeats=2 if args.smoke else args.repeats,
                                  warmup=1 if args.smoke else 5)

    dtype = autocast_dtype(device) or torch.float32
    name = device_name(device)
    measured = matmul_rate(device, 512 if args.smoke else 8192, dtype)
    sheet = datasheet_peak(name) if device.type == "cuda" else None
    out = {}
    for key, s in seconds.items():
        work = flops[4 if "4x" in key else 1]
        target_tokens = batches[4 if "4x" in key else 1].tgt_out.numel()
        out[key] = {"seconds_per_step": s, "flops_per_step": work, "target_tokens_per_step": target_tokens,
                    "target_tokens_per_second": target_tokens / s, "flop_per_second": work / s,
                    "mfu_datasheet": work / s / sheet if sheet else None,
                    "fraction_of_measured_matmul": work / s / measured}
        mfu = f"{100 * out[key]['mfu_datasheet']:.1f}%" if sheet else "n/a"
        print(f"{key:>16}: {1e3 * s:7.1f} ms/step, {target_tokens / s:9,.0f} target tokens/s, "
              f"{work / s / 1e12:6.1f} TFLOP/s, MFU {mfu} of the datasheet, "
              f"{100 * work / s / measured:.1f}% of the measured product", flush=True)
    parameters = sum(p.numel() for p in model.parameters())
    best = max((r["mfu_datasheet"] or 0.0) for r in out.values())
    print(f"{name}: matrix product {measured / 1e12:.0f} TFLOP/s measured"
          + (f", datasheet {sheet / 1e12:.1f}" if sheet else "")
          + (f"; best MFU {100 * best:.1f}%, goal {100 * GOAL:.0f}%: {'met' if best >= GOAL else 'MISSED'}"
             if sheet else ""))
    if args.smoke:
        return
    payload = {"what": "MFU of a training step of the base preset (no padding, autocast), "
                       "FLOPs counted by torch.utils.flop_counter",
               "device_type": device.type, "dtype": str(dtype).removeprefix("torch."),
               "preset": preset, "parameters": parameters, "length": LENGTH, "rows": rows,
               "measured_matmul_flop_per_second": measured, "datasheet_bf16_flop_per_second": sheet,
               "steps": out, "errors": errors, "goal": {"mfu": GOAL, "met": best >= GOAL if sheet else None}}
    print(f"wrote {write_result('mfu', device, payload)}")


if __name__ == "__main__":
    main()
