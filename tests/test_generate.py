"""generate(model, src, GenerationConfig), the one way to decode (issue 56, item 5): the same
tokens as the loops it replaced (greedy_decode's cached loop, chapter 09's plain loop, the
benchmarks' no-repeat loop), beam 1 = greedy, cached = uncached = static, logits processors
that see the tokens written so far in greedy and beam search, chapter 26's fast step = the
plain one through it; no public function takes more than 6 parameters; decoding leaves the
caller's model in its mode (house rule 26)."""
from __future__ import annotations

import importlib
import inspect
import threading
from functools import partial

import pytest
import torch

from test_api import public_api
from transformer_lit.data import BOS_ID, EOS_ID, train_tokenizer
from transformer_lit.fast_decoding import FastDecoder, fast_decoder, fast_step, two_pass_argmax
from transformer_lit.inference import (GenerationConfig, beam_search, decode_step, generate, greedy_decode,
                                       new_cache, no_repeat_ngram, translate)
from transformer_lit.model import Transformer, TransformerConfig, greedy_decode_uncached
from transformer_lit.validate import ArgumentError

BOS, EOS = 1, 2


def tiny(seed: int, **config) -> tuple[Transformer, torch.Tensor]:
    "A random tiny model (eval mode) and a padded source batch (4, 9)."
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig.tiny(**config)).eval()
    src = torch.randint(3, 50, (4, 9))
    src[1, 6:] = 0
    src[3, 3:] = 0
    return model, src


@torch.no_grad()
def old_greedy_decode(model, src, max_new_tokens, bos_id, eos_id=None, step=None, pick=None):
    "greedy_decode's cached loop as it was before generate (commit ae947e4), for comparison."
    step = step or partial(decode_step, model)
    B, pad = src.shape[0], model.config.pad_id
    out = torch.full((B, 1 + max_new_tokens), pad, dtype=torch.long)
    out[:, 0] = bos_id
    cache = new_cache(model, model.encode(src), src, max(max_new_tokens, 1))
    done = torch.zeros(B, dtype=torch.bool)
    for t in range(max_new_tokens):
        logits = step(out[:, t : t + 1], cache)
        next_id = logits.argmax(-1) if pick is None else pick(logits)
        out[:, t + 1] = next_id.masked_fill(done, pad)
        if eos_id is not None:
            done |= next_id == eos_id
            if done.all():
                return out[:, : t + 2]
    return out


@torch.no_grad()
def old_greedy_no_repeat(model, src, max_new_tokens: int, n: int):
    "benchmarks/no_repeat.py's loop before generate: greedy that never writes an n-gram twice."
    memory = model.encode(src)
    B, pad = src.shape[0], model.config.pad_id
    out = torch.full((B, 1 + max_new_tokens), pad, dtype=torch.long)
    out[:, 0] = BOS
    cache = new_cache(model, memory, src, max(max_new_tokens, 1))
    done = torch.zeros(B, dtype=torch.bool)
    rows = [[BOS] for _ in range(B)]
    seen: list[dict[tuple[int, ...], set[int]]] = [{} for _ in range(B)]
    for t in range(max_new_tokens):
        logits = decode_step(model, out[:, t : t + 1], cache)
        for b in range(B):
            for banned in seen[b].get(tuple(rows[b][len(rows[b]) - n + 1 :]), ()):
                logits[b, banned] = float("-inf")
        next_id = logits.argmax(-1)
        out[:, t + 1] = next_id.masked_fill(done, pad)
        for b in range(B):
            if not done[b] and len(rows[b]) >= n - 1:
                key = tuple(rows[b][len(rows[b]) - n + 1 :])
                seen[b].setdefault(key, set()).add(int(next_id[b]))
            rows[b].append(int(next_id[b]))
        done |= next_id == EOS
        if done.all():
            return out[:, : t + 2]
    return out


def ngrams(row: torch.Tensor, n: int, eos: int = EOS) -> list[tuple[int, ...]]:
    "Every n-gram of a row (bos first) up to and including its first eos."
    ids = row.tolist()
    ids = ids[: ids.index(eos, 1) + 1] if eos in ids[1:] else ids
    return [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]


# ------------------------------------------------------------------ the same tokens as before
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("norm_first", [False, True])
def test_generate_greedy_writes_the_old_greedy_decode_tokens(seed, norm_first):
    model, src = tiny(seed, norm_first=norm_first)
    for eos_id in (None, 7):
        old = old_greedy_decode(model, src, 20, BOS, eos_id)
        config = GenerationConfig(20, bos_id=BOS, eos_id=eos_id)
        assert torch.equal(generate(model, src, config), old), (seed, eos_id)
        assert torch.equal(greedy_decode(model, src, 20, BOS, eos_id), old)
        # and the uncached route is chapter 09's plain loop, token for token
        plain = generate(model, src, config, use_cache=False)
        assert torch.equal(plain, greedy_decode_uncached(model, src, 20, BOS, eos_id))
        assert torch.equal(plain, old)


@pytest.mark.parametrize("beam", [1, 2, 4])
@pytest.mark.parametrize("eos_id", [EOS, 7])
def test_cached_uncached_and_static_write_the_same_tokens(beam, eos_id):
    model, src = tiny(3, tgt_vocab_size=12)
    config = GenerationConfig(15, bos_id=BOS, eos_id=eos_id, beam_size=beam)
    cached = generate(model, src, config)
    assert torch.equal(generate(model, src, config, use_cache=False), cached)
    assert torch.equal(generate(model, src, config, static_cache=True), cached)
    assert cached.shape[0] == src.shape[0] and bool((cached[:, 0] == BOS).all())


def test_beam_search_keeps_its_list_of_hypotheses():
    "beam_search, the thin wrapper: per sentence the best hypothesis up to its own end."
    model, src = tiny(4, tgt_vocab_size=12)
    hyps = beam_search(model, src, 3, 12, bos_id=BOS, eos_id=EOS)
    rows = generate(model, src, max_new_tokens=12, bos_id=BOS, eos_id=EOS, beam_size=3)
    assert len(hyps) == 4
    for hyp, row in zip(hyps, rows):
        assert torch.equal(row[: len(hyp)], hyp) and bool((row[len(hyp) :] == 0).all())


def test_one_beam_is_greedy_in_the_beam_loop_itself():
    "generate sends beam_size 1 to the greedy loop; the beam loop with k = 1 writes the same."
    from transformer_lit.inference import _beam, _Route
    for seed in range(3):
        model, src = tiny(seed, tgt_vocab_size=12)
        config = GenerationConfig(20, bos_id=BOS, eos_id=EOS)
        beams, _ = _beam(_Route(model, src, config), config)
        assert torch.equal(beams, generate(model, src, config)), seed
        assert torch.equal(beams, old_greedy_decode(model, src, 20, BOS, EOS))


def test_per_sentence_budgets_in_greedy_decoding_cut_each_row():
    "A (B,) budget: each row is the int-budget row cut at its own budget, pad after."
    model, src = tiny(5)
    budget = torch.tensor([9, 3, 0, 6])
    rows = generate(model, src, max_new_tokens=budget, bos_id=BOS, eos_id=None)
    full = generate(model, src, max_new_tokens=9, bos_id=BOS, eos_id=None)
    assert rows.shape == full.shape
    for row, whole, n in zip(rows, full, budget.tolist()):
        assert torch.equal(row[: 1 + n], whole[: 1 + n]) and bool((row[1 + n :] == 0).all())


# ------------------------------------------------------------------------- logits processors
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_no_repeat_processor_is_the_benchmarks_no_repeat_loop(n):
    for seed in range(3):
        model, src = tiny(seed, tgt_vocab_size=12)
        old = old_greedy_no_repeat(model, src, 16, n)
        new = generate(model, src, max_new_tokens=16, bos_id=BOS, eos_id=EOS,
                       processors=(no_repeat_ngram(n),))
        assert torch.equal(new, old), (seed, n)


@pytest.mark.parametrize("beam", [1, 3])
def test_processors_see_the_tokens_written_so_far_in_greedy_and_beam(beam):
    model, src = tiny(6, tgt_vocab_size=12)
    seen = []

    def record(tokens: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        seen.append(tokens.clone())
        return logits

    plain = generate(model, src, max_new_tokens=12, bos_id=BOS, eos_id=EOS, beam_size=beam)
    out = generate(model, src, max_new_tokens=12, bos_id=BOS, eos_id=EOS, beam_size=beam,
                   processors=[record])   # a list is taken as a tuple
    assert torch.equal(out, plain)   # a processor that changes nothing changes nothing
    assert [s.shape for s in seen] == [(4 * beam, t + 1) for t in range(len(seen))]
    assert all(bool((s[:, 0] == BOS).all()) for s in seen)
    if beam == 1:   # the rows the greedy loop has written, step by step
        assert all(torch.equal(s, out[:, : s.shape[1]]) for s in seen[: out.shape[1]])
    # the rows are the beams: every row of step t + 1 extends a row of step t
    for before, after in zip(seen, seen[1:]):
        assert all(any(torch.equal(a[:-1], b) for b in before) for a in after)
    # no beam's output repeats a bigram under no_repeat_ngram(2), though the plain one does
    banned = generate(model, src, max_new_tokens=12, bos_id=BOS, eos_id=EOS, beam_size=beam,
                      processors=(no_repeat_ngram(2),))
    assert any(len(set(ngrams(r, 2))) < len(ngrams(r, 2)) for r in plain)
    assert all(len(set(ngrams(r, 2))) == len(ngrams(r, 2)) for r in banned)


def test_processors_run_in_order_on_the_logits():
    model, src = tiny(7)
    calls = []
    first = lambda tokens, logits: calls.append("first") or logits
    second = lambda tokens, logits: calls.append("second") or logits
    generate(model, src, max_new_tokens=2, bos_id=BOS, eos_id=None, processors=(first, second))
    assert calls == ["first", "second"] * 2


# ------------------------------------------------------------ the fast step, through generate
@pytest.mark.parametrize("beam", [1, 2, 4])
@pytest.mark.parametrize("static", [False, True])
def test_the_fast_decoder_writes_the_plain_tokens_through_generate(beam, static):
    model, src = tiny(8, tgt_vocab_size=60)
    config = GenerationConfig(15, bos_id=BOS, eos_id=7, beam_size=beam, static_cache=static)
    made = []

    def decoder(model, rows):
        made.append(rows)
        return fast_decoder(model, rows)

    assert torch.equal(generate(model, src, config, decoder=decoder), generate(model, src, config))
    assert made == [4 * beam]   # one step, made for B * beam_size rows
    if beam == 1:
        picked = generate(model, src, config, decoder=decoder, pick=two_pass_argmax)
        assert torch.equal(picked, generate(model, src, config))


def test_a_step_factory_of_partial_fast_step_is_a_decoder():
    model, src = tiny(9)
    decoder = lambda model, rows: partial(fast_step, FastDecoder(model, rows))
    assert torch.equal(greedy_decode(model, src, 12, BOS, decoder=decoder),
                       greedy_decode(model, src, 12, BOS))


# ------------------------------------------------------------------------ the configuration
def test_options_are_the_config_fields_by_name_and_others_are_refused():
    model, src = tiny(10)
    config = GenerationConfig(8, bos_id=BOS, eos_id=EOS)
    assert torch.equal(generate(model, src, config, beam_size=2),
                       generate(model, src, GenerationConfig(8, BOS, EOS, beam_size=2)))
    with pytest.raises(ArgumentError, match=r"^use_cach is not a GenerationConfig field; the fields are "
                                            r"max_new_tokens, bos_id"):
        generate(model, src, config, use_cach=False)
    with pytest.raises(ArgumentError, match=r"^config must be a GenerationConfig, got dict"):
        generate(model, src, {"beam_size": 2})
    with pytest.raises(ArgumentError, match=r"^greedy_decode keeps one hypothesis"):
        greedy_decode(model, src, 5, BOS, beam_size=2)


@pytest.mark.parametrize("field, value, message", [
    ("max_new_tokens", -1, r"^max_new_tokens must be"),
    ("max_new_tokens", torch.tensor([[3]]), r"^max_new_tokens must have shape \(B,\)"),
    ("max_new_tokens", torch.tensor([3, -1]), r"^max_new_tokens must be >= 0, got \[3, -1\]"),
    ("bos_id", "1", r"^bos_id must be"),
    ("eos_id", 2.0, r"^eos_id must be"),
    ("use_cache", "no", r"^use_cache must be"),
    ("static_cache", 1, r"^static_cache must be"),
    ("decoder", "fast", r"^decoder must be a function or None, got str"),
    ("pick", 3, r"^pick must be a function or None, got int"),
    ("processors", no_repeat_ngram(2), r"^processors must be a tuple of functions"),
    ("processors", (None,), r"^processors must be a tuple of functions"),
])
def test_a_bad_field_is_refused_by_name_when_the_config_is_made(field, value, message):
    with pytest.raises(ArgumentError, match=message):
        GenerationConfig(**{field: value})


def test_fields_that_need_the_model_are_checked_against_it():
    model, src = tiny(11)   # V = 60, max_len = 64 (tiny)
    for options, message in [
        (dict(use_cache=False, static_cache=True), r"^static_cache=True is a mode of the cache"),
        (dict(beam_size=61), r"^beam_size must be"),
        (dict(beam_size=2, eos_id=None), r"^eos_id must be a token id: beam search"),
        (dict(beam_size=2, length_penalty=-1.0), r"^length_penalty must be"),
        (dict(bos_id=60), r"^bos_id must be"),
        (dict(max_new_tokens=model.config.max_len + 1), r"^max_new_tokens = \d+ > config.max_len"),
        (dict(max_new_tokens=torch.tensor([3, 4])), r"^max_new_tokens as a tensor must be \(4,\)"),
    ]:
        with pytest.raises(ArgumentError, match=message):
            generate(model, src, **{"max_new_tokens": 5, **options})


# ---------------------------------------------------------- the caller's model keeps its mode
def test_decoding_refuses_a_model_in_training_mode_and_leaves_it_so():
    """evaluation_mode switched a training model to eval for the length of a call, so a
    thread that trained it meanwhile lost its dropout. Now every decoding entry refuses it."""
    model, src = tiny(12)
    tokenizer = train_tokenizer(["In the beginning God created the heaven and the earth."] * 20
                                + ["Au commencement, Dieu créa les cieux et la terre."] * 20, vocab_size=60)
    model.train()
    calls = [lambda: generate(model, src, max_new_tokens=3), lambda: greedy_decode(model, src, 3, BOS),
             lambda: beam_search(model, src, 2, 3), lambda: translate(model, tokenizer, ["Light."])]
    for call in calls:
        with pytest.raises(ArgumentError, match=r"^model is in training mode \(dropout on\): call "
                                                r"model\.eval\(\) before decoding$"):
            call()
        assert all(m.training for m in model.modules())


def test_a_thread_that_trains_keeps_its_dropout_while_another_translates():
    "The old context manager: thread A translating switched the model B trains to eval."
    model, src = tiny(13)
    model.train()
    ready, stop, modes = threading.Event(), threading.Event(), []

    def trainer():
        ready.set()
        while not stop.is_set():
            modes.append(model.training)

    thread = threading.Thread(target=trainer)
    thread.start()
    assert ready.wait(10)
    for _ in range(20):
        with pytest.raises(ArgumentError):
            generate(model, src, max_new_tokens=4)
    stop.set()
    thread.join(10)
    assert modes and all(modes)


# --------------------------------------------------------------- the parameter-count rule
def test_no_public_function_takes_more_than_six_parameters():
    """Every public function and public method of a public class (dataclass constructors
    are configs, and exempt) takes at most 6 parameters, self and cls not counted; no
    exception (fit took 14, train_step and fast_train_step 8 before FitOptions and
    StepOptions held the rest)."""
    over = {}
    for entry in public_api():
        module, name = entry.rsplit(".", 1)
        obj = getattr(importlib.import_module(f"transformer_lit.{module}".rstrip(".")), name)
        found = [(entry, obj)] if inspect.isfunction(obj) else []
        if inspect.isclass(obj) and obj.__module__.startswith("transformer_lit"):
            for key, value in vars(obj).items():
                if key.startswith("_") and not (key == "__init__" and not hasattr(obj, "__dataclass_fields__")):
                    continue
                value = getattr(value, "__func__", value)
                if inspect.isfunction(value):
                    found.append((f"{entry}.{key}", value))
        for where, fn in found:
            count = len([p for p in inspect.signature(fn).parameters if p not in ("self", "cls")])
            if count > 6:
                over[where] = count
    assert over == {}


def test_fit_and_the_steps_refuse_the_old_calls():
    """fit(model, optimizer, train, valid, settings) of the old signature, the options in
    the state's place, a loss given to the fast step (which computes its own): one
    ArgumentError naming what is expected."""
    from transformer_lit.data import EncodedPair, collate
    from transformer_lit.fast import fast_train_step
    from transformer_lit.recipe import TrainSettings
    from transformer_lit.training import FitOptions, StepOptions, fit, make_optimizer

    model, _ = tiny(0)
    settings = TrainSettings(max_steps=1, max_tokens=64)
    pairs = [EncodedPair(i, [3 + i % 7, 4, 5], [6, 7 + i % 5]) for i in range(4)]
    optimizer = make_optimizer(model, settings)
    for data in (pairs, pairs[:2], (pairs, pairs, pairs), (pairs, [])):
        with pytest.raises(ArgumentError, match=r"pairs: data = \(train, valid\), neither empty"):
            fit(model, optimizer, data, settings)
    with pytest.raises(ArgumentError, match="state must be a TrainState, got FitOptions"):
        fit(model, optimizer, (pairs, pairs), settings, FitOptions(progress=False))
    with pytest.raises(ArgumentError, match="fast_train_step computes the loss"):
        fast_train_step(model.train(), collate(pairs), optimizer, 1e-3, settings,
                        StepOptions(loss=lambda m, b, s: (0.0, 0.0)))


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_the_static_cache_reads_the_models_own_position_table(positional):
    "A learned table has no .pe: the static step read model.pos.pe and failed (AttributeError)."
    model, src = tiny(14, positional=positional)
    for beam in (1, 2):
        config = GenerationConfig(10, bos_id=BOS, eos_id=EOS, beam_size=beam)
        assert torch.equal(generate(model, src, config, static_cache=True), generate(model, src, config))


def test_a_length_penalty_that_cannot_rank_is_refused():
    """Issue 61: --length-penalty 100 or 1e308 overflowed ((5 + T) / 6) ** alpha and the
    ranking was lost ("Le", "Et le roi fut très-grande colère"): refused above 10."""
    from transformer_lit.inference import MAX_LENGTH_PENALTY, beam_search
    from transformer_lit.model import Transformer, TransformerConfig
    from transformer_lit.validate import ArgumentError

    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny()).eval()
    src = torch.randint(4, 50, (2, 5))
    for alpha in (100.0, 1e308, float("inf"), float("nan"), -0.5):
        with pytest.raises(ArgumentError, match="length_penalty"):
            beam_search(model, src, 2, 8, bos_id=1, eos_id=2, length_penalty=alpha)
    beam_search(model, src, 2, 8, bos_id=1, eos_id=2, length_penalty=MAX_LENGTH_PENALTY)


def test_a_source_of_length_zero_is_refused():
    "Issue 61: a source of length 0 translated nothing into a loop to the budget."
    from transformer_lit.inference import generate
    from transformer_lit.model import Transformer, TransformerConfig
    from transformer_lit.validate import ArgumentError

    model = Transformer(TransformerConfig.tiny()).eval()
    for beam in (1, 2):
        with pytest.raises(ArgumentError, match="src has length 0"):
            generate(model, torch.zeros(2, 0, dtype=torch.long), max_new_tokens=5,
                     bos_id=1, eos_id=2, beam_size=beam)
