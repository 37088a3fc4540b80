"""benchmarks/bench_decode.py's graph-capturable greedy loop, on the CPU: the step that the CUDA
benchmark captures as a graph (with decode_step or FastDecoder's fast_step) writes the tokens of
greedy_decode, even when only its device tensors move on, as in a graph replay. No speed is
asserted here: the numbers come from the benchmark itself, on a GPU."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from transformer_lit.inference import greedy_decode
from transformer_lit.model import Transformer, TransformerConfig

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))   # the benchmarks import each other as top-level modules
try:
    import bench_decode
finally:
    sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("replay", [False, True])
def test_static_greedy_writes_greedy_tokens(fast, replay):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny()).eval()
    src = torch.randint(3, model.config.src_vocab_size, (2, 7))
    n = 9
    step, rewind, tokens, cache = bench_decode.static_greedy(model, src, n, fast)
    for _ in range(2):   # twice: rewind starts the loop over
        rewind()
        for _ in range(n):
            step()
            if replay:   # a replay runs the kernels only: the Python-side length stays put
                cache.length = 0
        assert torch.equal(tokens, greedy_decode(model, src, n, bench_decode.BOS))
