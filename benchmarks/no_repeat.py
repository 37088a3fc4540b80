"""A cheap remedy for loops, measured (chapter 20, "How it fails"): greedy decoding that may not
write a subword n-gram it has already written (the `no_repeat_ngram_size` of common toolkits).

An experiment on the package's decoding: chapter 16's translate with one logits processor,
inference.no_repeat_ngram(n), which masks the tokens that would repeat an n-gram (its test holds
it to the hand-written loop this script had before). n is chosen on the validation
books (BLEU with both references); the test books are then scored once with that n, greedy, next
to plain greedy decoding, with the loop counter of chapter 20 (against Louis Segond alone).

Usage: python benchmarks/no_repeat.py      Writes transformer_lit/results/no_repeat_cpu.json.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from transformer_lit.corpus import load_verses
from transformer_lit.data import reference_set, split_by_book
from transformer_lit.analysis import repeated_ngrams
from transformer_lit.inference import no_repeat_ngram, translate
from transformer_lit.pretrained import PRETRAINED_SHA256, load_pretrained
from transformer_lit.scoring import corpus_scores
from transformer_lit.machine import describe_device

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "transformer_lit" / "results" / "no_repeat_cpu.json"
SIZES = (2, 3, 4, 6)


def run(model, tokenizer, sources, refs, n: int | None) -> dict:
    t = time.perf_counter()
    processors = () if n is None else (no_repeat_ngram(n),)
    hyps = translate(model, tokenizer, sources, processors=processors)
    lsg = refs["l"]
    loops = sum(bool(repeated_ngrams(h, [r])) for h, r in zip(hyps, lsg)) / len(hyps)
    return {**corpus_scores(hyps, refs), "loop": loops, "seconds": time.perf_counter() - t,
            "hypotheses": hyps}


def main() -> None:
    torch.set_num_threads(1)
    model, tokenizer = load_pretrained()
    splits = split_by_book(load_verses())
    v_src, v_refs = reference_set(splits["valid"])
    valid = {}
    for n in (None, *SIZES):
        name = "greedy" if n is None else f"greedy, no repeated {n}-gram"
        valid[name] = run(model, tokenizer, v_src, v_refs, n)
        r = valid[name]
        print(f"valid {name}: BLEU {r['bleu']:.2f} (LSG {r['bleu_single']:.2f}) chrF "
              f"{r['chrf']:.2f} loops {r['loop']:.1%} ({r['seconds']:.0f} s)", flush=True)
    # the processor with n larger than any output forbids nothing: chapter 16's greedy decoding
    few = {c: r[:64] for c, r in v_refs.items()}
    plain = run(model, tokenizer, v_src[:64], few, 10**6)["hypotheses"]
    same = plain == valid["greedy"]["hypotheses"][:64]
    best = max(SIZES, key=lambda n: valid[f"greedy, no repeated {n}-gram"]["bleu"])
    t_src, t_refs = reference_set(splits["test"])
    test = {name: run(model, tokenizer, t_src, t_refs, n)
            for name, n in (("greedy", None), (f"greedy, no repeated {best}-gram", best))}
    for name, r in test.items():
        print(f"test {name}: BLEU {r['bleu']:.2f} (LSG {r['bleu_single']:.2f}) chrF "
              f"{r['chrf']:.2f} loops {r['loop']:.1%}", flush=True)
    strip = lambda d: {k: {x: y for x, y in v.items() if x != "hypotheses"} for k, v in d.items()}
    DEST.write_text(json.dumps({
        "model_sha256": PRETRAINED_SHA256, "device": describe_device(torch.device("cpu")),
        "chosen_n": best, "plain_loop_equals_chapter_16": same,
        "valid": strip(valid), "test": strip(test)}, indent=1) + "\n")
    print(f"wrote {DEST}")


if __name__ == "__main__":
    main()
