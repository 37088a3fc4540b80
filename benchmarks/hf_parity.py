"""Parity: the shipped model through transformers (chapter 28's export) against transformer_lit itself.

Run: .venv/bin/python benchmarks/hf_parity.py [--threads N] [--limit N]
     (transformers comes with the package's `huggingface` extra, which `make venv` installs)

The shipped model is written by transformer_lit.huggingface.to_huggingface into a temporary folder and
read back with AutoTokenizer and AutoModelForSeq2SeqLM alone (transformers 5 has no `translation`
pipeline: tokenizer -> generate -> batch_decode is what it did). On the test books (Ruth, Daniel,
1 John; WEB sources, chapter 13's reference set), on a CPU with one thread unless --threads says
otherwise:
  1. greedy: our translate(beam_size=1), batches of 64 sorted by length, each sentence cut at
     chapter 16's output_limit, against generate() with the folder's generation_config (greedy, at
     most max_len - 1 new tokens), the same batches; texts compared; for each verse that differs,
     our margin between the two best logits at the first token where the two differ, that
     token's position, and whether it is where translate's output_limit stopped ours;
  2. beam 4 with no length penalty on either side (length_penalty=0.0: both rank hypotheses by their
     summed log-probability): our translate(beam_size=4, length_penalty=0.0) against
     generate(num_beams=4, length_penalty=0.0), other options at the folder's defaults;
  3. BLEU and chrF of each output against both French versions (corpus_scores).
Writes transformer_lit/results/huggingface_parity.json (the chapter reads it) with the machine, the
versions and the figures. --limit N: the first N verses only, writes nothing (a check that the
script runs).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")   # a local folder: nothing to download

import torch

from _common import RESULTS, cpu_details, device_name
from transformer_lit.corpus import load_verses
from transformer_lit.data import BOS_ID, EOS_ID, reference_set, split_by_book
from transformer_lit.huggingface import require_transformers, to_huggingface
from transformer_lit.inference import output_limit, translate
from transformer_lit.pretrained import PRETRAINED_SHA256, load_pretrained
from transformer_lit.scoring import corpus_scores

BATCH = 64


def hf_translate(model, tok, sentences: list[str], **options) -> tuple[list[str], list[list[int]]]:
    "Texts and token ids (start token removed, cut at EOS) from generate, batches of BATCH by length."
    order = sorted(range(len(sentences)), key=lambda i: len(tok(sentences[i])["input_ids"]))
    texts, ids = [""] * len(sentences), [[] for _ in sentences]
    for k in range(0, len(order), BATCH):
        chunk = order[k:k + BATCH]
        batch = tok([sentences[i] for i in chunk], return_tensors="pt", padding=True, truncation=True)
        with torch.no_grad():
            out = model.generate(**batch, **options)
        for r, i in enumerate(chunk):
            row = out[r, 1:].tolist()
            ids[i] = row[:row.index(EOS_ID)] if EOS_ID in row else row
            texts[i] = tok.decode(out[r], skip_special_tokens=True)
    return texts, ids


@torch.no_grad()
def first_difference(model, tokenizer, source: str, ours: str, theirs: list[int]) -> tuple[int, float]:
    "Where our tokens and theirs first differ, and our logit margin there (best minus second best)."
    mine = tokenizer.encode(ours)
    t = next(i for i in range(min(len(mine), len(theirs)) + 1)
             if i >= len(mine) or i >= len(theirs) or mine[i] != theirs[i])
    src = torch.tensor([tokenizer.encode(source)[:model.config.max_len - 1] + [EOS_ID]])
    tgt = torch.tensor([[BOS_ID] + mine[:t]])
    top = model(src, tgt)[0, -1].topk(2).values
    return t, float(top[0] - top[1])


def compare(name, ours, theirs, theirs_ids, keys, sources, model, tokenizer, seconds) -> dict:
    "Agreement of two lists of texts, with each difference (and for greedy, our margin there)."
    differences = []
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a == b:
            continue
        d = {"key": keys[i], "source": sources[i], "ours": a, "transformers": b}
        if name == "greedy":
            d["position"], d["margin"] = first_difference(model, tokenizer, sources[i], a, theirs_ids[i])
            n_src = len(tokenizer.encode(sources[i])[:model.config.max_len - 1]) + 1   # EOS included
            d["our_limit"] = output_limit(n_src, model.config.max_len)   # translate stops there
            d["at_our_limit"] = d["position"] == d["our_limit"]
        differences.append(d)
    same = len(ours) - len(differences)
    return {"verses": len(ours), "same": same, "percent": 100.0 * same / len(ours),
            "seconds": seconds, "differences": differences}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None, help="first N verses only; writes nothing")
    args = parser.parse_args(argv)
    transformers = require_transformers()
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()

    model, tokenizer = load_pretrained()
    test = split_by_book(load_verses())["test"]
    sources, references = reference_set(test)
    keys = [f"{v.book}:{v.chapter}:{v.verse}" for v in test
            if all(c in v.texts for c in ("4", *references))]
    assert len(keys) == len(sources)
    if args.limit:
        sources, keys = sources[:args.limit], keys[:args.limit]
        references = {k: r[:args.limit] for k, r in references.items()}
    with tempfile.TemporaryDirectory() as tmp:
        folder = to_huggingface(model, tokenizer, Path(tmp) / "shipped")
        hf_tok = AutoTokenizer.from_pretrained(folder)
        hf_model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
        card = (folder / "README.md").read_text()
    print(f"{device_name(torch.device('cpu'))}, {len(sources)} verses, {type(hf_model).__name__}", flush=True)

    runs = {"greedy": ({}, {}), "beam4_lp0": (dict(beam_size=4, length_penalty=0.0),
                                              dict(num_beams=4, length_penalty=0.0))}
    payload = {}
    for name, (ours_options, hf_options) in runs.items():
        start = time.perf_counter()
        ours = translate(model, tokenizer, sources, **ours_options)
        ours_seconds = time.perf_counter() - start
        start = time.perf_counter()
        theirs, theirs_ids = hf_translate(hf_model, hf_tok, sources, **hf_options)
        hf_seconds = time.perf_counter() - start
        row = compare(name, ours, theirs, theirs_ids, keys, sources, model, tokenizer,
                      {"ours": ours_seconds, "transformers": hf_seconds})
        row["scores"] = {side: {m: round(v, 2) for m, v in corpus_scores(texts, references).items()
                                if m in ("bleu", "chrf")}
                         for side, texts in (("ours", ours), ("transformers", theirs))}
        payload[name] = row
        print(f"  {name}: {row['same']} of {row['verses']} the same ({row['percent']:.1f}%), "
              f"ours {ours_seconds:.0f} s, transformers {hf_seconds:.0f} s; scores {row['scores']}",
              flush=True)

    import tokenizers
    record = {
        "what": "the shipped model exported by transformer_lit.huggingface.to_huggingface and read back "
                "with transformers alone, against transformer_lit's translate on the test books",
        "device": device_name(torch.device("cpu")), "cpu": cpu_details(),
        "threads": torch.get_num_threads(), "python": platform.python_version(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__, "model_sha256": PRETRAINED_SHA256,
        "class": type(hf_model).__name__, "verses": len(sources), "batch": BATCH,
        "decoding": {
            "greedy": "ours: translate(beam_size=1), each verse cut at output_limit (1.5 n + 10); "
                      "transformers: generate() with the folder's generation_config (greedy, "
                      "max_length = max_len)",
            "beam4_lp0": "ours: translate(beam_size=4, length_penalty=0.0); transformers: "
                         "generate(num_beams=4, length_penalty=0.0), early_stopping at its default",
        },
        "card_has_scores": "BLEU" in card,
        "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]},
        **payload,
    }
    if args.limit:
        print(json.dumps(record, indent=2, ensure_ascii=False)[:3000])
        return record
    path = RESULTS / "huggingface_parity.json"
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {path}")
    return record


if __name__ == "__main__":
    sys.exit(main() and 0)
