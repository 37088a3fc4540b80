"""Choose the reader's live run of chapter 19 by measurement on the validation books: train a
preset for a budget of steps, and score greedy translations of held-out verses (WEB -> Louis
Segond, chrF and BLEU) at several points of the budget, on a CPU or a CUDA GPU.

    python benchmarks/reader_budget.py --max-words 20 --pairings web-lsg --steps 600 1200 2400
    python benchmarks/reader_budget.py --device cuda --preset small --pairings all \
        --max-tokens 12288 --warmup 400 --max-words 0 --steps 1000 2000 3000

Writes transformer_lit/results/reader_budget_<device type>.json (one entry per
configuration, the curve of steps -> minutes -> chrF, written after every point, so a run cut
short keeps what it measured). Only the validation books are scored here: the test books are
scored once, by chapter 19, with the settings chosen from this file.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _common import RESULTS, cpu_details, device_name  # noqa: E402

from transformer_lit.corpus import (  # noqa: E402
    ENGLISH,
    ENGLISH_VERSIONS,
    FRENCH,
    FRENCH_VERSIONS,
    load_verses,
    version_pairs,
)
from transformer_lit.data import encode_pairs, split_by_book, train_tokenizer  # noqa: E402
from transformer_lit.inference import translate  # noqa: E402
from transformer_lit.model import Transformer  # noqa: E402
from transformer_lit.recipe import preset_config, preset_settings  # noqa: E402
from transformer_lit.scoring import corpus_scores  # noqa: E402
from transformer_lit.training import FitOptions, TrainState, fit, make_optimizer  # noqa: E402


def short(verses, max_words: int | None):
    "The verses whose WEB text has at most max_words words (all of them for None or 0)."
    return [v for v in verses if not max_words or len(v.texts.get(ENGLISH, "").split())
            <= max_words]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-words", type=int, default=20,
                   help="scored verses: WEB words (0: every validation verse)")
    p.add_argument("--train-max-words", type=int, default=None,
                   help="train only on verses this short (default: every verse)")
    p.add_argument("--pairings", choices=("web-lsg", "all"), default="web-lsg")
    p.add_argument("--vocab-size", type=int, default=4000)
    p.add_argument("--preset", default="cpu")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dropout", type=float, default=None)
    p.add_argument("--d-model", type=int, default=None, help="the preset's, unless given")
    p.add_argument("--layers", type=int, default=None, help="encoder and decoder layers")
    p.add_argument("--d-ff", type=int, default=None)
    p.add_argument("--label-smoothing", type=float, default=None)
    p.add_argument("--no-amp", action="store_true",
                   help="float32 on a GPU too (a CPU run's numbers, by steps)")
    p.add_argument("--steps", type=int, nargs="+", default=[600, 1200, 1800, 2400])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--lr-factor", type=float, default=None)
    p.add_argument("--name", default=None)
    p.add_argument("--out", type=Path, default=None,
                   help="results file (default: results/reader_budget_<device type>.json)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    verses = split_by_book(load_verses())
    english, french = ((ENGLISH,), (FRENCH,)) if args.pairings == "web-lsg" else (
        ENGLISH_VERSIONS, FRENCH_VERSIONS)
    train_pairs = version_pairs(short(verses["train"], args.train_max_words), english, french)
    valid_pairs = version_pairs(verses["valid"], (ENGLISH,), (FRENCH,))
    scored = version_pairs(short(verses["valid"], args.max_words), (ENGLISH,), (FRENCH,))
    texts = list(dict.fromkeys([x.en for x in train_pairs] + [x.fr for x in train_pairs]))
    tokenizer = train_tokenizer(texts, vocab_size=args.vocab_size)
    train, _ = encode_pairs(train_pairs, tokenizer, max_len=256)
    valid, _ = encode_pairs(valid_pairs, tokenizer, max_len=256)
    config = preset_config(args.preset, tokenizer.vocab_size)
    shape = {k: v for k, v in (("dropout", args.dropout), ("d_model", args.d_model),
                               ("n_layers", args.layers), ("d_ff", args.d_ff))
             if v is not None}
    config = replace(config, **shape)
    overrides = {k: v for k, v in (("warmup", args.warmup), ("max_tokens", args.max_tokens),
                                   ("lr_factor", args.lr_factor),
                                   ("label_smoothing", args.label_smoothing))
                 if v is not None}
    if args.no_amp:
        overrides["amp"] = False
    settings = preset_settings(args.preset, max_steps=args.steps[0], **overrides)
    torch.manual_seed(0)
    random.seed(0)
    model = Transformer(config).to(device)
    optimizer = make_optimizer(model, settings)
    state, curve = TrainState(), []
    sources, refs = [x.en for x in scored], [x.fr for x in scored]
    curve.append({"steps": 0, "minutes": 0.0,
                  **corpus_scores(sources, {FRENCH: refs}), "what": "copy the source"})
    name = args.name or (f"{args.preset}-{args.pairings}-train{args.train_max_words}-"
                         f"vocab{args.vocab_size}")
    path = args.out or RESULTS / f"reader_budget_{device.type}.json"
    epoch_tokens = sum(len(x.tgt) + 1 for x in train)
    for steps in args.steps:
        state = fit(model, optimizer, (train, valid), replace(settings, max_steps=steps),
                    state, FitOptions(progress=False, log=None, finish=False))
        model.eval()
        start = time.perf_counter()
        hyps = translate(model, tokenizer, sources)
        scores = corpus_scores(hyps, {FRENCH: refs})
        curve.append({"steps": state.step, "minutes": state.seconds / 60,
                      "epochs": state.tokens / epoch_tokens,
                      "tokens_per_second": state.tokens / state.train_seconds,
                      "translate_seconds": time.perf_counter() - start,
                      "valid_nll": state.valid_log[-1][1] if state.valid_log else None,
                      "train_nll": state.train_log[-1][2] if state.train_log else None,
                      **scores, "examples": list(zip(sources[:5], hyps[:5]))})
        print(name, json.dumps({k: v for k, v in curve[-1].items() if k != "examples"}),
              flush=True)
        record = json.loads(path.read_text()) if path.exists() else {}
        record[name] = {
            "device": device_name(device),
            "cpu": cpu_details(), "threads": args.threads, "load": list(os.getloadavg()),
            "scored_verses": len(scored), "max_words": args.max_words,
            "train_pairs": len(train), "vocab": tokenizer.vocab_size,
            "config": {"d_model": config.d_model, "n_layers": config.n_layers,
                       "d_ff": config.d_ff,
                       "dropout": config.dropout,
                       "parameters": sum(p.numel() for p in model.parameters())},
            "settings": {"preset": args.preset, **overrides}, "curve": curve}
        path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
