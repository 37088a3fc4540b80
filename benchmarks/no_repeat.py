"""A cheap remedy for loops, measured (chapter 17, "How it fails"): greedy decoding that may not
write a subword n-gram it has already written (the `no_repeat_ngram_size` of common toolkits).

An experiment, not the package's decoding: the loop below is chapter 16's cached greedy loop
with one mask added, and it plugs into inference.decode_in_batches. n is chosen on the validation
books (BLEU with both references); the test books are then scored once with that n, greedy, next
to plain greedy decoding, with the loop counter of chapter 17 (against Louis Segond alone).

Usage: python benchmarks/no_repeat.py      Writes transformer_lit/results/no_repeat_cpu.json.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from transformer_lit.corpus import load_verses
from transformer_lit.data import BOS_ID, EOS_ID, reference_set, split_by_book
from transformer_lit.analysis import repeated_ngrams
from transformer_lit.inference import decode_in_batches, decode_step, new_cache, translate
from transformer_lit.pretrained import PRETRAINED_SHA256, load_pretrained
from transformer_lit.scoring import corpus_scores
from transformer_lit.checkpoints import describe_device

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "transformer_lit" / "results" / "no_repeat_cpu.json"
SIZES = (2, 3, 4, 6)


@torch.no_grad()
def greedy_no_repeat(model, src, max_new_tokens: int, n: int):
    """Cached greedy decoding of src (B, S) that never writes an n-gram of pieces twice in a
    row of the output: (B, 1 + steps), BOS first, padded after EOS."""
    memory = model.encode(src)
    B, pad = src.shape[0], model.config.pad_id
    out = torch.full((B, 1 + max_new_tokens), pad, dtype=torch.long)
    out[:, 0] = BOS_ID
    cache = new_cache(model, memory, src, max(max_new_tokens, 1))
    done = torch.zeros(B, dtype=torch.bool)
    rows = [[BOS_ID] for _ in range(B)]
    seen: list[dict[tuple[int, ...], set[int]]] = [{} for _ in range(B)]
    for t in range(max_new_tokens):
        logits = decode_step(model, out[:, t : t + 1], cache)  # (B, V)
        for b in range(B):
            for banned in seen[b].get(tuple(rows[b][len(rows[b]) - n + 1 :]), ()):
                logits[b, banned] = float("-inf")
        next_id = logits.argmax(-1)
        out[:, t + 1] = next_id.masked_fill(done, pad)
        for b in range(B):
            if not done[b] and len(rows[b]) >= n - 1:
                key = tuple(rows[b][len(rows[b]) - n + 1 :])
                seen[b].setdefault(key, set()).add(int(next_id[b]))
            rows[b].append(int(next_id[b]))
        done |= next_id == EOS_ID
        if done.all():
            return out[:, : t + 2]
    return out


def run(model, tokenizer, sources, refs, n: int | None) -> dict:
    t = time.perf_counter()
    if n is None:
        hyps = translate(model, tokenizer, sources)
    else:
        hyps = decode_in_batches(model, tokenizer, sources,
                                 lambda src, limits: greedy_no_repeat(model, src, int(limits.max()), n)).texts
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
    # the plain loop of this script (n larger than any output) is chapter 16's greedy loop
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
        "chosen_n": best, "plain_loop_equals_chapter_10": same,
        "valid": strip(valid), "test": strip(test)}, indent=1) + "\n")
    print(f"wrote {DEST}")


if __name__ == "__main__":
    main()
