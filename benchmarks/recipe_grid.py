"""A small grid of training recipes, compared on the validation books (chapter 13, "A recipe for a
small corpus"). Every run is `transformer-lit train` with the same wall-time budget; each is then
scored on ALL validation verses (source WEB, every French version a reference), with its last
weights and with the average of its last snapshots. The test books are never touched here.

Usage: python benchmarks/recipe_grid.py [--steps 600] [--threads 1] [--out DIR]
Writes transformer_lit/results/recipe_grid_cpu.json (or _cuda).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from transformer_lit.corpus import load_verses
from transformer_lit.data import SubwordTokenizer, reference_set, split_by_book
from transformer_lit.inference import translate
from transformer_lit.scoring import corpus_scores
from transformer_lit.checkpoints import (
    describe_device,
    load_checkpoint,
    load_model_folder,
    model_from_checkpoint,
)

ROOT = Path(__file__).resolve().parents[1]
GRID = {   # name -> options of `transformer-lit train` on top of the cpu preset
    "cpu preset (dropout 0, smoothing 0.1, 4k vocabulary)": [],
    "dropout 0.1": ["--dropout", "0.1"],
    "no label smoothing": ["--label-smoothing", "0"],
    "8k vocabulary": ["--vocab-size", "8000"],
    "WEB-LSG pairs only": ["--english", "4", "--french", "l"],
}


def score(model, tokenizer_bytes: bytes, sources, references) -> dict:
    hyps = translate(model.eval(), SubwordTokenizer(tokenizer_bytes), sources)
    return corpus_scores(hyps, references)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only the grid entries whose names start so")
    p.add_argument("--name", default="recipe_grid", help="results file name, without _cpu.json")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path.home() / ".cache" / "transformer_lit" / "grid")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    sources, references = reference_set(split_by_book(load_verses())["valid"])
    rows = {}
    grid = {k: v for k, v in GRID.items() if not args.only or any(k.startswith(o) for o in args.only)}
    for name, options in grid.items():
        out = args.out / f"{args.steps}" / name.split(" (")[0].replace(" ", "_").replace("-", "_")
        command = ["transformer-lit", "train", "--preset", "cpu", "--steps", str(args.steps),
                   "--out", str(out), "--threads", str(args.threads), "--force", "--quiet",
                   "--bleu-sentences", "0", *options]
        t = time.perf_counter()
        cli = Path(sys.executable).with_name("transformer-lit")   # the venv's command
        subprocess.run([str(cli), *command[1:]], check=True)
        averaged, tokenizer_bytes, record = load_model_folder(out)   # train writes its model into --out
        last = load_checkpoint(out / "checkpoint.pt")
        rows[name] = {"command": " ".join(command), "steps": record["steps"], "minutes": record["minutes"],
                      "valid_nll": record["valid_log"][-1][1], "wall_seconds": time.perf_counter() - t,
                      "last": score(model_from_checkpoint(last, "model"), tokenizer_bytes, sources, references),
                      "averaged": score(averaged, tokenizer_bytes, sources, references)}
        r = rows[name]
        print(f"{name}: {r['steps']} steps, valid NLL {r['valid_nll']:.3f}, BLEU last "
              f"{r['last']['bleu']:.2f} averaged {r['averaged']['bleu']:.2f}", flush=True)
    device = torch.device("cpu")
    result = {"device": describe_device(device), "steps_per_run": args.steps,
              "validation_verses": len(sources), "references": list(references), "runs": rows}
    dest = ROOT / "transformer_lit" / "results" / f"{args.name}_cpu.json"
    dest.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()
