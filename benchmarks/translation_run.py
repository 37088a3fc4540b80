"""Train a preset with `transformer-lit train`, then score it on ALL the held-out test books.

Run: python benchmarks/translation_run.py --preset base --minutes 7 --out runs/base-gpu

This is how the GPU numbers of chapters 13 and 16 were produced (the book itself trains the small
CPU preset as it runs). After `transformer-lit train` has written model.pt (the average of the last
snapshots) and checkpoint.pt (the last weights), the script translates every test pair (Ruth,
Daniel, 1 John) with the last and the averaged weights: plain greedy decoding (chapter 09's loop,
no cache), cached greedy decoding and beam search with 4 beams (chapter 16), and scores each with
sacrebleu next to the copy-the-source baseline. It writes
transformer_lit/results/translation_<cpu|cuda>.json: the device, versions, settings, the loss logs, the
BLEU table, decoding times and a few sample translations.
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch

from _common import disable_cudnn_attention, timed, write_result
from transformer_lit.cli import main as transformer_lit
from transformer_lit.corpus import BOOKS, load_pairs
from transformer_lit.data import SubwordTokenizer, split_by_book
from transformer_lit.inference import translate
from transformer_lit.scoring import bleu
from transformer_lit.checkpoints import load_checkpoint, load_model_folder, model_from_checkpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="base")
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-tokens", type=int)
    parser.add_argument("--warmup", type=int)
    parser.add_argument("--lr-factor", type=float)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--threads", type=int, help="passed to the command (its default: 1 on a GPU)")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    disable_cudnn_attention(device)   # length-bucketed batches: a new (B, S, T) nearly every step

    command = ["train", "--preset", args.preset, "--minutes", str(args.minutes), "--out", str(args.out),
               "--bleu-sentences", "0", "--quiet"]
    for flag, value in (("--max-tokens", args.max_tokens), ("--warmup", args.warmup), ("--lr-factor", args.lr_factor),
                        ("--threads", args.threads)):
        if value is not None:
            command += [flag, str(value)]
    command += ["--compile"] if args.compile else []
    print("transformer-lit", " ".join(command), flush=True)
    if transformer_lit(command) != 0:   # it also sets torch's threads, for the decoding below too
        raise SystemExit("training failed")

    averaged, tokenizer_bytes, _ = load_model_folder(args.out)   # train writes its model into --out
    tokenizer = SubwordTokenizer(tokenizer_bytes)
    models = {"averaged": averaged.to(device).eval(),
              "last": model_from_checkpoint(load_checkpoint(args.out / "checkpoint.pt")).to(device).eval()}
    test = split_by_book(load_pairs())["test"]
    sources, references = [p.en for p in test], [p.fr for p in test]

    scores, seconds, outputs = {"copy the source": bleu(sources, references)}, {}, {}
    systems = {"greedy, no cache": lambda m: translate(m, tokenizer, sources, use_cache=False),
               "greedy, cached": lambda m: translate(m, tokenizer, sources),
               f"beam search ({args.beam}), cached": lambda m: translate(m, tokenizer, sources, beam_size=args.beam)}
    for weights, model in models.items():
        for name, run in systems.items():
            outputs[weights, name], seconds[f"{weights}, {name}"] = timed(lambda: run(model), device)
            scores[f"{weights}, {name}"] = bleu(outputs[weights, name], references)
            print(f"{weights:>8}, {name:>24}: BLEU {scores[f'{weights}, {name}']:5.1f} "
                  f"({seconds[f'{weights}, {name}']:.1f} s for {len(sources)} sentences)", flush=True)
    same = {w: outputs[w, "greedy, no cache"] == outputs[w, "greedy, cached"] for w in models}

    record = averaged_ckpt["record"]
    state = last_ckpt["state"]
    samples = []
    for i in random.Random(0).sample(range(len(test)), 8):
        p = test[i]
        samples.append({"ref": f"{BOOKS[p.book - 1]} {p.chapter}:{p.verse}", "english": p.en, "french": p.fr,
                        "greedy": outputs["averaged", "greedy, cached"][i],
                        "beam": outputs["averaged", f"beam search ({args.beam}), cached"][i]})
    payload = {
        "what": f"`transformer-lit train --preset {args.preset} --minutes {args.minutes}`, then BLEU "
                f"(sacrebleu {record.get('sacrebleu')}, 13a) on all {len(test)} test pairs",
        "device_type": device.type, "command": "transformer-lit " + " ".join(command),
        "run": {k: v for k, v in record.items() if k != "valid_log"},
        "valid_log": record["valid_log"],   # model.pt's: the final evaluation included
        "train_log": state["train_log"][::10],   # (step, loss, nll, lr), every 10th step
        "test_sentences": len(test), "bleu": scores, "decode_seconds": seconds,
        "cached_equals_uncached": same, "samples": samples,
    }
    print(json.dumps({k: payload["run"][k] for k in ("device", "steps", "minutes", "tokens_per_second")}, indent=1))
    print(f"wrote {write_result('translation', device, payload)}")


if __name__ == "__main__":
    main()
