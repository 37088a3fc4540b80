"""Benchmark: one training step of transformer_lit's Transformer against the same model built on nn.Transformer.

Run: .venv/bin/python benchmarks/bench_model.py [--device cpu|cuda] [--repeats N] [--warmup N] [--threads N]
                                                 [--profile]

A training step is: forward, cross-entropy over the non-padding target tokens, backward, one Adam step (the
paper's betas and eps, same learning rate for both). The reference ("torch") uses a copy of our embeddings and
positional encoding, torch.nn.Transformer (batch_first, post-norm, ReLU, its final LayerNorms removed as the paper
has none) and the output projection tied to the target embedding; load_torch_transformer gives both the same
weights. Sizes: V=8000, D=256, H=4, 3+3 layers, F=1024, B=32, S=T=32, dropout 0.1, train mode, random token batches
whose rows end in different amounts of padding. On CUDA both run under bf16 autocast.

The two steps are timed in alternation after a warm-up; the script prints the median times and their ratio and
writes transformer_lit/results/model_step_<device>.json. Goal: ours / torch <= 1.0.

With --profile it also (1) runs torch.profiler over a few steps of each and lists the operators on which ours
spends more time than torch, (2) times the parts that differ, ours against PyTorch's, forward + backward at the
benchmark's sizes (LayerNorm, the self-attention input projection, masked attention), and (3) times a third step,
ours with F.layer_norm in place of our LayerNorm, to show how much of the difference the LayerNorm explains.

On a CPU shared with other work, multi-threaded small operators can slow down by an order of magnitude (OpenMP
threads waiting on each other); --threads 1 gives steadier numbers there.
"""
from __future__ import annotations

import argparse
import copy
import math
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from _common import device_name, interleaved_medians, sync, write_result
from transformer_lit.masking import causal_mask
from transformer_lit.model import Transformer, TransformerConfig, load_torch_transformer

V, D, H, N, FF, B, S, T, DROPOUT = 8000, 256, 4, 3, 1024, 32, 32, 32, 0.1
PAD = 0
ADAM = dict(lr=1e-4, betas=(0.9, 0.98), eps=1e-9)   # §5.3's betas and eps; a fixed small rate
GOAL = 1.0


class TorchModel(nn.Module):
    "Copies of our embeddings and positional encoding, torch.nn.Transformer, output projection tied to tgt_embed."
    def __init__(self, ours: Transformer):
        super().__init__()
        c = self.config = ours.config
        self.embed = copy.deepcopy(nn.ModuleDict(dict(src=ours.src_embed, tgt=ours.tgt_embed, pos=ours.pos)))
        self.core = nn.Transformer(c.d_model, c.n_heads, c.n_layers, c.n_layers, c.d_ff, c.dropout,
                                   batch_first=True, norm_first=c.norm_first)
        if not c.norm_first:
            self.core.encoder.norm = self.core.decoder.norm = None   # the paper's post-norm model has no final norm

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        "src (B, S), tgt (B, T) -> logits (B, T, V); PyTorch's masks: True = blocked."
        e, scale = self.embed, math.sqrt(self.config.d_model)
        x, y = e["pos"](e["src"](src) * scale), e["pos"](e["tgt"](tgt) * scale)   # (B, S, D), (B, T, D)
        padding = src == self.config.pad_id                                      # (B, S)
        blocked = ~causal_mask(tgt.shape[1], tgt.device)                          # (T, T)
        h = self.core(x, y, tgt_mask=blocked, src_key_padding_mask=padding, memory_key_padding_mask=padding)
        return F.linear(h, e["tgt"].weight)                                       # (B, T, D) -> (B, T, V)


def random_batch(device: torch.device, seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    "src (B, S), tgt_in (B, T), tgt_out (B, T): random ids, each row padded after a random length >= half."
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V, (B, S), generator=g)
    tgt = torch.randint(3, V, (B, T + 1), generator=g)
    src[torch.arange(S) >= torch.randint(S // 2, S + 1, (B, 1), generator=g)] = PAD
    tgt[torch.arange(T + 1) >= torch.randint(T // 2, T + 2, (B, 1), generator=g)] = PAD
    return src.to(device), tgt[:, :-1].to(device), tgt[:, 1:].to(device)


def make_step(model: nn.Module, batch: tuple[Tensor, Tensor, Tensor], device: torch.device):
    "A closure doing one training step of model on batch (bf16 autocast on CUDA)."
    optimizer = torch.optim.Adam(model.parameters(), **ADAM)
    src, tgt_in, tgt_out = batch

    def step() -> Tensor:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = model(src, tgt_in)                                           # (B, T, V)
        loss = F.cross_entropy(logits.float().reshape(-1, V), tgt_out.reshape(-1), ignore_index=PAD)
        loss.backward()
        optimizer.step()
        return loss

    return step


def check_same_model(a: nn.Module, b: nn.Module, batch) -> None:
    "Before timing: same logits in eval mode (PyTorch's inference fast path off: it zeroes padded rows)."
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    a.eval(); b.eval()
    with torch.no_grad():
        torch.testing.assert_close(a(*batch[:2]), b(*batch[:2]), rtol=1e-4, atol=1e-4)
    a.train(); b.train()
    torch.backends.mha.set_fastpath_enabled(fastpath)


def profile(steps: dict, device: torch.device, n: int = 5, top: int = 25) -> dict[str, dict[str, float]]:
    "Self time per operator (ms per step) of each step function, and a table of where ours spends more."
    from torch.profiler import ProfilerActivity, profile as torch_profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    per_op: dict[str, dict[str, float]] = {}
    for name, fn in steps.items():
        fn(); sync(device)
        with torch_profile(activities=activities) as prof:
            for _ in range(n):
                fn()
            sync(device)
        times = defaultdict(float)
        for ev in prof.key_averages():
            us = ev.self_device_time_total if device.type == "cuda" else ev.self_cpu_time_total
            times[ev.key] += us / 1e3 / n
        per_op[name] = dict(times)
        print(f"\n--- {name}: top operators by self time (ms per step), total {sum(times.values()):.1f} ms")
        for key, ms in sorted(times.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {key:<48s} {ms:8.2f}")
    ops = set(per_op["ours"]) | set(per_op["torch"])
    diff = sorted(((per_op["ours"].get(k, 0.0) - per_op["torch"].get(k, 0.0), k) for k in ops), reverse=True)
    print("\n--- operators where ours spends more than torch (ms per step): ours, torch, difference")
    for d, k in diff[:top]:
        if d <= 0.05:
            break
        print(f"  {k:<48s} {per_op['ours'].get(k, 0.0):8.2f} {per_op['torch'].get(k, 0.0):8.2f} {d:+8.2f}")
    print("--- operators where torch spends more than ours")
    for d, k in sorted(diff)[:10]:
        if d >= -0.05:
            break
        print(f"  {k:<48s} {per_op['ours'].get(k, 0.0):8.2f} {per_op['torch'].get(k, 0.0):8.2f} {d:+8.2f}")
    return per_op


def time_parts(device: torch.device, repeats: int) -> dict[str, dict[str, float]]:
    "Forward + backward of the pieces that differ, ours vs PyTorch's, at the benchmark's sizes (ms per call)."
    from transformer_lit.attention import MultiHeadAttention, fused_attention
    from transformer_lit.norms import LayerNorm
    torch.manual_seed(1)
    x = torch.randn(B, T, D, device=device, requires_grad=True)
    grad = torch.randn(B, T, D, device=device)
    q, k, v = (torch.randn(B, H, T, D // H, device=device, requires_grad=True) for _ in range(3))
    grad_heads = torch.randn(B, H, T, D // H, device=device)
    keep = (torch.arange(S, device=device) < torch.randint(S // 2, S + 1, (B, 1), device=device))[:, None, None, :]
    ln_ours, ln_torch = LayerNorm(D).to(device), nn.LayerNorm(D).to(device)
    mha = MultiHeadAttention(D, H).to(device)
    in_proj_w = nn.Parameter(torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight]).detach())
    in_proj_b = nn.Parameter(torch.zeros(3 * D, device=device))

    def backward(inputs, out, g) -> None:
        for t in inputs:
            t.grad = None
        out.backward(g)

    def qkv_sum(qkv) -> Tensor:
        return sum(t.float().sum() for t in qkv)

    cases = {
        "layer_norm (15 per step)": {
            "ours": lambda: backward([x], ln_ours(x), grad),
            "torch": lambda: backward([x], ln_torch(x), grad)},
        "self-attention q/k/v projection (6 per step)": {
            "ours": lambda: backward([x], qkv_sum(mha.project_qkv(x, x, x)), None),
            "torch": lambda: backward([x], qkv_sum(F.linear(x, in_proj_w, in_proj_b).chunk(3, dim=-1)), None)},
        "attention, padding mask (6 per step)": {
            "ours": lambda: backward([q, k, v], fused_attention(q, k, v, keep, DROPOUT), grad_heads),
            "torch": lambda: backward([q, k, v], F.scaled_dot_product_attention(q, k, v, attn_mask=keep,
                                                                                   dropout_p=DROPOUT), grad_heads)},
        "attention, causal mask (3 per step)": {
            "ours": lambda: backward([q, k, v], fused_attention(q, k, v, causal_mask(T, device), DROPOUT), grad_heads),
            "torch": lambda: backward([q, k, v], F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(T, device),
                                                                                   dropout_p=DROPOUT), grad_heads)},
    }
    print("\n--- parts, forward + backward, ms per call (median): ours, torch (F.layer_norm / stacked in_proj / "
          "F.scaled_dot_product_attention with the same bool mask), difference")
    result = {}
    for name, fns in cases.items():
        ms = {k: v * 1e3 for k, v in interleaved_medians(fns, device, repeats=repeats).items()}
        result[name] = ms
        print(f"  {name:<46s} {ms['ours']:8.2f} {ms['torch']:8.2f} {ms['ours'] - ms['torch']:+8.2f}")
    return result


def with_native_layer_norm(model: Transformer) -> Transformer:
    "A copy of model whose LayerNorms call F.layer_norm (same weights and eps): a what-if, not a fix."
    from transformer_lit.norms import LayerNorm
    model = copy.deepcopy(model)
    for m in model.modules():
        if isinstance(m, LayerNorm):
            m.forward = lambda x, m=m: F.layer_norm(x, (m.d_model,), m.weight, m.bias, m.eps)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: PyTorch's choice)")
    parser.add_argument("--profile", action="store_true", help="also profile, time the parts and a what-if step")
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    config = TransformerConfig(V, V, d_model=D, n_heads=H, n_layers=N, d_ff=FF, dropout=DROPOUT, pad_id=PAD)
    ours = Transformer(config)
    theirs = TorchModel(ours)
    load_torch_transformer(ours, theirs.core)
    ours.to(device); theirs.to(device)
    batch = random_batch(device)
    check_same_model(ours, theirs, batch)

    steps = {"torch": make_step(theirs, batch, device), "ours": make_step(ours, batch, device)}
    seconds = interleaved_medians(steps, device, repeats=args.repeats, warmup=args.warmup)
    ratio = seconds["ours"] / seconds["torch"]

    print(f"device: {device_name(device)}, torch {torch.__version__}"
          f"{', bf16 autocast' if device.type == 'cuda' else ''}")
    print(f"training step (forward, cross-entropy, backward, Adam), V={V} D={D} H={H} N={N}+{N} F={FF} "
          f"B={B} S={S} T={T} dropout={DROPOUT}, median of {args.repeats}:")
    for name, s in seconds.items():
        print(f"  {name:<6s} {s * 1e3:8.1f} ms")
    print(f"  ratio ours / torch {ratio:6.3f}   (goal <= {GOAL}: {'met' if ratio <= GOAL else 'MISSED'})")
    path = write_result("model_step", device, {
        "what": "one training step (forward, cross-entropy, backward, Adam) of transformer_lit.model.Transformer vs "
                "the same embeddings + nn.Transformer(batch_first=True, post-norm, ReLU) + tied projection",
        "shape": {"V": V, "D": D, "H": H, "N": N, "F": FF, "B": B, "S": S, "T": T, "dropout": DROPOUT},
        "autocast": "bf16" if device.type == "cuda" else None,
        "adam": {k: list(v) if isinstance(v, tuple) else v for k, v in ADAM.items()},
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
        "repeats": args.repeats, "warmup": args.warmup,
        "median_seconds": seconds,
        "ratio_ours_to_torch": ratio,
        "goal": GOAL, "goal_met": ratio <= GOAL,
    })
    print(f"wrote {path}")
    if not args.profile:
        return
    profile(steps, device)
    time_parts(device, args.repeats)
    native = with_native_layer_norm(ours)
    check_same_model(native, ours, batch)
    what_if = {**steps, "ours_native_layer_norm": make_step(native, batch, device)}
    ms = {k: v * 1e3 for k, v in interleaved_medians(what_if, device, args.repeats, args.warmup).items()}
    print("\n--- what-if, training step, ms (median): " + ", ".join(f"{k} {v:.1f}" for k, v in ms.items()))
    print(f"  ours / torch {ms['ours'] / ms['torch']:.3f}, ours with F.layer_norm / torch "
          f"{ms['ours_native_layer_norm'] / ms['torch']:.3f}")


if __name__ == "__main__":
    main()
