"""The ladder: from chapter 19's live run to the shipped model, one change at a time, measured
on the validation books (never the test books). Chapter 19 shows the results file.

Rungs 1-3 are trained here with the package's `fit`, on one thread, as `transformer-lit train`
builds a run (a tokenizer trained on the training books of the run's versions, the preset's
model seeded with 0, the preset's settings); rungs 4-6 are the shipped run (chapter 18), read
from the validation scores its record keeps (tools/export_pretrained.py measured them):

1. the `cpu` preset on one pairing (WEB -> Louis Segond) for chapter 19's BOOK_CPU_STEPS steps
   (the versions and budget of chapter 19's CPU run);
2. the same on every (English, French) pairing of the five versions;
3. the `small` preset, stopped at the first step where it has seen as many target tokens as 2;
4. the shipped run's budget (the `small` preset, all pairings, its steps), last weights;
5. the same with its checkpoint average (the shipped weights);
6. the same with beam search (4 beams).

Every rung is scored on all the validation verses (source WEB), greedy unless it says beam:
BLEU against Louis Segond alone, BLEU against Louis Segond and Darby, chrF against both.

Usage: python benchmarks/ladder.py [--rungs 1 2 3] [--out DIR]
Writes transformer_lit/results/ladder_cpu.json after every rung.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

import torch

from transformer_lit.corpus import ENGLISH_VERSIONS, FRENCH_VERSIONS, load_verses, version_pairs
from transformer_lit.data import encode_pairs, make_batches, reference_set, split_by_book, train_tokenizer
from transformer_lit.inference import translate
from transformer_lit.model import Transformer
from transformer_lit.pretrained import load_pretrained, pretrained_record
from transformer_lit.scoring import corpus_scores
from transformer_lit.recipe import (
    BOOK_CPU_STEPS,
    preset_config,
    preset_settings,
    preset_vocab_size,
)
from transformer_lit.checkpoints import (
    average_state_dicts,
    describe_device,
    save_checkpoint,
)
from transformer_lit.training import FitOptions, fit, make_optimizer

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "transformer_lit" / "results" / "ladder_cpu.json"
NAMES = {
    1: "cpu preset, WEB -> LSG, chapter 19's CPU run",
    2: "cpu preset, every pairing, same steps",
    3: "small preset, every pairing, same target tokens",
    4: "small preset, the shipped run's budget, last weights",
    5: "+ checkpoint averaging (the shipped weights)",
    6: "+ beam search (4 beams)",
}


def build(preset: str, english, french, splits):
    """Tokenizer, encoded training and validation pairs of a run, as the CLI builds them."""
    codes = (*english, *french)
    texts = [v.texts[c] for v in splits["train"] for c in codes if c in v.texts]
    tokenizer = train_tokenizer(texts, vocab_size=preset_vocab_size(preset))
    train, _ = encode_pairs(version_pairs(splits["train"], english, french), tokenizer, 256)
    valid, _ = encode_pairs(version_pairs(splits["valid"], english[:1], french), tokenizer, 256)
    return tokenizer, train, valid


def steps_for_tokens(train, max_tokens: int, seed: int, budget: int) -> tuple[int, int]:
    """The first step at which fit's batch order has given `budget` target tokens, and the
    tokens seen by then (fit's order: make_batches with seed + epoch, epoch after epoch)."""
    tokens, step, epoch = 0, 0, 0
    while True:
        for batch in make_batches(train, max_tokens, seed + epoch):
            step += 1
            tokens += int((batch.tgt_out != 0).sum())
            if tokens >= budget:
                return step, tokens
        epoch += 1


def score(model, tokenizer, sources, references, beam: int = 1) -> dict:
    hyps = translate(model.eval(), tokenizer, sources, beam_size=beam)
    return corpus_scores(hyps, references)


def train_rung(n: int, preset: str, english, french, splits, out: Path, max_steps: int,
               sources, references, max_minutes: float | None = None,
               eval_every: int | None = None) -> dict:
    load0 = os.getloadavg()
    tokenizer, train, valid = build(preset, english, french, splits)
    config = preset_config(preset, tokenizer.vocab_size)
    settings = preset_settings(preset, max_steps=max_steps, max_minutes=max_minutes,
                               **({"eval_every": eval_every} if eval_every else {}))
    torch.manual_seed(0)
    random.seed(0)
    model = Transformer(config)
    t = time.perf_counter()
    state = fit(model, make_optimizer(model, settings), (train, valid), settings,
                options=FitOptions(progress=False, log=lambda s: print(f"rung {n}: {s}", flush=True)))
    train_minutes = (time.perf_counter() - t) / 60
    averaged = Transformer(config)
    averaged.load_state_dict(average_state_dicts([w for _, w in state.snapshots]))
    out.mkdir(parents=True, exist_ok=True)
    save_checkpoint(out / "model.pt", averaged, tokenizer=tokenizer.to_bytes(),
                    record={"preset": preset, "steps": state.step})
    t = time.perf_counter()
    last = score(model, tokenizer, sources, references)
    avg = score(averaged, tokenizer, sources, references)
    return {
        "name": NAMES[n], "preset": preset, "english": list(english), "french": list(french),
        "training_pairs": len(train), "steps": state.step, "target_tokens": state.tokens,
        "wall_minutes": train_minutes, "score_minutes": (time.perf_counter() - t) / 60,
        "device": describe_device(torch.device("cpu")), "load_average": [load0, os.getloadavg()],
        "decoding": "greedy", "weights": "last", "valid": last, "valid_averaged": avg,
        "valid_log": state.valid_log, "settings": {"max_tokens": settings.max_tokens,
                                                   "warmup": settings.warmup,
                                                   "max_steps": max_steps,
                                                   "max_minutes": max_minutes},
    }


def shipped_rungs(splits) -> dict:
    """Rungs 4-6 from the shipped model's record: its validation scores, its budget, and the
    target tokens its batch order gave over its steps (replayed with its own tokenizer)."""
    record = pretrained_record()
    _, tokenizer = load_pretrained()
    english, french = record["corpus"]["english"], record["corpus"]["french"]
    train, _ = encode_pairs(version_pairs(splits["train"], english, french), tokenizer, 256)
    settings = record["settings"]
    steps = record["steps"]
    tokens = replay_tokens(train, settings["max_tokens"], settings["seed"], steps)
    valid = record["valid_decoding"]
    last = next(k for k in valid if k.startswith("last weights"))
    common = {"preset": record["preset"], "english": english, "french": french,
              "training_pairs": len(train), "steps": steps, "target_tokens": tokens,
              "target_tokens_note": "replayed: the shipped run's batch order over today's corpus",
              "wall_minutes": record["minutes"], "device": record["device"],
              "load_average": None, "valid_log": record["valid_log"],
              "source": "the shipped model's record (tools/export_pretrained.py)"}
    return {
        4: {**common, "name": NAMES[4], "decoding": "greedy", "weights": last,
            "precision": "float32", "valid": valid[last]},
        5: {**common, "name": NAMES[5], "decoding": "greedy", "weights": record["weights"],
            "precision": "float16 weights", "valid": valid["greedy"]},
        6: {**common, "name": NAMES[6], "decoding": "beam 4", "weights": record["weights"],
            "precision": "float16 weights", "valid": valid["beam 4"]},
    }


def replay_tokens(train, max_tokens: int, seed: int, steps: int) -> int:
    "Target tokens in the first `steps` batches of fit's batch order."
    tokens, step, epoch = 0, 0, 0
    while True:
        for batch in make_batches(train, max_tokens, seed + epoch):
            step += 1
            tokens += int((batch.tgt_out != 0).sum())
            if step == steps:
                return tokens
        epoch += 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rungs", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6])
    p.add_argument("--max-minutes", type=float, default=None,
                   help="a wall-time cap for rung 3 (this machine is shared; the results "
                   "record whether it stopped there)")
    p.add_argument("--out", type=Path,
                   default=Path.home() / ".cache" / "transformer_lit" / "ladder")
    args = p.parse_args()
    torch.set_num_threads(1)
    splits = split_by_book(load_verses())
    sources, references = reference_set(splits["valid"])
    result = json.loads(DEST.read_text()) if DEST.exists() else {}
    result.update({"validation_verses": len(sources), "references": list(references),
                   "book_cpu_steps": BOOK_CPU_STEPS, "threads": 1})
    rungs = {int(k): v for k, v in result.get("rungs", {}).items()}

    def save():
        result["rungs"] = {str(k): rungs[k] for k in sorted(rungs)}
        DEST.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {DEST}", flush=True)

    every = (ENGLISH_VERSIONS, FRENCH_VERSIONS)
    if 1 in args.rungs:
        rungs[1] = train_rung(1, "cpu", ("4",), ("l",), splits, args.out / "rung1",
                              BOOK_CPU_STEPS, sources, references)
        save()
    if 2 in args.rungs:
        rungs[2] = train_rung(2, "cpu", *every, splits, args.out / "rung2", BOOK_CPU_STEPS,
                              sources, references)
        save()
    if 3 in args.rungs:
        budget = rungs[2]["target_tokens"]
        _, train, _ = build("small", *every, splits)
        steps, _ = steps_for_tokens(train, preset_settings("small", max_steps=1).max_tokens,
                                    0, budget)
        # validation loss every 100 steps: the rung is short (evaluation draws no random
        # numbers, so the training is the same)
        rungs[3] = train_rung(3, "small", *every, splits, args.out / "rung3", steps,
                              sources, references, args.max_minutes, eval_every=100)
        rungs[3]["token_budget"] = budget
        rungs[3]["stopped_by_time_cap"] = rungs[3]["steps"] < steps
        save()
    if {4, 5, 6} & set(args.rungs):
        rungs.update(shipped_rungs(splits))
        save()


if __name__ == "__main__":
    main()
