"""Benchmark: cached against uncached greedy decoding, tokens per second.

Run: .venv/bin/python benchmarks/bench_decode.py [--device cpu|cuda] [--dtype float32|bfloat16] [--threads N]

The model is random (vocabulary 8000, D=256, H=4, 3+3 layers, F=1024) and the source has S=32
tokens; eos_id is None, so every run writes exactly n tokens. For n = 32, 64, 128, 256, 512 new
tokens at batch 1 and batch 32 the script times `greedy_decode` (cached) and
`greedy_decode_uncached` in alternation, so that a slow spell of the machine hits both, and
writes tokens/s and their ratio to transformer_lit/results/decode_<device>.json. Goal: cached >= 8x
faster at 256 new tokens, batch 1, on a CPU.

The uncached loop costs O(n^2) positions. Runs it would take longer than --uncached-budget seconds
(estimated from the previous length, x4.5 per doubling) are skipped and recorded as null, with
the cap in the JSON: on a busy 2-core CPU this skips batch 32 beyond 128 tokens, which would take
about 4 and 16 minutes. The whole run then takes about five minutes.

On CUDA the script also decodes with the static cache (every step attends over all slots, masked)
with one decoding step captured as a CUDA graph and replayed (decode_step, and FastDecoder's
fast_step), and reports the per-token latency at batch 1 next to its floor: the bytes one step must read (decoder weights, output matrix, the
cache) divided by the device's memory bandwidth, measured here with a large device-to-device copy.
There, cuDNN's attention kernel is switched off unless --cudnn-attention is given: it builds a new
plan whenever the key length changes (every step of both loops), which cost milliseconds of CPU
per call on the H100 we measured and made the timings erratic. Run it there with --threads 1.
"""
from __future__ import annotations

import argparse
import os
import statistics

import torch

from _common import device_name, disable_cudnn_attention, timed, write_result
from transformer_lit.fast_decoding import fast_decoder
from transformer_lit.inference import GenerationConfig, _Route, greedy_decode
from transformer_lit.model import Transformer, TransformerConfig, greedy_decode_uncached

LENGTHS = (32, 64, 128, 256, 512)
BATCHES = (1, 32)
SRC_LEN, BOS = 32, 1
GOAL = {"batch": 1, "new_tokens": 256, "min_speedup": 8.0}   # issue 15 (it was 5x)
MODELS = {   # TransformerConfig arguments
    "bench": dict(src_vocab_size=8000, tgt_vocab_size=8000, d_model=256, n_heads=4, n_layers=3, d_ff=1024),
    "base": dict(src_vocab_size=37000, tgt_vocab_size=37000, share_embeddings=True),   # Table 3, D=512, 6+6
}


def measure(fns: dict, device: torch.device, budget: float, max_rounds: int = 5,
            min_rounds: int = 1) -> tuple[dict[str, float], int]:
    "Median seconds per call and the number of rounds; the functions alternate, rounds repeat within budget."
    times = {name: [timed(fn, device)[1]] for name, fn in fns.items()}
    per_round = sum(t[0] for t in times.values())
    for _ in range(max(min_rounds, min(max_rounds, int(budget / max(per_round, 1e-9)))) - 1):
        for name, fn in fns.items():
            times[name].append(timed(fn, device)[1])
    return {name: statistics.median(t) for name, t in times.items()}, len(next(iter(times.values())))


def static_greedy(model: Transformer, src: torch.Tensor, n: int, fast: bool = False):
    """Greedy decoding (eos_id=None) as a step that only reads and writes device tensors: graph-capturable.
    The cache, the step and the token buffer are generate's static route (chapter 16); only the pick and
    the write go by the device position, so that one replayed graph serves every step.
    fast: FastDecoder's step (packed weights, fewer kernels) instead of decode_step."""
    config = GenerationConfig(n, BOS, None, static_cache=True, decoder=fast_decoder if fast else None)
    route = _Route(model, src, config)
    tokens, cache = route.tokens, route.cache   # (B, 1 + n), bos first; the static KVCache

    def step() -> None:   # no Python number changes per step, so a replay can repeat it
        current = tokens.index_select(1, cache.position.view(1))          # (B, 1), the token at slot t
        next_id = route.step(current, cache).argmax(-1)                   # (B,); position -> t + 1
        tokens.index_copy_(1, cache.position.view(1), next_id[:, None])   # column t + 1

    def rewind() -> None:
        cache.position.zero_()
        cache.length = 0

    return step, rewind, tokens, cache


@torch.no_grad()
def graphed_greedy(model: Transformer, src: torch.Tensor, n: int, fast: bool = False):
    "static_greedy with its step captured once as a CUDA graph; returns run() -> tokens (B, 1 + n), and the cache."
    step, rewind, tokens, cache = static_greedy(model, src, n, fast)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):   # warm-up outside the graph (lazy initialisation, workspaces)
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    rewind()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()                       # recorded, not run: the device position stays 0
    rewind()                         # capture ran the Python side once (length += 1)

    def run() -> torch.Tensor:
        cache.position.zero_()
        for _ in range(n):
            graph.replay()           # each replay writes one slot and advances the device position
        return tokens

    return run, cache


def bandwidth(device: torch.device, gib: float = 1.0) -> float:
    "Bytes per second of a device-to-device copy (each byte read once and written once)."
    x = torch.empty(int(gib * 2**30), dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    y.copy_(x)
    seconds = statistics.median(timed(lambda: y.copy_(x), device)[1] for _ in range(10))
    return 2 * x.nbytes / seconds


def cuda_latency(model: Transformer, device: torch.device, dtype: torch.dtype,
                 lengths=LENGTHS, budget: float = 20.0) -> dict:
    """Per-token latency at batch 1 for each n in lengths: eager cached steps vs one replayed CUDA graph per
    step, and the floor; each timed in alternation, 3 to 10 rounds within budget seconds."""
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, model.config.src_vocab_size, (1, SRC_LEN), generator=g).to(device)
    bw, out = bandwidth(device), {}
    weights = sum(p.nbytes for p in model.decoder.parameters()) + model.tgt_embed.weight.nbytes
    for n in lengths:
        run, cache = graphed_greedy(model, src, n)
        run_fast, _ = graphed_greedy(model, src, n, fast=True)   # FastDecoder's step, graphed the same way
        eager = greedy_decode(model, src, n, BOS)
        same = torch.equal(run(), eager)   # argmax near-ties may differ in bf16
        same_fast = torch.equal(run_fast(), eager)
        seconds, _ = measure({"eager": lambda: greedy_decode(model, src, n, BOS), "graph": run,
                              "graph_fast": run_fast}, device, budget, 10, 3)
        cache_read = cache.nbytes()["cross"] + cache.nbytes()["self"]   # the static step reads every slot
        out[n] = {"eager_ms_per_token": 1e3 * seconds["eager"] / n, "graph_ms_per_token": 1e3 * seconds["graph"] / n,
                  "graph_fast_ms_per_token": 1e3 * seconds["graph_fast"] / n,
                  "bytes_per_step": weights + cache_read, "floor_ms_per_token": 1e3 * (weights + cache_read) / bw,
                  "graph_tokens_equal_eager": same, "graph_fast_tokens_equal_eager": same_fast}
    return {"bandwidth_gb_per_s": bw / 1e9, "weights_bytes": weights, "per_length": out}


def report_latency(payload: dict) -> None:
    for n, r in payload["cuda_batch1_latency"]["per_length"].items():
        print(f"  batch 1, n = {n:3d}: eager {r['eager_ms_per_token']:.3f} ms/token, "
              f"CUDA graph {r['graph_ms_per_token']:.3f} ms/token (fast step {r['graph_fast_ms_per_token']:.3f}), "
              f"floor {r['floor_ms_per_token']:.4f} ms/token")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--uncached-budget", type=float, default=75.0, help="skip uncached runs estimated longer (s)")
    parser.add_argument("--repeat-budget", type=float, default=12.0,
                        help="repeat a measurement (up to 5 rounds) while the rounds fit in this many seconds")
    parser.add_argument("--cudnn-attention", action="store_true", help="leave cuDNN's attention kernel enabled (CUDA)")
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--model", choices=sorted(MODELS), default="bench",
                        help="bench: the benchmark model; base: the paper's base model (vocab 37000), for the "
                             "CUDA latency only (writes decode_base_cuda.json)")
    args = parser.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda given, but torch.cuda.is_available() is False")
    torch.set_num_threads(args.threads)
    if not args.cudnn_attention:
        disable_cudnn_attention(device)   # every step of both loops has a new key length

    if args.model == "base" and device.type != "cuda":
        raise SystemExit("--model base measures the CUDA graph latency only: give --device cuda")
    config = TransformerConfig(**MODELS[args.model], max_len=1024)
    torch.manual_seed(0)
    model = Transformer(config).to(device=device, dtype=dtype).eval()
    if args.model == "base":
        payload = {"what": "per-token latency at batch 1 of the paper's base model (random weights): eager cached "
                           "greedy_decode vs the static cache's step replayed as a CUDA graph, and the floor",
                   "device_type": device.type, "dtype": args.dtype, "threads": torch.get_num_threads(),
                   "cudnn_attention": args.cudnn_attention, "model": MODELS[args.model], "src_len": SRC_LEN,
                   "cuda_batch1_latency": cuda_latency(model, device, dtype, args.lengths,
                                                           args.repeat_budget)}
        report_latency(payload)
        print(f"wrote {write_result('decode_base', device, payload)}")
        return
    g = torch.Generator().manual_seed(0)
    check_src = torch.randint(3, 8000, (2, SRC_LEN), generator=g).to(device)
    if dtype == torch.float32:   # the two loops agree before anything is timed
        assert torch.equal(greedy_decode(model, check_src, 32, BOS), greedy_decode_uncached(model, check_src, 32, BOS))
    greedy_decode(model, check_src, 8, BOS); greedy_decode_uncached(model, check_src, 8, BOS)   # warm-up

    load_before, rows, caps = os.getloadavg(), [], {}
    print(f"device: {device_name(device)}, torch {torch.__version__}, {args.dtype}, load average {load_before[0]:.1f}")
    for batch in BATCHES:
        src = torch.randint(3, 8000, (batch, SRC_LEN), generator=g).to(device)
        estimate = 0.0   # seconds the next uncached run would take: x4.5 per doubling of n
        for n in args.lengths:
            fns = {"cached": lambda: greedy_decode(model, src, n, BOS)}
            if estimate <= args.uncached_budget:
                fns["uncached"] = lambda: greedy_decode_uncached(model, src, n, BOS)
            else:   # and every longer n too: the estimate only grows
                caps.setdefault(str(batch), max(r["new_tokens"] for r in rows if r["batch"] == batch))
            is_goal = (batch, n) == (GOAL["batch"], GOAL["new_tokens"])   # the goal's point: 3 rounds at least
            s, repeats = measure(fns, device, args.repeat_budget, min_rounds=3 if is_goal else 1)
            estimate = 4.5 * s["uncached"] if "uncached" in s else estimate
            row = {"batch": batch, "new_tokens": n, "repeats": repeats, "cached_seconds": s["cached"],
                   "uncached_seconds": s.get("uncached"),
                   "cached_tokens_per_s": batch * n / s["cached"],
                   "uncached_tokens_per_s": batch * n / s["uncached"] if "uncached" in s else None,
                   "speedup": s["uncached"] / s["cached"] if "uncached" in s else None}
            rows.append(row)
            slow = f"{row['uncached_tokens_per_s']:9.0f}" if row["speedup"] else "  skipped"
            ratio = f"{row['speedup']:6.1f}x" if row["speedup"] else "      -"
            print(f"  batch {batch:2d}, n = {n:3d}: cached {row['cached_tokens_per_s']:9.0f} tok/s, "
                  f"uncached {slow} tok/s {ratio}", flush=True)

    goal_row = next((r for r in rows if r["batch"] == GOAL["batch"] and r["new_tokens"] == GOAL["new_tokens"]), None)
    met = None if goal_row is None or goal_row["speedup"] is None else goal_row["speedup"] >= GOAL["min_speedup"]
    payload = {
        "what": "greedy decoding, transformer_lit.inference.greedy_decode (KV cache) vs "
                "transformer_lit.model.greedy_decode_uncached, random weights, eos_id=None (fixed length)",
        "device_type": device.type, "dtype": args.dtype, "threads": torch.get_num_threads(),
        "cudnn_attention": device.type == "cuda" and args.cudnn_attention,
        "model": MODELS[args.model], "src_len": SRC_LEN,
        "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]},
        "uncached_skipped_beyond": caps,
        "uncached_budget_seconds": args.uncached_budget,
        "results": rows,
        "goal": {**GOAL, "met": met},
    }
    if device.type == "cuda":
        payload["cuda_batch1_latency"] = cuda_latency(model, device, dtype, args.lengths, args.repeat_budget)
        report_latency(payload)
    if met is not None:
        print(f"goal: cached >= {GOAL['min_speedup']}x at batch 1, 256 tokens: {'met' if met else 'MISSED'}")
    print(f"wrote {write_result('decode', device, payload)}")


if __name__ == "__main__":
    main()
