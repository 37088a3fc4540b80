"""Benchmark: transformer_lit against CTranslate2, the same weights exported by transformer_lit.export.

Run: .venv/bin/python benchmarks/bench_ctranslate2.py [--postnorm PATH] [--repeats N] [--warmup N] [--smoke]
     (ctranslate2 comes with the package's `deploy` extra, which `make venv` installs)

Four parts, all on a CPU with one thread (torch.set_num_threads(1), CTranslate2 intra_threads=1):
  1. agreement on the test books (Ruth, Daniel, 1 John; WEB sources, chapter 13's reference set), for
     the shipped model (pre-norm) and for a post-norm model (--postnorm: a model folder or model.pt; without it the
     post-norm part is skipped): greedy tokens of ours (greedy_decode, batches of 64 sorted by length,
     each sentence cut at chapter 13's limit n + n // 2 + 10) against CTranslate2 float32 and int8
     (translate_batch(beam_size=1), its other options at their defaults, the output cut at the same
     limit); for each disagreement, our margin between the two best logits at the first differing
     step; beam 4 with no length penalty on either side (length_penalty=0: both rank finished
     hypotheses by their summed log-probability, the one setting in which the two searches aim at the
     same hypothesis); BLEU and chrF of each against both French versions (corpus_scores);
  2. speed, the same cases as bench_peers.py (source S=32 random ids, no padding, every run writes
     exactly n tokens): greedy batch 1 with 256 new tokens, batch 32 with 128, beam 4 at batch 1
     with 64; ours plain (decode_step, the default), ours fast (FastDecoder / fast_step, decoder=fast_decoder),
     ours compiled (torch.compile(fast_step) on a static cache, greedy only), PyTorch's dynamic int8
     quantization of the decoder's linear layers (quantize_dynamic; plain step, since FastDecoder reads
     float weights), ours int8 fast (int8_fast_step: fast_step with every product, the output projection
     included, through fbgemm's prepacked int8 matrices, one scale per row; its translations are scored in
     part 1 too), CTranslate2 float32 and int8; interleaved repeats, medians;
  3. size on disk of each form of the weights;
  4. the load average before and after, the CPU, the versions.
Writes transformer_lit/results/ctranslate2_cpu.json. --smoke: a tiny model, few tokens, no corpus,
writes nothing (a check that the script runs, not a measurement).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
from functools import partial
from pathlib import Path

import torch
from torch import Tensor, nn

from _common import RESULTS, device_name, interleaved_medians, write_result
from transformer_lit.corpus import load_verses
from transformer_lit.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SubwordTokenizer, reference_set, split_by_book
from transformer_lit.export import require_ctranslate2, to_ctranslate2
from transformer_lit.fast_decoding import FastDecoder, fast_decoder, fast_step
from transformer_lit.inference import beam_search, generate, greedy_decode, output_limit
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.pretrained import load_pretrained
from transformer_lit.scoring import corpus_scores
from transformer_lit.checkpoints import load_model_folder, save_checkpoint

CASES = (("greedy_b1", 1, 256, 1), ("greedy_b32", 32, 128, 1), ("beam4_b1", 1, 64, 4))
SMOKE_CASES = (("greedy_b1", 1, 8, 1), ("greedy_b32", 4, 8, 1), ("beam4_b1", 1, 8, 4))
BATCH = 64          # sentences per batch in the agreement part, both sides
SRC_LEN = 32
PARTS = ("agreement", "speed", "sizes")


limit_of = output_limit  # chapter 16's budget for a source of n_src pieces (EOS included)


def strip(row: list[int]) -> list[int]:
    "Tokens written before the first EOS (BOS already removed)."
    return row[:row.index(EOS_ID)] if EOS_ID in row else row


def ours_decode(model: Transformer, ids: list[list[int]], beam: int = 1, int8: bool = False) -> list[list[int]]:
    """Our tokens for each source (ids without EOS), greedy (limits of chapter 13) or beam search with
    no length penalty and the same flat limit as CTranslate2's side; batches of BATCH by length."""
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out: list[list[int]] = [[] for _ in ids]
    max_len = model.config.max_len
    for k in range(0, len(order), BATCH):
        chunk = order[k:k + BATCH]
        src = torch.full((len(chunk), max(len(ids[i]) for i in chunk) + 1), PAD_ID)
        for r, i in enumerate(chunk):
            src[r, :len(ids[i]) + 1] = torch.tensor(ids[i] + [EOS_ID])
        limits = [limit_of(len(ids[i]) + 1, max_len) for i in chunk]
        if beam == 1:
            rows = (int8_greedy(model, src, max(limits), EOS_ID) if int8 else
                    greedy_decode(model, src, max(limits), BOS_ID, EOS_ID, decoder=fast_decoder))
            for r, i in enumerate(chunk):
                out[i] = strip(rows[r, 1:1 + limits[r]].tolist())
        else:
            rows = beam_search(model, src, beam, max(limits), bos_id=BOS_ID, eos_id=EOS_ID,
                               length_penalty=0.0, decoder=fast_decoder)
            for r, i in enumerate(chunk):
                out[i] = strip(rows[r][1:].tolist())
    return out


def ct2_decode(translator, tok: SubwordTokenizer, ids: list[list[int]], max_len: int,
               beam: int = 1) -> list[list[int]]:
    "CTranslate2's tokens for each source: pieces in, pieces out, its options at their defaults but beam."
    pieces = [tok.pieces(x) for x in ids]
    options = dict(beam_size=beam, max_batch_size=BATCH)
    if beam > 1:   # the flat limit ours has there; greedy runs with CTranslate2's default (256)
        options.update(length_penalty=0.0, max_decoding_length=max(limit_of(len(x) + 1, max_len) for x in ids))
    results = translator.translate_batch(pieces, **options)
    rows = [[tok.sp.piece_to_id(p) for p in r.hypotheses[0]] for r in results]
    if beam == 1:
        rows = [row[:limit_of(len(x) + 1, max_len)] for row, x in zip(rows, ids)]
    return rows


@torch.no_grad()
def first_difference_margin(model: Transformer, src_ids: list[int], ours: list[int], theirs: list[int]) -> float:
    "Our logit gap between the best and second-best token at the first step where the two outputs differ."
    t = next(i for i in range(min(len(ours), len(theirs)) + 1)
             if i >= len(ours) or i >= len(theirs) or ours[i] != theirs[i])
    src = torch.tensor([src_ids + [EOS_ID]])
    tgt = torch.tensor([[BOS_ID] + ours[:t]])
    top = model(src, tgt)[0, -1].topk(2).values
    return float(top[0] - top[1])


def agreement(name: str, model: Transformer, tok: SubwordTokenizer, sources: list[str],
              refs: dict[str, list[str]], folder: Path) -> dict:
    "Part 1 for one model: token agreement, margins of the disagreements, BLEU/chrF of each decoder."
    ct2 = require_ctranslate2()
    ids = [x[:model.config.max_len - 1] for x in tok.encode(sources)]
    paths = {q: to_ctranslate2(model, tok, folder / f"{name}_{q}", None if q == "float32" else q)
             for q in ("float32", "int8")}
    translators = {q: ct2.Translator(str(p), compute_type=q, intra_threads=1, inter_threads=1)
                   for q, p in paths.items()}
    max_len = model.config.max_len
    outputs = {"ours_greedy": ours_decode(model, ids),
               "ct2_float32_greedy": ct2_decode(translators["float32"], tok, ids, max_len),
               "ct2_int8_greedy": ct2_decode(translators["int8"], tok, ids, max_len),
               "ours_int8_fast_greedy": ours_decode(model, ids, int8=True),
               "ours_beam4_lp0": ours_decode(model, ids, beam=4),
               "ct2_float32_beam4_lp0": ct2_decode(translators["float32"], tok, ids, max_len, beam=4)}
    scores = {k: {m: round(v, 2) for m, v in corpus_scores([tok.decode(r) for r in rows], refs).items()
                  if m in ("bleu", "chrf")} for k, rows in outputs.items()}

    def equal(a: str, b: str) -> dict:
        same = [x == y for x, y in zip(outputs[a], outputs[b])]
        return {"equal": sum(same), "verses": len(same), "percent": round(100 * sum(same) / len(same), 2),
                "differing": [i for i, s in enumerate(same) if not s]}

    greedy = equal("ours_greedy", "ct2_float32_greedy")
    margins = sorted(first_difference_margin(model, ids[i], outputs["ours_greedy"][i],
                                             outputs["ct2_float32_greedy"][i]) for i in greedy["differing"])
    return {"verses": len(ids), "norm_first": model.config.norm_first,
            "greedy_float32": {**greedy, "first_difference_logit_margins": [round(m, 5) for m in margins]},
            "greedy_int8": equal("ours_greedy", "ct2_int8_greedy"),
            "beam4_lp0_float32": equal("ours_beam4_lp0", "ct2_float32_beam4_lp0"),
            "scores": scores,
            "ours_int8_fast_greedy": equal("ours_greedy", "ours_int8_fast_greedy"),
            "chrf_int8_minus_float32": round(scores["ct2_int8_greedy"]["chrf"]
                                             - scores["ct2_float32_greedy"]["chrf"], 2),
            "chrf_ours_int8_minus_float32": round(scores["ours_int8_fast_greedy"]["chrf"]
                                                  - scores["ours_greedy"]["chrf"], 2)}


def ours_int8(model: Transformer) -> Transformer:
    "PyTorch's dynamic int8 quantization of the decoder's nn.Linear layers (a copy; products in int8)."
    import warnings
    q = copy.deepcopy(model)
    with warnings.catch_warnings():   # torch.ao.quantization is deprecated in favour of torchao
        warnings.simplefilter("ignore")
        q.decoder = torch.ao.quantization.quantize_dynamic(q.decoder, {nn.Linear}, dtype=torch.qint8)
    return q


COMPILED_STEP = None


def compiled_decoder(model: Transformer, rows: int):
    """generate's decoder= for torch.compile(fast_step): on a static cache every step has the same
    shapes and the position is a device tensor, so one graph is compiled per batch size."""
    global COMPILED_STEP
    if COMPILED_STEP is None:
        COMPILED_STEP = torch.compile(fast_step)
    fd = FastDecoder(model, rows=rows, onednn=False)   # inductor cannot lower oneDNN's prepacked products
    return partial(COMPILED_STEP, fd)


def compiled_greedy(model: Transformer, src: Tensor, n: int) -> Tensor:
    "Greedy decoding with eos off through the compiled fast step on a static cache -> (B, 1 + n)."
    return generate(model, src, max_new_tokens=n, bos_id=BOS_ID, eos_id=None, static_cache=True,
                    decoder=compiled_decoder)


def _int8(a) -> object:
    "An PackedLinear of FastDecoder (float weights, W^T stored) as fbgemm's prepacked int8 matrix, one scale per row."
    w = a.weight.t().contiguous()                                     # (out, in)
    scale = (w.abs().amax(1) / 127).clamp(min=1e-12).double()
    q = torch.quantize_per_channel(w, scale, torch.zeros(w.shape[0], dtype=torch.long), 0, torch.qint8)
    return torch.ops.quantized.linear_prepack(q, a.bias)


class Int8FastDecoder:
    """FastDecoder's weights, every matrix (output projection included) prepacked as int8 for
    torch.ops.quantized.linear_dynamic, which quantizes each input row batch on the fly: the int8 products
    CTranslate2 uses, inside our fast step."""

    def __init__(self, model: Transformer, rows: int):
        import warnings
        fd = FastDecoder(model, rows=rows, onednn=False)
        with warnings.catch_warnings():   # quantized tensors are deprecated in favour of torchao
            warnings.simplefilter("ignore")
            self.layers = [(*(_int8(a) for a in layer[:5]), layer[5], _int8(layer[6]), layer[7])
                           for layer in fd.layers]
            self.project = _int8(fd.project)
        self.fd = fd


@torch.no_grad()
def int8_fast_step(q8: Int8FastDecoder, tokens: Tensor, cache) -> Tensor:
    "fast_step (chapter 16) with every product an int8 one: tokens (B, 1) -> logits (B, V)."
    from transformer_lit.fast_decoding import _add_norm, _embed, _norm
    from transformer_lit.attention import fused_attention
    import torch.nn.functional as F
    fd, lin = q8.fd, torch.ops.quantized.linear_dynamic
    B, H, D = tokens.shape[0], fd.H, fd.D
    x = _embed(fd, tokens, cache)
    for i, (qkv, out, cross_q, cross_out, up, act, down, norms) in enumerate(q8.layers):
        h = _norm(norms[0], x) if fd.norm_first else x
        q, k, v = lin(h, qkv).view(B, 3, H, 1, D // H).unbind(1)
        keys, values, mask = cache.update(i, k, v)
        a = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        x = _add_norm(fd, norms[0], x, lin(a.reshape(B, D), out))
        h = _norm(norms[1], x) if fd.norm_first else x
        q = lin(h, cross_q).view(B, H, 1, D // H)
        a = fused_attention(q, cache.cross_k[i], cache.cross_v[i], cache.memory_mask)
        x = _add_norm(fd, norms[1], x, lin(a.reshape(B, D), cross_out))
        h = _norm(norms[2], x) if fd.norm_first else x
        x = _add_norm(fd, norms[2], x, lin(act(lin(h, up)), down))
    cache.advance()
    if fd.final_norm is not None:
        x = _norm(fd.final_norm, x)
    return lin(x, q8.project)


def int8_decoder(model: Transformer, rows: int):
    "generate's decoder= for int8_fast_step: every product an int8 one, weights packed once per call."
    return partial(int8_fast_step, Int8FastDecoder(model, rows))


def int8_greedy(model: Transformer, src: Tensor, n: int, eos_id: int | None = None) -> Tensor:
    """Greedy decoding through int8_fast_step -> (B, 1 + n) (shorter if every row wrote eos_id; rows
    padded after it); the encoder and the cache stay float32."""
    return generate(model, src, max_new_tokens=n, bos_id=BOS_ID, eos_id=eos_id, decoder=int8_decoder)


def speed(model: Transformer, tok: SubwordTokenizer, folder: Path, cases, repeats: int, warmup: int) -> list:
    "Part 2: every decoder on the same source, exactly n new tokens each; medians of interleaved runs."
    ct2 = require_ctranslate2()
    paths = {q: to_ctranslate2(model, tok, folder / f"speed_{q}", None if q == "float32" else q, force=True)
             for q in ("float32", "int8")}
    tr = {q: ct2.Translator(str(p), compute_type=q, intra_threads=1, inter_threads=1) for q, p in paths.items()}
    q8 = ours_int8(model)
    device, rows = torch.device("cpu"), []
    for name, batch, n, beam in cases:
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(4, model.config.src_vocab_size, (batch, SRC_LEN), generator=g)
        src = torch.cat([ids, torch.full((batch, 1), EOS_ID)], 1)         # (B, S + 1), EOS last
        pieces = [tok.pieces(r) for r in ids.tolist()]                      # CTranslate2 appends </s>
        fixed = dict(beam_size=beam, min_decoding_length=n, max_decoding_length=n)
        if beam == 1:
            fns = {"ours_plain": lambda: greedy_decode(model, src, n, BOS_ID, None),
                   "ours_fast": lambda: greedy_decode(model, src, n, BOS_ID, None, decoder=fast_decoder),
                   "ours_compiled": lambda: compiled_greedy(model, src, n),
                   "ours_int8_plain": lambda: greedy_decode(q8, src, n, BOS_ID, None),
                   "ours_int8_fast": lambda: int8_greedy(model, src, n)}
            assert torch.equal(fns["ours_compiled"](), fns["ours_fast"]()), "compiled step changed tokens"
        else:   # UNK as eos: the model never writes it here (asserted below), so every beam runs n steps
            ids = dict(bos_id=BOS_ID, eos_id=UNK_ID, length_penalty=0.6)
            fns = {"ours_plain": lambda: beam_search(model, src, beam, n, **ids),
                   "ours_fast": lambda: beam_search(model, src, beam, n, **ids, decoder=fast_decoder),
                   "ours_int8_plain": lambda: beam_search(q8, src, beam, n, **ids)}
        fns.update({f"ct2_{q}": (lambda t=t: t.translate_batch(pieces, **fixed)) for q, t in tr.items()})
        for key, fn in fns.items():   # every decoder writes exactly n tokens per sentence
            out = fn()
            lengths = ({len(r.hypotheses[0]) for r in out} if key.startswith("ct2")
                       else {len(r) - 1 for r in out} if beam > 1 else {out.shape[1] - 1})
            assert lengths == {n}, (name, key, lengths)
        med = interleaved_medians(fns, device, repeats, warmup)
        tokens = batch * n
        rows.append({"case": name, "batch": batch, "new_tokens": n, "beam": beam, "src_len": SRC_LEN + 1,
                     "median_seconds": {k: round(v, 5) for k, v in med.items()},
                     "tokens_per_second": {k: round(tokens / v, 1) for k, v in med.items()},
                     "time_ratio_to_ct2_float32": {k: round(v / med["ct2_float32"], 3) for k, v in med.items()}})
        print(f"  {name}: " + "  ".join(f"{k} {1e3 * v:.0f} ms" for k, v in med.items()), flush=True)
    return rows


def sizes(model: Transformer, tok: SubwordTokenizer, folder: Path) -> dict:
    "Part 3: bytes on disk of each form of the same weights."
    ours32 = save_checkpoint(folder / "ours_float32.pt", model, tokenizer=tok.to_bytes())
    ours16 = save_checkpoint(folder / "ours_float16.pt", copy.deepcopy(model).half(), tokenizer=tok.to_bytes())
    q8 = ours_int8(model)
    torch.save(q8.state_dict(), folder / "ours_int8_decoder.pt")
    out = {"ours_float32_checkpoint": ours32.stat().st_size, "ours_float16_checkpoint": ours16.stat().st_size,
           "ours_int8_decoder_state_dict": (folder / "ours_int8_decoder.pt").stat().st_size}
    for q in ("float32", "int8", "int16", "float16"):
        p = to_ctranslate2(model, tok, folder / f"size_{q}", None if q == "float32" else q)
        out[f"ct2_{q}_model_bin"] = (p / "model.bin").stat().st_size
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postnorm", type=Path, help="a post-norm model (the folder train writes, or a model.pt) for the agreement part")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset of %(default)s")
    parser.add_argument("--smoke", action="store_true", help="tiny model, no corpus, writes nothing")
    args = parser.parse_args(argv)
    ct2 = require_ctranslate2()
    torch.set_num_threads(1)
    device = torch.device("cpu")
    load_before = os.getloadavg()
    print(f"device: {device_name(device)}, torch {torch.__version__}, ctranslate2 {ct2.__version__}, "
          f"load {load_before[0]:.1f}", flush=True)
    if args.smoke:
        from transformer_lit.data import train_tokenizer
        texts = ["In the beginning God created the heavens and the earth.", "Dieu dit: Que la lumière soit!",
                 "The king said to his servants.", "Et le roi dit à ses serviteurs."] * 3
        tok = train_tokenizer(texts, vocab_size=60)
        torch.manual_seed(0)
        model = Transformer(TransformerConfig.tiny(tok.vocab_size, tok.vocab_size, max_len=64)).eval()
    else:
        model, tok = load_pretrained()
    parts = set(args.parts.split(","))
    payload: dict = {"what": "transformer_lit against CTranslate2 with the same weights (transformer_lit.export)",
                     "ctranslate2": ct2.__version__, "threads": 1, "repeats": args.repeats,
                     "warmup": args.warmup}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if "agreement" in parts and not args.smoke:
            verses = split_by_book(load_verses())["test"]
            sources, refs = reference_set(verses)
            payload["agreement"] = {"shipped_prenorm": agreement("shipped", model, tok, sources, refs, folder)}
            print("  agreement, shipped:", json.dumps({k: v for k, v in payload["agreement"]["shipped_prenorm"].items()
                                                        if k != "scores"})[:600], flush=True)
            if args.postnorm:
                post, tokenizer_bytes, record = load_model_folder(args.postnorm)
                payload["agreement"]["postnorm"] = {
                    **agreement("postnorm", post.eval(), SubwordTokenizer(tokenizer_bytes), sources, refs, folder),
                    "record": record}
                print("  agreement, post-norm:", payload["agreement"]["postnorm"]["greedy_float32"]["percent"],
                      flush=True)
        if "speed" in parts:
            load = os.getloadavg()[0]
            payload["speed"] = speed(model, tok, folder, SMOKE_CASES if args.smoke else CASES,
                                     1 if args.smoke else args.repeats, 0 if args.smoke else args.warmup)
            payload["speed"] = {"load_average_1min": {"before": load, "after": os.getloadavg()[0]},
                                "cases": payload["speed"]}
        if "sizes" in parts:
            payload["bytes_on_disk"] = sizes(model, tok, folder)
    payload["load_average_1min"] = {"before": load_before[0], "after": os.getloadavg()[0]}
    if args.smoke:
        print(json.dumps(payload, indent=1)[:3000])
    else:   # a run of some parts keeps the other parts of the file (each part says its own load)
        old = RESULTS / "ctranslate2_cpu.json"
        kept = json.loads(old.read_text()) if old.exists() and parts != set(PARTS) else {}
        kept = {k: v for k, v in kept.items() if k in ("agreement", "speed", "bytes_on_disk")}
        print(f"wrote {write_result('ctranslate2', device, {**kept, **payload})}")
    return payload


if __name__ == "__main__":
    main()
