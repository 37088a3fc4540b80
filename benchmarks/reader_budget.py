"""Choose the reader's live run of chapter 13 by measurement on the validation books: train the
plain step on a CPU for a budget of steps, and score greedy translations of the short
held-out verses (WEB -> Louis Segond, chrF and BLEU) at several points of the budget.

    python benchmarks/reader_budget.py --max-words 20 --pairings web-lsg --steps 600 1200 2400
    python benchmarks/reader_budget.py --max-words 20 --pairings all --train-max-words 20

Writes transformer_lit/results/reader_budget_<device>.json (one entry per configuration, the
curve of steps -> minutes -> chrF). Only the validation books are scored here: the test books
are scored once, by chapter 13, with the settings chosen from this file.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _common import RESULTS, cpu_details, device_name  # noqa: E402

from transformer_lit.corpus import ENGLISH, FRENCH, load_verses, version_pairs  # noqa: E402
from transformer_lit.data import encode_pairs, split_by_book, train_tokenizer  # noqa: E402
from transformer_lit.inference import translate  # noqa: E402
from transformer_lit.model import Transformer  # noqa: E402
from transformer_lit.recipe import preset_config, preset_settings  # noqa: E402
from transformer_lit.scoring import corpus_scores  # noqa: E402
from transformer_lit.training import TrainState, fit, make_optimizer  # noqa: E402


def short(verses, max_words: int | None):
    "The verses whose WEB text has at most max_words words (all of them for None)."
    return [v for v in verses if max_words is None or len(v.texts.get(ENGLISH, "").split())
            <= max_words]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-words", type=int, default=20, help="scored verses: WEB words")
    p.add_argument("--train-max-words", type=int, default=None,
                   help="train only on verses this short (default: every verse)")
    p.add_argument("--pairings", choices=("web-lsg", "all"), default="web-lsg")
    p.add_argument("--vocab-size", type=int, default=4000)
    p.add_argument("--preset", default="cpu")
    p.add_argument("--steps", type=int, nargs="+", default=[600, 1200, 1800, 2400])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--lr-factor", type=float, default=None)
    p.add_argument("--name", default=None)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    verses = split_by_book(load_verses())
    english, french = ((ENGLISH,), (FRENCH,)) if args.pairings == "web-lsg" else (
        ("4", "k", "3"), ("l", "5"))
    train_pairs = version_pairs(short(verses["train"], args.train_max_words), english, french)
    valid_pairs = version_pairs(verses["valid"], (ENGLISH,), (FRENCH,))
    scored = version_pairs(short(verses["valid"], args.max_words), (ENGLISH,), (FRENCH,))
    tokenizer = train_tokenizer([x.en for x in train_pairs] + [x.fr for x in train_pairs],
                                vocab_size=args.vocab_size)
    train, _ = encode_pairs(train_pairs, tokenizer, max_len=256)
    valid, _ = encode_pairs(valid_pairs, tokenizer, max_len=256)
    config = preset_config(args.preset, tokenizer.vocab_size)
    overrides = {k: v for k, v in (("warmup", args.warmup), ("max_tokens", args.max_tokens),
                                   ("lr_factor", args.lr_factor)) if v is not None}
    settings = preset_settings(args.preset, max_steps=args.steps[0], **overrides)
    torch.manual_seed(0)
    random.seed(0)
    model = Transformer(config)
    optimizer = make_optimizer(model, settings)
    state, curve = TrainState(), []
    sources, refs = [x.en for x in scored], [x.fr for x in scored]
    curve.append({"steps": 0, "minutes": 0.0,
                  **corpus_scores(sources, {FRENCH: refs}), "what": "copy the source"})
    for steps in args.steps:
        state = fit(model, optimizer, train, valid, replace(settings, max_steps=steps),
                    state, progress=False, log=None, finish=False)
        model.eval()
        start = time.perf_counter()
        hyps = translate(model, tokenizer, sources)
        scores = corpus_scores(hyps, {FRENCH: refs})
        curve.append({"steps": state.step, "minutes": state.seconds / 60,
                      "translate_seconds": time.perf_counter() - start,
                      "valid_nll": state.valid_log[-1][1] if state.valid_log else None,
                      **scores, "examples": list(zip(sources[:5], hyps[:5]))})
        print(json.dumps({k: v for k, v in curve[-1].items() if k != "examples"}),
              flush=True)
    name = args.name or (f"{args.preset}-{args.pairings}-train{args.train_max_words}-"
                         f"vocab{args.vocab_size}")
    path = RESULTS / "reader_budget_cpu.json"
    record = json.loads(path.read_text()) if path.exists() else {}
    record[name] = {"device": device_name(torch.device("cpu")), "cpu": cpu_details(),
                    "threads": args.threads, "load": list(__import__("os").getloadavg()),
                    "scored_verses": len(scored), "max_words": args.max_words,
                    "train_pairs": len(train), "vocab": tokenizer.vocab_size,
                    "settings": {"preset": args.preset, **overrides}, "curve": curve}
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
