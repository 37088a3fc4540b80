"""Training steps on real batches (chapter 13's corpus, length-bucketed as `fit` makes them):
chapter 25's fast step with its products by oneDNN and by F.linear (MKL), and chapter 13's plain
train_step, interleaved batch by batch on the same weights.

    python benchmarks/bench_train_real.py                  # presets cpu and small, 24 batches
    python benchmarks/bench_train_real.py --batches 8 --presets cpu

Where chapter 25's bench_peers.py times one synthetic batch against other libraries, this
measures what a real run gains: target tokens per second of training steps, each way, on the
first batches of an epoch of the training books (the shipped model's tokenizer encodes them).
All sides start from the same weights and take the same batches; each batch is timed once each
way, in rotating order. `speedup_onednn` is F.linear's time over oneDNN's (both fast steps);
`speedup_fast` is the plain step's time over the fast step the command line takes (its
products as use_onednn_products chooses here, by chapter 35's rule on the processor: recorded as
`onednn_rule`, with what `speedup_onednn` measured beside it, so that a host where the two
disagree shows). Writes transformer_lit/results/train_real_cpu.json: keep another host's file as
train_real_cpu_<host>.json (git mv) before measuring here.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial

import torch

from _common import write_result
from transformer_lit import fast, machine
from transformer_lit.corpus import load_verses, version_pairs
from transformer_lit.data import make_batches, split_by_book, encode_pairs
from transformer_lit.model import Transformer
from transformer_lit.pretrained import load_pretrained
from transformer_lit.recipe import preset_config, preset_settings
from transformer_lit.training import StepOptions, make_optimizer, train_step


def time_preset(preset: str, examples, n_batches: int, vocab: int) -> dict:
    "Seconds per step on n_batches real batches: the fast step both ways, and the plain one."
    settings = preset_settings(preset, max_steps=n_batches)
    batches = [b for _, b in zip(range(n_batches + 2), make_batches(examples, settings.max_tokens, seed=0))]
    torch.manual_seed(0)
    base = Transformer(preset_config(preset, vocab)).train()
    sides = {}
    for name in ("onednn", "f_linear", "plain"):
        model = Transformer(preset_config(preset, vocab)).train()
        model.load_state_dict(base.state_dict())
        sides[name] = (model, make_optimizer(model, settings))
    seconds = {name: [] for name in sides}
    for i, batch in enumerate(batches):
        names = list(sides)
        order = names[i % 3:] + names[:i % 3]   # each side first, second and last in turn
        for name in order:
            model, optimizer = sides[name]
            start = time.perf_counter()
            if name == "plain":              # chapter 13's step: nn.Dropout, full grid
                train_step(model, batch, optimizer, 1e-4, settings)
            else:                            # the caller chooses the products
                loss = partial(fast.fast_loss, onednn=name == "onednn")   # fast_train_step's loss
                train_step(model, batch, optimizer, 1e-4, settings, StepOptions(loss=loss))
            elapsed = time.perf_counter() - start
            if i >= 2:                       # the first two batches warm up
                seconds[name].append(elapsed)
    tokens = sum(int((b.tgt_out != 0).sum()) for b in batches[2:])
    total = {name: sum(s) for name, s in seconds.items()}
    chosen = "onednn" if fast.use_onednn_products(base) else "f_linear"
    return {"preset": preset, "batches": n_batches, "max_tokens": settings.max_tokens,
            "target_tokens": tokens,
            "median_step_seconds": {k: statistics.median(v) for k, v in seconds.items()},
            "target_tokens_per_second": {k: tokens / t for k, t in total.items()},
            "speedup_onednn": total["f_linear"] / total["onednn"],
            "fast_products": chosen, "speedup_fast": total["plain"] / total[chosen]}


def rule_text(kind: str) -> str:
    "Chapter 35's rule for kind in words: where it takes oneDNN's products."
    family, capabilities = machine.ONEDNN_FASTER[kind]
    return f"oneDNN on vendor AuthenticAMD, family >= {family}, capability {' or '.join(capabilities)}"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batches", type=int, default=24)
    parser.add_argument("--presets", nargs="+", default=["cpu", "small"])
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if not fast.onednn_available():
        raise SystemExit("this PyTorch has no oneDNN: nothing to compare")
    _, tokenizer = load_pretrained()
    train = split_by_book(version_pairs(load_verses()))["train"]
    examples, _ = encode_pairs(train, tokenizer, max_len=256)
    load_before = os.getloadavg()[0]
    rows = []
    for preset in args.presets:
        rows.append(time_preset(preset, examples, args.batches, tokenizer.vocab_size))
        r = rows[-1]
        print(f"{preset}: {r['target_tokens_per_second']['onednn']:,.0f} target tokens/s by oneDNN, "
              f"{r['target_tokens_per_second']['f_linear']:,.0f} by F.linear: "
              f"{r['speedup_onednn']:.2f}x; {r['target_tokens_per_second']['plain']:,.0f} by the "
              f"plain step: the fast one ({r['fast_products']}) {r['speedup_fast']:.2f}x", flush=True)
    payload = {"what": "training steps on real batches of chapter 13's corpus: the fast step "
                       "with its products by oneDNN (OneDNNLinear) and by F.linear (MKL), and "
                       "the plain train_step, interleaved batch by batch",
               "device_type": "cpu", "threads": torch.get_num_threads(),
               "capability": torch.backends.cpu.get_cpu_capability(),
               "chosen_by_use_onednn_products": fast.use_onednn_products(Transformer(preset_config("cpu", 100))),
               "onednn_rule": {"kind": "train", "rule": rule_text("train"),
                               "onednn_faster": machine.onednn_faster("train"),
                               "measured_faster_here": [r["preset"] for r in rows if r["speedup_onednn"] > 1]},
               "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
               "presets": rows}
    print(f"wrote {write_result('train_real', torch.device('cpu'), payload)}")
    return payload


if __name__ == "__main__":
    main()
