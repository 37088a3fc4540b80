"""The fast paths the package runs equal the explicit ones the book teaches (issue 15):
FastDecoder's decoding step against decode_step, greedy and beam search both ways, and
train_step's projection of the target positions only against the full logits, and
packed_decoder_states (the position-wise layers on real tokens only) against decoder_states."""

import warnings
from functools import partial

import pytest
import torch

from transformer_lit.data import Batch
from transformer_lit.fast import FastStepFallback, fast_train_step, training_step_for
from transformer_lit.fast_decoding import FastDecoder, decoder_for, fast_decoder, fast_step, use_onednn
from transformer_lit.inference import beam_search, decode_step, greedy_decode, new_cache
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.fast import from_grid, packed_decoder_states, grid_rows, to_grid
from transformer_lit.recipe import TrainSettings
from transformer_lit.training import FitOptions, StepOptions, make_optimizer, train_step

CONFIGS = [
    dict(norm_first=False),
    dict(norm_first=True),
    dict(norm_first=True, share_embeddings=True, tgt_vocab_size=50),
]


def model_and_source(seed: int, **config) -> tuple[Transformer, torch.Tensor]:
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig.tiny(**config)).eval()
    src = torch.randint(3, 50, (4, 9))
    src[1, 6:] = 0  # padded rows: the cross-attention mask is used
    src[3, 3:] = 0
    return model, src


ONEDNN = torch.backends.mkldnn.is_available() and hasattr(
    torch.ops.mkldnn, "_linear_pointwise"
)
NO_ONEDNN = pytest.mark.skipif(not ONEDNN, reason="PyTorch built without oneDNN")
KERNELS = [False, pytest.param(True, marks=NO_ONEDNN)]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("onednn", KERNELS)
def test_fast_step_equals_decode_step(config, static, onednn):
    model, src = model_and_source(0, **config)
    tgt = torch.randint(3, model.config.tgt_vocab_size, (4, 12))
    memory = model.encode(src)
    explicit, fast = (new_cache(model, memory, src, 12, static=static) for _ in range(2))
    fd = FastDecoder(model, rows=4, onednn=onednn)
    assert fd.onednn == onednn
    for t in range(12):
        torch.testing.assert_close(
            fast_step(fd, tgt[:, t : t + 1], fast),
            decode_step(model, tgt[:, t : t + 1], explicit),
        )
    assert fast.length == explicit.length == 12
    torch.testing.assert_close(fast.self_k, explicit.self_k)
    torch.testing.assert_close(fast.self_v, explicit.self_v)
    with pytest.raises(ValueError, match="cache is full"):
        fast_step(fd, tgt[:, :1], fast)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_fast_equals_explicit(config, seed):
    model, src = model_and_source(seed, **config)
    for eos_id in (None, 7):
        fast = greedy_decode(model, src, 20, bos_id=1, eos_id=eos_id, decoder=fast_decoder)
        explicit = greedy_decode(model, src, 20, bos_id=1, eos_id=eos_id)
        assert torch.equal(fast, explicit), (seed, eos_id)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("beam", [2, 4])
def test_beam_fast_equals_explicit(config, beam):
    model, src = model_and_source(3, **config)
    budgets = torch.tensor([15, 6, 15, 9])  # one budget per sentence
    rows = []   # generate asks for a step of B * beam rows
    decoder = lambda m, n: rows.append(n) or fast_decoder(m, n)
    fast = beam_search(model, src, beam, budgets, bos_id=1, eos_id=2, decoder=decoder)
    assert rows == [src.shape[0] * beam]
    explicit = beam_search(model, src, beam, budgets, bos_id=1, eos_id=2)
    assert len(fast) == len(explicit) == 4
    assert all(torch.equal(a, b) for a, b in zip(fast, explicit))


@NO_ONEDNN
@pytest.mark.parametrize("faster", ["decode", "logits"])
def test_the_output_projection_is_chosen_on_its_own(monkeypatch, faster):
    """The wide output projection takes oneDNN where its own rule ('logits') says so, the
    layers where theirs ('decode') does; onednn=True/False sets both."""
    import transformer_lit.fast_decoding as fast_module
    monkeypatch.setattr(fast_module, "onednn_faster", lambda kind: kind == faster)
    model, src = model_and_source(0)
    fd = FastDecoder(model, rows=8)
    assert (fd.onednn, fd.project.onednn) == (faster == "decode", faster == "logits")
    for forced in (False, True):
        fd = FastDecoder(model, rows=8, onednn=forced)
        assert fd.onednn == fd.project.onednn == forced
    decoder = lambda m, rows: partial(fast_step, FastDecoder(m, rows=rows))
    fast = greedy_decode(model, src, 12, bos_id=1, decoder=decoder)
    assert torch.equal(fast, greedy_decode(model, src, 12, bos_id=1))


@NO_ONEDNN
def test_onednn_is_chosen_from_four_rows_in_float32_on_cpu(monkeypatch):
    import transformer_lit.fast_decoding as fast_module
    monkeypatch.setattr(fast_module, "onednn_faster", lambda kind: True)
    model, src = model_and_source(0)
    chosen = [use_onednn(model, rows) for rows in (1, 3, 4, 32)]
    assert chosen == [False, False, True, True]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not use_onednn(model, 8)
    assert not use_onednn(model.double(), 8)
    # oneDNN at one row (the default would not choose it) still computes the same
    model, src = model_and_source(1)
    memory = model.encode(src[:1])
    explicit, fast = (new_cache(model, memory, src[:1], 6) for _ in range(2))
    fd = FastDecoder(model, rows=1, onednn=True)
    for t in range(6):
        token = torch.full((1, 1), 3 + t)
        torch.testing.assert_close(
            fast_step(fd, token, fast), decode_step(model, token, explicit)
        )


@pytest.mark.parametrize("rows", [-1, 2.0, True, None])
def test_fast_decoder_rejects_bad_rows(rows):
    model, _ = model_and_source(0)
    with pytest.raises(ValueError, match="rows must be an int >= 0"):
        FastDecoder(model, rows=rows)


def test_fast_decoder_needs_eval_mode_and_decoder_for_chooses_it():
    model, src = model_and_source(0)
    assert decoder_for(model) is fast_decoder   # eval mode: the fast step
    model.train()
    with pytest.raises(ValueError, match="model.eval"):
        FastDecoder(model)
    assert decoder_for(model) is None   # training mode: the plain step, which applies dropout
    assert training_step_for(model) is fast_train_step


def test_translate_takes_the_decoder_it_is_given(monkeypatch):
    "translate(..., decoder=fast_decoder) steps through fast_step only, and writes what the plain step writes."
    import transformer_lit.fast_decoding as fast_module
    from transformer_lit.data import train_tokenizer
    from transformer_lit.inference import translate
    english = ["In the beginning God created the heavens and the earth.", "The earth was formless and empty."]
    tokenizer = train_tokenizer(english + ["Au commencement, Dieu créa les cieux et la terre."], vocab_size=70)
    torch.manual_seed(0)
    V = tokenizer.vocab_size
    model = Transformer(TransformerConfig.tiny(V, V, share_embeddings=True)).eval()
    calls = []
    real = fast_module.fast_step
    monkeypatch.setattr(fast_module, "fast_step", lambda *a: calls.append(1) or real(*a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # a random model never ends: its outputs are cut
        for beam in (1, 3):
            calls.clear()
            fast = translate(model, tokenizer, english, beam_size=beam, decoder=decoder_for(model))
            assert calls, beam
            n = len(calls)
            assert fast == translate(model, tokenizer, english, beam_size=beam) and len(calls) == n


def test_reorder_without_cross_keeps_the_cross_half():
    model, src = model_and_source(0)
    cache = new_cache(model, model.encode(src), src, 4)
    cross_k, mask = cache.cross_k, cache.memory_mask
    cache.reorder(torch.tensor([1, 0, 3, 2]), cross=False)
    assert cache.cross_k is cross_k and cache.memory_mask is mask
    cache.reorder(torch.tensor([1, 0, 3, 2]))
    torch.testing.assert_close(cache.cross_k, cross_k[:, [1, 0, 3, 2]])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_train_step_projects_only_target_positions(norm_first, smoothing):
    "Same loss, gradients and updated weights as projecting every position."
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, 50, (5, 8), generator=g)
    tgt = torch.randint(3, 60, (5, 7), generator=g)
    src[2, 5:] = 0
    tgt[1, 3:] = 0  # target padding: positions the fast path skips
    tgt[4, 5:] = 0
    batch = Batch(src, tgt, tgt.roll(-1, 1).masked_fill(tgt == 0, 0), torch.arange(5))
    settings = TrainSettings(max_steps=1, label_smoothing=smoothing, clip_norm=1.0)
    out = {}
    for name in ("projected", "every"):
        torch.manual_seed(1)
        model = Transformer(TransformerConfig.tiny(norm_first=norm_first, dropout=0.0))
        optimizer = make_optimizer(model, settings)
        step = fast_train_step if name == "projected" else train_step  # fast: targets only
        terms = step(model, batch, optimizer, 1e-3, settings)
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        out[name] = terms, grads, model.state_dict()
    torch.testing.assert_close(out["projected"][0].loss, out["every"][0].loss)
    torch.testing.assert_close(out["projected"][0].nll, out["every"][0].nll)
    for n, grad in out["projected"][1].items():
        torch.testing.assert_close(grad, out["every"][1][n], rtol=1e-4, atol=1e-6)
    for n, w in out["projected"][2].items():
        if n.endswith("k_proj.bias"):
            # its true gradient is zero (it adds the same q.b to every score of a query,
            # which softmax ignores), so both hold rounding noise, and Adam's normalised
            # step turns noise of either sign into a full step: compare the gradient only
            assert out["projected"][1][n].abs().max() < 1e-7
            continue
        torch.testing.assert_close(w, out["every"][2][n], rtol=1e-4, atol=1e-6)


def padded_batch(seed: int, layout: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    "src (5, 9), tgt_in (5, 7) and keep (5, 7) with padding laid out as named."
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 50, (5, 9), generator=g)
    tgt = torch.randint(3, 50, (5, 7), generator=g)
    keep = torch.ones(5, 7, dtype=torch.bool)
    if layout != "full":
        src[0, 4:] = 0
        src[3, 7:] = 0
        keep[1, 3:] = keep[4, 6:] = False
        tgt[~keep] = 0
    if layout == "gaps":  # kept positions anywhere, padding inside a source row
        keep &= torch.rand(keep.shape, generator=g) < 0.6
        src[2, 2] = 0
    if layout == "empty":  # a source row of padding only, a target row with nothing kept
        src[2] = 0
        keep[0] = False
    return src, tgt, keep


LAYOUTS = ["full", "padded", "gaps", "empty"]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_packed_decoder_states_equal_decoder_states(config, layout):
    "Float64, seeded: the packed layout computes the same function, values and gradients."
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(**config)).double().eval()
    src, tgt, keep = padded_batch(1, layout)
    weights = torch.randn(int(keep.sum()), model.config.d_model, dtype=torch.float64)
    out = {}
    for name in ("packed", "explicit"):
        model.zero_grad(set_to_none=True)
        if name == "packed":
            h = packed_decoder_states(model, src, tgt, keep)
        else:
            h = model.decoder_states(tgt, model.encode(src), src)[keep]
        (h * weights).sum().backward()
        grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        out[name] = h.detach(), grads
    torch.testing.assert_close(out["packed"][0], out["explicit"][0], rtol=1e-12, atol=1e-12)
    assert out["packed"][1].keys() == out["explicit"][1].keys()
    for n, grad in out["packed"][1].items():
        torch.testing.assert_close(grad, out["explicit"][1][n], rtol=1e-10, atol=1e-12)


def test_rows_round_trip_and_shortcut():
    "to_grid puts rows back where from_grid took them, zeros elsewhere; a full grid is a view."
    compute = torch.tensor([[True, True, False], [True, False, False]])
    at = grid_rows(compute)
    assert at.index.tolist() == [0, 1, 3] and (at.B, at.T) == (2, 3)
    rows = torch.arange(6.0).view(3, 2)
    grid = to_grid(rows, at)
    assert grid.shape == (2, 3, 2) and grid[~compute].eq(0).all()
    assert torch.equal(from_grid(grid, at), rows)
    full = grid_rows(torch.ones(2, 3, dtype=torch.bool))
    assert full.index is None
    rows = torch.arange(12.0).view(6, 2)
    assert to_grid(rows, full).data_ptr() == rows.data_ptr()


def test_packed_decoder_states_rejects_bad_inputs():
    model = Transformer(TransformerConfig.tiny()).eval()
    src, tgt, keep = padded_batch(0, "padded")
    for bad_keep in (keep.long(), keep[:, :-1]):
        with pytest.raises(ValueError, match="keep must be a bool tensor"):
            packed_decoder_states(model, src, tgt, bad_keep)
    with pytest.raises(ValueError, match="same batch size"):
        packed_decoder_states(model, src[:3], tgt, keep)
    with pytest.raises(TypeError, match="src"):
        packed_decoder_states(model, src.float(), tgt, keep)
    with pytest.raises(ValueError, match="tgt_in"):
        packed_decoder_states(model, src, tgt[0], keep)


def test_packed_decoder_states_under_bf16_autocast():
    "Under autocast (as train_step on a GPU) the packed rows keep the products' dtype and agree."
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny()).eval()
    src, tgt, keep = padded_batch(2, "padded")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        packed = packed_decoder_states(model, src, tgt, keep)
        explicit = model.decoder_states(tgt, model.encode(src), src)[keep]
    assert packed.dtype == explicit.dtype
    torch.testing.assert_close(packed.float(), explicit.float(), rtol=0.05, atol=0.05)


@pytest.mark.parametrize("fast", [False, True])
def test_static_step_reads_only_device_state(fast):
    """A CUDA graph replays a step's kernels without its Python: on a static cache the step
    must take the position from the cache's device tensor, not from cache.length. Emulated
    on the CPU by freezing cache.length at 0 while the device position advances."""
    model, src = model_and_source(3)
    tgt = torch.randint(3, model.config.tgt_vocab_size, (4, 10))
    memory = model.encode(src)
    frozen, explicit = (new_cache(model, memory, src, 10, static=True) for _ in range(2))
    fd = FastDecoder(model, rows=4, onednn=False)
    for t in range(10):
        tokens = tgt[:, t : t + 1]
        got = fast_step(fd, tokens, frozen) if fast else decode_step(model, tokens, frozen)
        frozen.length = 0  # what a replay leaves: only cache.position moved on
        want = decode_step(model, tokens, explicit)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert int(frozen.position) == 10


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_fast_and_plain_steps_agree_in_float64(norm_first, smoothing):
    "fast_train_step and the plain train_step: equal loss, NLL and gradients in float64."
    g = torch.Generator().manual_seed(3)
    src = torch.randint(3, 50, (4, 9), generator=g)
    tgt = torch.randint(3, 60, (4, 8), generator=g)
    src[1, 4:] = 0
    tgt[0, 2:] = 0
    tgt[3, 6:] = 0
    batch = Batch(src, tgt, tgt.roll(-1, 1).masked_fill(tgt == 0, 0), torch.arange(4))
    settings = TrainSettings(max_steps=1, label_smoothing=smoothing, clip_norm=None)
    out = {}
    for fast in (False, True):
        torch.manual_seed(2)
        model = Transformer(TransformerConfig.tiny(norm_first=norm_first, dropout=0.0))
        model = model.double()
        step = fast_train_step if fast else train_step
        terms = step(model, batch, make_optimizer(model, settings), 0.0, settings)
        out[fast] = terms, {n: p.grad for n, p in model.named_parameters()}
    assert out[True][0].loss.dtype == torch.float64
    torch.testing.assert_close(out[True][0].loss, out[False][0].loss, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out[True][0].nll, out[False][0].nll, rtol=1e-12, atol=1e-12)
    for n, grad in out[False][1].items():
        torch.testing.assert_close(out[True][1][n], grad, rtol=1e-9, atol=1e-12)


def test_fit_takes_the_step_it_is_given(monkeypatch):
    "FitOptions(step=fast_train_step) calls fast_loss at every step, also with a parallel that hands back the model;"
    " fit's default (train_step) never does; with a real wrapper the fast step falls back, visibly."
    import transformer_lit.fast as fast_module
    import transformer_lit.training as training
    calls = []
    real = fast_module.fast_loss
    monkeypatch.setattr(fast_module, "fast_loss", lambda *a, **k: calls.append(1) or real(*a, **k))
    from transformer_lit.data import EncodedPair
    pairs = [EncodedPair(i, [3 + i % 7, 4, 5], [6, 7 + i % 5]) for i in range(16)]
    wrapper = lambda m: (lambda src, tgt: m(src, tgt))   # stands for DDP: called as the model is
    for kwargs, expected in (({"step": fast_train_step}, 2), ({}, 0),
                             ({"step": fast_train_step, "parallel": lambda m: m}, 2),
                             ({"step": fast_train_step, "parallel": wrapper}, 0)):
        calls.clear()
        torch.manual_seed(0)
        model = Transformer(TransformerConfig.tiny())
        settings = TrainSettings(max_steps=2, max_tokens=64, eval_every=1000)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            training.fit(model, make_optimizer(model, settings), (pairs, pairs), settings,
                         options=FitOptions(progress=False, log=None, **kwargs))
        assert len(calls) == expected, kwargs
        fell_back = [w for w in caught if w.category is FastStepFallback]
        assert bool(fell_back) == (kwargs.get("parallel") is wrapper), kwargs


def test_training_step_for_is_the_one_place_that_falls_back(monkeypatch):
    """training_step_for(model, wrapped) chooses the plain step for a model that fit wraps (DDP,
    torch.compile); fast_train_step handed a wrapper anyway warns and takes what it chooses."""
    import transformer_lit.fast as fast_module
    model, _ = model_and_source(0)
    assert training_step_for(model) is fast_train_step
    assert training_step_for(model, wrapped=True) is train_step
    asked = []

    def spy(model, wrapped=False):
        asked.append(wrapped)
        return train_step
    monkeypatch.setattr(fast_module, "training_step_for", spy)
    settings = TrainSettings(max_steps=1, max_tokens=64)
    batch = Batch(torch.randint(3, 50, (2, 5)), torch.randint(3, 50, (2, 4)), torch.randint(3, 50, (2, 4)),
                  torch.arange(2))
    with pytest.warns(FastStepFallback):
        fast_train_step(model.train(), batch, make_optimizer(model, settings), 1e-3, settings,
                        StepOptions(forward=lambda src, tgt: model(src, tgt)))
    assert asked == [True]


def test_two_pass_argmax_is_argmax():
    "Chapter 26's argmax in two passes: argmax's index, first of equal maxima, NaN and -inf rows alike."
    from transformer_lit.fast_decoding import ARGMAX_BLOCK, two_pass_argmax
    g = torch.Generator().manual_seed(0)
    for rows, width, dtype in ((32, 8000, torch.float32), (4, 4000, torch.float32), (7, 128, torch.float32),
                               (32, 8000, torch.bfloat16), (32, 8001, torch.float32), (3, 8000, torch.float32)):
        logits = torch.randn(rows, width, generator=g).to(dtype)
        logits[0, [5, width - 2]] = logits[0].max() + 1         # equal maxima in two blocks
        logits[1, [ARGMAX_BLOCK + 1, ARGMAX_BLOCK + 3]] = logits[1].max() + 1   # in one block
        logits[2, width // 2] = float("nan")
        if rows > 3:
            logits[3] = float("-inf")
        assert torch.equal(two_pass_argmax(logits), logits.argmax(-1)), (rows, width, dtype)
    wide = torch.randn(64, 8000, generator=g)
    assert torch.equal(two_pass_argmax(wide.t().contiguous().t()), wide.argmax(-1))   # strided rows


def test_two_pass_argmax_takes_two_passes_where_it_is_faster():
    "From TWO_PASS_MIN_ROWS rows of a width in whole blocks on a CPU it reduces by amax; else one argmax."
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformer_lit.fast_decoding import TWO_PASS_MIN_ROWS, two_pass_argmax

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    for rows, width, two in ((TWO_PASS_MIN_ROWS, 8000, True), (32, 4000, True),
                             (TWO_PASS_MIN_ROWS - 1, 8000, False), (32, 8001, False), (32, 32, True)):
        with Ops() as ops:
            two_pass_argmax(torch.randn(rows, width))
        assert ("amax" in ops.names) == two, (rows, width, ops.names)


def test_greedy_decode_with_two_pass_argmax_writes_the_same_tokens():
    "The command line's route (fast step, two-pass argmax) against the plain one, at 8 rows, 128 tokens."
    from transformer_lit.fast_decoding import two_pass_argmax
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(128, 128)).eval()
    src = torch.randint(3, 128, (8, 9))
    src[2, 6:] = 0
    plain = greedy_decode(model, src, 20, 1, 2)
    picked = []
    fast = greedy_decode(model, src, 20, 1, 2, decoder=fast_decoder,
                         pick=lambda logits: picked.append(1) or two_pass_argmax(logits))
    assert torch.equal(fast, plain) and len(picked) == fast.shape[1] - 1
