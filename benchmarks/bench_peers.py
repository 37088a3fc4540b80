"""Benchmark: transformer_lit against its peers, Hugging Face's MarianMTModel and PyTorch's nn.Transformer.

Run: .venv/bin/pip install -e '.[huggingface]'      # once: transformers, at the version measured
     .venv/bin/python benchmarks/bench_peers.py [--threads N] [--repeats N] [--warmup N] [--smoke]

One model size for all three: V=8000 (one vocabulary, embeddings shared by source, target and output),
D=256, H=4, 3+3 layers, F=1024, ReLU, post-norm, sinusoidal positions (fixed), embeddings scaled by
sqrt(D). Ours is transformer_lit.model.Transformer; "marian" is transformers' MarianMTModel built from a
MarianConfig with the same sizes; "torch" is bench_model.py's nn.Transformer reference (training only:
it has no generate). Both peers get our weights (Marian: copied in by copy_into_marian; torch: as in
bench_model.py), and the logits are checked equal before anything is timed, so that the three compute
the same function and differ only in how.

Cases, on a CPU with one thread unless --threads says otherwise (source length S=32, no padding):
  1. cached greedy decoding, batch 1, 256 new tokens: greedy_decode(use_cache=True, eos_id=None) vs
     generate(do_sample=False, num_beams=1, max_new_tokens=256, min_new_tokens=256, use_cache=True)
     with eos switched off in Marian's generation config, so both write exactly 256 tokens;
  2. the same at batch 32, 128 new tokens;
  3. beam search, beam 4, batch 1, 64 new tokens: beam_search vs generate(num_beams=4,
     length_penalty=0.6, early_stopping=False), eos never reached (see SETUP_DIFFERENCES);
  4. one training step, B=32, S=T=32 (random rows padded after a random length), dropout 0.1 in
     train mode: forward, cross-entropy over the non-padding targets, backward, one Adam step
     (ours: the package's train_step, which runs its position-wise layers on the real tokens
     only and projects only the target positions);
  5. the same step on a batch with no padding at all (every row full): what is left when there
     is no padding to skip.
At batch 1 each decoding case, and each training case, also profiles one run of each side (top
operators by self time).
Each case times its functions in alternation (_common.interleaved_medians), prints the medians and
ours / theirs, asserts that both sides wrote the same number of tokens, and the script writes
transformer_lit/results/peers_<device>.json with the device, the 1-minute load average before and
after, and how the setups differ. Before measuring on another host, keep the last host's file as
peers_cpu_<host>.json (git mv): chapter 26 prints every host's decoding ratios side by side. Goals (issue 15): decoding >= 1.5x faster than Marian greedy and
>= 1.3x with beams; a training step <= 0.9x of Marian's and of nn.Transformer's time.

--smoke runs every case once on a tiny model with a few tokens and writes nothing: a check that the
script works, not a measurement.
"""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from _common import device_name, interleaved_medians, write_result
from bench_model import ADAM, TorchModel, check_same_model
from transformer_lit.data import Batch
from transformer_lit.fast import fast_train_step
from transformer_lit.fast_decoding import fast_decoder, two_pass_argmax, use_onednn
from transformer_lit.inference import beam_search, greedy_decode
from transformer_lit.model import Transformer, TransformerConfig, load_torch_transformer
from transformer_lit.fast import use_onednn_products
from transformer_lit.recipe import TrainSettings
from transformer_lit.training import make_optimizer

PAD, BOS = 0, 1
ALPHA = 0.6                 # beam search length penalty, both sides (ours: GNMT's alpha)
TRAIN_DROPOUT = 0.1


@dataclass(frozen=True)
class Sizes:
    "The model all three are built with; one vocabulary (shared embeddings)."
    vocab: int = 8000
    d_model: int = 256
    n_heads: int = 4
    n_layers: int = 3
    d_ff: int = 1024
    max_len: int = 1024


@dataclass(frozen=True)
class Case:
    "One timed comparison: kind is 'greedy', 'beam' or 'train'."
    name: str
    kind: str
    batch: int
    new_tokens: int = 0      # decoding: tokens written per sentence
    beam: int = 1
    src_len: int = 32
    tgt_len: int = 0         # training: target length T
    padded: bool = True      # training: rows padded after a random length (else all full)


BENCH = Sizes()
SMOKE = Sizes(vocab=1000, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=64)
CASES = (Case("greedy_b1", "greedy", batch=1, new_tokens=256),
         Case("greedy_b32", "greedy", batch=32, new_tokens=128),
         Case("beam4_b1", "beam", batch=1, new_tokens=64, beam=4),
         Case("train_step", "train", batch=32, src_len=32, tgt_len=32),
         Case("train_step_full", "train", batch=32, src_len=32, tgt_len=32, padded=False))
SMOKE_CASES = (Case("greedy_b1", "greedy", batch=1, new_tokens=8, src_len=8),
               Case("greedy_b32", "greedy", batch=32, new_tokens=8, src_len=8),
               Case("beam4_b1", "beam", batch=1, new_tokens=8, beam=4, src_len=8),
               Case("train_step", "train", batch=4, src_len=8, tgt_len=8),
               Case("train_step_full", "train", batch=4, src_len=8, tgt_len=8, padded=False))
GOALS = {"greedy": {"min_speedup_vs_marian": 1.5}, "beam": {"min_speedup_vs_marian": 1.3},
         "train": {"max_ratio_vs_marian": 0.9, "max_ratio_vs_torch": 0.9}}
SETUP_DIFFERENCES = [
    "Weights: Marian and nn.Transformer get ours (logits checked equal to 1e-4 before timing). Marian's "
    "sinusoidal table puts the sines in the first half and the cosines in the second, ours interleaves "
    "them: our table is copied into Marian's frozen one, which changes values, not work.",
    "Parameters: the same trainable ones. Marian also holds its two position tables as frozen "
    "parameters (2 x max_len x D, requires_grad=False, not given to Adam; ours is a buffer) and a "
    "final_logits_bias buffer (1, V) of zeros that it adds to every logits row; its embedding has "
    "padding_idx=pad (the pad row gets no gradient), ours has none.",
    "Greedy: ours eos_id=None; Marian's generation config has eos_token_id=None and "
    "forced_eos_token_id=None (MarianConfig's default forces eos as the last token), so "
    "min_new_tokens=n, passed as asked, adds no processor. Both write exactly n tokens (asserted).",
    "Beam: length penalties differ in form. Ours ranks every hypothesis by log P / ((5 + n) / 6) ** 0.6 "
    "(GNMT); Marian/HF ranks live beams by log P and divides a finished one by n ** 0.6 (length_penalty="
    "0.6, early_stopping=False). With no eos reached all hypotheses have n tokens and the two rankings "
    "agree. HF keeps the 2k best candidates per step (to refill beams that end), ours k.",
    "Beam eos: Marian runs with eos switched off. Our beam_search has no switch for that, so eos_id is "
    "an id that, checked before timing, never ends a best hypothesis early (recorded as beam_eos_id); "
    "both return 1 + n tokens (asserted). Every beam is computed every step on both sides regardless.",
    "Decoding: Marian runs generate() with its default DynamicCache and logits processors, ours the "
    "package's KVCache and its fast step (greedy_decode / beam_search with decoder=fast_decoder, and greedy "
    "with pick=two_pass_argmax: the command line's route, FastDecoder, chapter 26; greedy is also timed "
    "with the plain argmax, as ours_argmax); attention on both sides goes through "
    "F.scaled_dot_product_attention (Marian's attn_implementation is recorded).",
    "Products when decoding: from 4 rows a step (greedy at batch 32, beam 4 at batch 1) ours "
    "multiplies by weights that FastDecoder reorders once per call into oneDNN's blocked layout "
    "(torch.ops.mkldnn._reorder_linear_weight / _linear_pointwise, float32, the same sums in "
    "another order) where this machine's measurement found oneDNN faster: for the layers' "
    "products (recorded per case as ours_onednn) and, measured on its own, for the wide output "
    "projection (ours_onednn_logits); otherwise, at 1 row, and on Marian's side always, "
    "the products are torch's addmm/mm on nn.Linear weights.",
    "Training, ours: the package's own train_step, which runs the output projection (and the loss) "
    "on the positions that hold a target token only, and every position-wise layer (projections, "
    "feed-forward, layer norms, dropout) on the source tokens that are not padding and on each target "
    "row up to its last target token (packed_decoder_states, chapter 25: the attention alone sees the "
    "padded grid; same loss and gradients, asserted in the chapter and in tests/test_fast_paths.py); "
    "the peers compute every layer and the logits at every position of the padded grid, as their "
    "models' forward does. With no padding (train_step_full) there is nothing to skip. Ours computes the loss's gradient with respect to the logits "
    "in closed form (SmoothedCrossEntropy, chapter 25; equal to autograd's, tests/test_training.py), "
    "the peers through autograd. Same loss (cross-entropy without smoothing, padding ignored), "
    "no clipping, the same Adam settings (ours fused, the peers torch's default), on all three.",
    "Products when training: where use_onednn_products says so (float32 on a CPU with AVX-512; "
    "recorded per case as ours_onednn), train_step computes every linear layer's product, forward "
    "and both backward products, by oneDNN (OneDNNLinear, chapter 25: torch.ops.mkldnn."
    "_linear_pointwise, float32, rows rounded up to a multiple of 64 with zero rows); the peers' "
    "nn.Linear layers, and every other product on all three sides (attention's, through "
    "F.scaled_dot_product_attention), go through torch's mm/addmm/bmm, which PyTorch's CPU build "
    "hands to MKL. Same float32 products, summed in another order.",
    "Training: Marian's dropout, attention_dropout and activation_dropout are all 0.1, as ours (residual, "
    "attention weights, FFN hidden units, embeddings + positions); it is called with use_cache=False, "
    "as with labels; the loss is computed outside the model, the same way for all three.",
    "Training, dropout's decisions: ours makes the residual and feed-forward ones from 16 random bits "
    "each (FastDropout, chapter 25: p rounded to a multiple of 2^-16, 0.1 -> 0.1000061, the kept "
    "values scaled by the rounded rate); its attention weights and embeddings, and all of the peers' "
    "dropout, draw with bernoulli_.",
]


def build_ours(sizes: Sizes, dropout: float) -> Transformer:
    "Our Transformer at sizes, shared embeddings, seeded; weights as Transformer.reset_parameters."
    config = TransformerConfig(sizes.vocab, sizes.vocab, d_model=sizes.d_model, n_heads=sizes.n_heads,
                               n_layers=sizes.n_layers, d_ff=sizes.d_ff, dropout=dropout,
                               max_len=sizes.max_len, pad_id=PAD, share_embeddings=True)
    torch.manual_seed(0)
    return Transformer(config)


def marian_config(config: TransformerConfig):
    "A MarianConfig with config's sizes: post-norm, ReLU, scaled embeddings, shared and tied, eos off."
    from transformers import MarianConfig
    if not config.share_embeddings or config.norm_first:
        raise ValueError("Marian shares one vocabulary and is post-norm: need share_embeddings=True, "
                         "norm_first=False")
    p = config.dropout
    return MarianConfig(
        vocab_size=config.tgt_vocab_size, d_model=config.d_model,
        encoder_layers=config.n_layers, decoder_layers=config.n_layers,
        encoder_attention_heads=config.n_heads, decoder_attention_heads=config.n_heads,
        encoder_ffn_dim=config.d_ff, decoder_ffn_dim=config.d_ff, activation_function="relu",
        dropout=p, attention_dropout=p, activation_dropout=p,
        max_position_embeddings=config.max_len, scale_embedding=True,
        share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
        pad_token_id=config.pad_id, decoder_start_token_id=BOS, bos_token_id=None,
        eos_token_id=None, forced_eos_token_id=None)   # fixed-length decoding


def _copy_linear(ours: nn.Linear, theirs: nn.Linear) -> None:
    theirs.load_state_dict(ours.state_dict())


def _copy_attention(ours: nn.Module, theirs: nn.Module) -> None:
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):   # same names, (D, D) weights and biases
        _copy_linear(getattr(ours, name), getattr(theirs, name))


def _copy_norm(ours: nn.Module, theirs: nn.LayerNorm) -> None:
    theirs.weight.copy_(ours.weight)
    theirs.bias.copy_(ours.bias)
    theirs.eps = ours.eps


@torch.no_grad()
def copy_into_marian(ours: Transformer, theirs: nn.Module) -> nn.Module:
    "Copy our weights (and position table) into a MarianMTModel of the same sizes; returns theirs."
    m = theirs.model
    m.shared.weight.copy_(ours.tgt_embed.weight)   # tied: encoder, decoder embed_tokens and lm_head
    for table in (m.encoder.embed_positions, m.decoder.embed_positions):   # (max_len, D), frozen
        table.weight.copy_(ours.pos.pe[: table.weight.shape[0]])
    for o, t in zip(ours.encoder.layers, m.encoder.layers, strict=True):
        _copy_attention(o.self_attn, t.self_attn)
        _copy_norm(o.attn_res.norm, t.self_attn_layer_norm)
        _copy_linear(o.ffn.linear1, t.fc1)
        _copy_linear(o.ffn.linear2, t.fc2)
        _copy_norm(o.ffn_res.norm, t.final_layer_norm)
    for o, t in zip(ours.decoder.layers, m.decoder.layers, strict=True):
        _copy_attention(o.self_attn, t.self_attn)
        _copy_norm(o.self_res.norm, t.self_attn_layer_norm)
        _copy_attention(o.cross_attn, t.encoder_attn)
        _copy_norm(o.cross_res.norm, t.encoder_attn_layer_norm)
        _copy_linear(o.ffn.linear1, t.fc1)
        _copy_linear(o.ffn.linear2, t.fc2)
        _copy_norm(o.ffn_res.norm, t.final_layer_norm)
    return theirs


def build_marian(ours: Transformer) -> nn.Module:
    "A MarianMTModel configured as ours, holding our weights, in ours' train/eval mode."
    from transformers import MarianMTModel
    theirs = copy_into_marian(ours, MarianMTModel(marian_config(ours.config)))
    return theirs.train(ours.training)


class MarianLogits(nn.Module):
    "MarianMTModel behind our call: src (B, S), tgt (B, T) -> logits (B, T, V); HF's mask: 1 = attend."
    def __init__(self, marian: nn.Module):
        super().__init__()
        self.marian, self.pad = marian, marian.config.pad_token_id

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        keep = (src != self.pad).long()                                      # (B, S), as ours: 1 = key
        out = self.marian(input_ids=src, attention_mask=keep, decoder_input_ids=tgt, use_cache=False)
        return out.logits                                                   # (B, T, V)


def parameter_counts(model: nn.Module) -> dict[str, int]:
    "Trainable and frozen parameter elements (tied ones once) and buffer elements."
    params = list(model.parameters())   # deduplicated: a tied matrix counts once
    return {"trainable": sum(p.numel() for p in params if p.requires_grad),
            "frozen": sum(p.numel() for p in params if not p.requires_grad),
            "buffers": sum(b.numel() for b in model.buffers())}


def random_batch(vocab: int, batch: int, src_len: int, tgt_len: int,
                 seed: int = 0, padded: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """src (B, S), tgt_in (B, T), tgt_out (B, T): random ids, each row padded after a random
    length >= half (padded=False: no padding)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (batch, src_len), generator=g)
    tgt = torch.randint(3, vocab, (batch, tgt_len + 1), generator=g)
    if not padded:
        return src, tgt[:, :-1], tgt[:, 1:]
    src[torch.arange(src_len) >= torch.randint(src_len // 2, src_len + 1, (batch, 1), generator=g)] = PAD
    tgt[torch.arange(tgt_len + 1) >= torch.randint(tgt_len // 2, tgt_len + 2, (batch, 1), generator=g)] = PAD
    return src, tgt[:, :-1], tgt[:, 1:]


def make_train_step(model: nn.Module, batch: tuple[Tensor, Tensor, Tensor]):
    "A closure doing one training step of model(src, tgt_in) -> logits: loss, backward, Adam."
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], **ADAM)
    src, tgt_in, tgt_out = batch

    def step() -> Tensor:
        optimizer.zero_grad(set_to_none=True)
        logits = model(src, tgt_in)                                             # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        loss.backward()
        optimizer.step()
        return loss

    return step


def make_our_train_step(model: Transformer, batch: tuple[Tensor, Tensor, Tensor]):
    """One step as the package trains: train_step (output projection on the target positions
    only), with the peers' loss (no smoothing) and no clipping; Adam with ADAM's settings."""
    settings = TrainSettings(max_steps=1, label_smoothing=0.0, clip_norm=None, amp=False,
                             betas=ADAM["betas"], eps=ADAM["eps"])
    optimizer = make_optimizer(model, settings)
    src, tgt_in, tgt_out = batch
    rows = Batch(src, tgt_in, tgt_out, torch.arange(src.shape[0]))
    return lambda: fast_train_step(model, rows, optimizer, ADAM["lr"], settings).loss


def decode_models(sizes: Sizes) -> tuple[Transformer, nn.Module]:
    "Ours and Marian with the same weights, dropout 0, eval mode; their logits checked equal."
    ours = build_ours(sizes, dropout=0.0).eval()
    marian = build_marian(ours).eval()
    check = random_batch(sizes.vocab, 2, 8, 8, seed=1)
    check_same_model(ours, MarianLogits(marian), check)
    ours.eval(); marian.eval()   # check_same_model leaves both in train mode
    return ours, marian


def marian_generate(marian: nn.Module, src: Tensor, n: int, beam: int = 1):
    "generate() as the issue asks: greedy or beam, cached, exactly n new tokens -> (B, 1 + n)."
    keep = torch.ones_like(src)                                    # no padding in these sources
    if beam == 1:
        return lambda: marian.generate(src, attention_mask=keep, do_sample=False, num_beams=1,
                                       max_new_tokens=n, min_new_tokens=n, use_cache=True)
    return lambda: marian.generate(src, attention_mask=keep, do_sample=False, num_beams=beam,
                                   max_new_tokens=n, min_new_tokens=n, use_cache=True,
                                   length_penalty=ALPHA, early_stopping=False)


def unreached_eos(ours: Transformer, src: Tensor, n: int, beam: int) -> int:
    "An eos id (2, 3, ...) that ends no best hypothesis of beam_search on src before n tokens."
    for eos in range(2, min(ours.config.tgt_vocab_size, 34)):
        found = beam_search(ours, src, beam, n, bos_id=BOS, eos_id=eos, length_penalty=ALPHA)
        if all(len(h) == 1 + n for h in found):
            return eos
    raise RuntimeError("every eos id tried ends a hypothesis early: change the source seed")


def run_decoding(case: Case, ours: Transformer, marian: nn.Module, repeats: int, warmup: int,
                 device: torch.device = torch.device("cpu")) -> dict:
    "Time ours against Marian on one decoding case; asserts both write batch x new_tokens tokens."
    g = torch.Generator().manual_seed(2)
    src = torch.randint(3, ours.config.src_vocab_size, (case.batch, case.src_len), generator=g)
    n, row = case.new_tokens, {**asdict(case)}
    row["ours_onednn"] = use_onednn(ours, case.batch * case.beam)
    row["ours_onednn_logits"] = use_onednn(ours, case.batch * case.beam, "logits")
    if case.kind == "greedy":
        fns = {"ours": lambda: greedy_decode(ours, src, n, BOS, decoder=fast_decoder, pick=two_pass_argmax),
               "marian": marian_generate(marian, src, n),
               "ours_argmax": lambda: greedy_decode(ours, src, n, BOS, decoder=fast_decoder)}
    else:
        eos = row["beam_eos_id"] = unreached_eos(ours, src, n, case.beam)
        fns = {"ours": lambda: beam_search(ours, src, case.beam, n, bos_id=BOS, eos_id=eos,
                                          length_penalty=ALPHA, decoder=fast_decoder),
               "marian": marian_generate(marian, src, n, case.beam)}
    out = {name: list(fn()) for name, fn in fns.items()}   # per sentence: bos + the tokens written
    written = {name: sum(len(t) - 1 for t in rows) for name, rows in out.items()}
    row["tokens_written"] = written
    assert written["ours"] == written["marian"] == case.batch * n, f"{case.name}: token counts {written}"
    same = [torch.equal(a, b) for a, b in zip(out["ours"], out["marian"])]
    if "ours_argmax" in out:   # two ways to pick a token, one answer
        assert all(torch.equal(a, b) for a, b in zip(out["ours"], out["ours_argmax"]))
    row["same_tokens"] = all(same)   # same weights: expected, not required (argmax near-ties)
    seconds = interleaved_medians(fns, device, repeats=repeats, warmup=warmup)
    if case.batch == 1:   # where the time goes, after the timing (the profiler slows calls)
        row["profile"] = operator_profile({k: fns[k] for k in ("ours", "marian")})
    row["median_seconds"] = seconds
    row["tokens_per_s"] = {k: case.batch * n / s for k, s in seconds.items()}
    row["ratio_ours_to_marian"] = seconds["ours"] / seconds["marian"]
    row["speedup_vs_marian"] = seconds["marian"] / seconds["ours"]
    if "ours_argmax" in seconds:   # the same route, each row's token by torch's argmax
        row["speedup_of_two_pass_argmax"] = seconds["ours_argmax"] / seconds["ours"]
    goal = GOALS[case.kind]["min_speedup_vs_marian"]
    row["goal"] = {"min_speedup_vs_marian": goal, "met": row["speedup_vs_marian"] >= goal}
    return row


def train_models(sizes: Sizes, dropout: float = TRAIN_DROPOUT) -> dict[str, nn.Module]:
    "ours, marian (wrapped to our call) and torch with the same weights, train mode; logits checked."
    ours = build_ours(sizes, dropout)
    torch_ref = TorchModel(ours)                       # nn.Transformer with our embeddings
    load_torch_transformer(ours, torch_ref.core)       # ours <- its weights, as bench_model.py
    marian = MarianLogits(build_marian(ours))          # marian <- ours
    check = random_batch(sizes.vocab, 4, 8, 8, seed=1)
    check_same_model(ours, torch_ref, check)
    check_same_model(ours, marian, check)
    return {"ours": ours, "marian": marian, "torch": torch_ref}


def run_train_step(case: Case, models: dict[str, nn.Module], repeats: int, warmup: int,
                   device: torch.device = torch.device("cpu")) -> dict:
    "Time one training step of each model on the same batch; ours / marian and ours / torch."
    vocab = models["ours"].config.tgt_vocab_size
    batch = random_batch(vocab, case.batch, case.src_len, case.tgt_len, padded=case.padded)
    fns = {name: (make_our_train_step if name == "ours" else make_train_step)(model.train(), batch)
           for name, model in models.items()}
    seconds = interleaved_medians(fns, device, repeats=repeats, warmup=warmup)
    profile = operator_profile(fns)   # after the timing: the profiler slows every operator
    src, _, tgt_out = batch
    row = {**asdict(case), "dropout": models["ours"].config.dropout,
           "ours_onednn": use_onednn_products(models["ours"]),
           "real_tokens": {"source": float((src != PAD).float().mean()),
                           "target": float((tgt_out != PAD).float().mean())},
           "adam": {k: list(v) if isinstance(v, tuple) else v for k, v in ADAM.items()},
           "median_seconds": seconds, "profile": profile}
    goal = GOALS["train"]
    for peer in ("marian", "torch"):
        row[f"ratio_ours_to_{peer}"] = seconds["ours"] / seconds[peer]
        row[f"speedup_vs_{peer}"] = seconds[peer] / seconds["ours"]
    row["goal"] = {**goal, "met": row["ratio_ours_to_marian"] <= goal["max_ratio_vs_marian"]
                   and row["ratio_ours_to_torch"] <= goal["max_ratio_vs_torch"]}
    return row


def operator_profile(fns: dict, top: int = 6) -> dict[str, dict]:
    """One call of each fn under torch.profiler: the operators with the most self time (ms),
    and the total self time and operator count (after one untimed call)."""
    from torch.profiler import ProfilerActivity, profile
    out = {}
    for name, fn in fns.items():
        fn()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
        events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
        out[name] = {"total_ms": sum(e.self_cpu_time_total for e in events) / 1e3,
                     "operators": sum(e.count for e in events),
                     "top": [[e.key, e.count, e.self_cpu_time_total / 1e3] for e in events[:top]]}
    return out


def report(row: dict) -> str:
    "One printed line per case."
    ms = "  ".join(f"{k} {1e3 * s:8.1f} ms" for k, s in row["median_seconds"].items())
    if row["kind"] == "train":
        real = row["real_tokens"]
        what = (f"training step, B={row['batch']} S={row['src_len']} T={row['tgt_len']}, "
                f"tokens {real['source']:.0%} / {real['target']:.0%} of the grid")
        ratios = (f"ours/marian {row['ratio_ours_to_marian']:.3f}, ours/torch "
                  f"{row['ratio_ours_to_torch']:.3f} (goal <= 0.9 both)")
    else:
        what = (f"{row['kind']}{' ' + str(row['beam']) if row['kind'] == 'beam' else ''}, "
                f"batch {row['batch']}, {row['new_tokens']} new tokens")
        goal = row["goal"]["min_speedup_vs_marian"]
        ratios = (f"ours/marian {row['ratio_ours_to_marian']:.3f} = "
                  f"{row['speedup_vs_marian']:.2f}x faster (goal >= {goal}x)")
    return f"  {what}: {ms}; {ratios}: {'met' if row['goal']['met'] else 'MISSED'}"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--smoke", action="store_true",
                        help="tiny model, few tokens, one repeat; prints the JSON, writes nothing")
    args = parser.parse_args(argv)
    try:
        import transformers
    except ImportError:
        raise SystemExit("bench_peers.py needs transformers: .venv/bin/pip install -e '.[huggingface]'") from None
    device = torch.device("cpu")
    torch.set_num_threads(args.threads)
    sizes, cases = (SMOKE, SMOKE_CASES) if args.smoke else (BENCH, CASES)
    repeats, warmup = (1, 0) if args.smoke else (args.repeats, args.warmup)

    load_before = os.getloadavg()
    print(f"device: {device_name(device)}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}, load average {load_before[0]:.1f}"
          f"{' (smoke run: tiny model, not a measurement)' if args.smoke else ''}", flush=True)
    ours, marian = decode_models(sizes)
    counts = {"ours": parameter_counts(ours), "marian": parameter_counts(marian)}
    rows = []
    for case in cases:
        if case.kind == "train":
            models = train_models(sizes)
            counts["torch"] = parameter_counts(models["torch"])
            rows.append(run_train_step(case, models, repeats, warmup, device))
        else:
            rows.append(run_decoding(case, ours, marian, repeats, warmup, device))
        print(report(rows[-1]), flush=True)
    assert counts["ours"]["trainable"] == counts["marian"]["trainable"], counts

    payload = {
        "what": "transformer_lit against transformers' MarianMTModel (and nn.Transformer for training), "
                "same sizes and weights: cached greedy and beam decoding, and one training step",
        "device_type": device.type, "threads": torch.get_num_threads(),
        "transformers": transformers.__version__,
        "marian_attn_implementation": marian.config._attn_implementation,
        "model": {**asdict(sizes), "activation": "relu", "post_norm": True, "shared_embeddings": True,
                  "scale_embedding": True, "positions": "sinusoidal, fixed"},
        "parameters": counts,
        "repeats": repeats, "warmup": warmup, "beam_length_penalty": ALPHA,
        "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]},
        "setup_differences": SETUP_DIFFERENCES,
        "cases": rows,
        "goals_met": all(r["goal"]["met"] for r in rows),
    }
    if args.smoke:
        print(json.dumps(payload, indent=2))
    else:
        print(f"wrote {write_result('peers', device, payload)}")
    return payload


if __name__ == "__main__":
    main()
