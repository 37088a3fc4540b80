"""The cached decoding loop equals the plain one; the cache never reads unwritten slots; beam search is sound."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch

from transformer_lit.cache import KVCache
from transformer_lit.data import train_tokenizer
from transformer_lit.inference import (
    InputTruncatedWarning,
    beam_search,
    decode_step,
    gnmt_length_penalty,
    greedy_decode,
    new_cache,
    output_limit,
    translate,
)
from transformer_lit.model import Transformer, TransformerConfig, greedy_decode_uncached
from transformer_lit.validate import ArgumentError

BOS, EOS = 1, 2


pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


def tiny_model(seed: int, norm_first: bool = False, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(TransformerConfig.tiny(norm_first=norm_first, **overrides)).eval()


def padded_src(seed: int, batch: int = 4, length: int = 9, vocab: int = 50) -> torch.Tensor:
    "Random source ids (B, S) with trailing padding (id 0) of different lengths; row 0 unpadded."
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (batch, length), generator=g)
    for i in range(1, batch):
        src[i, length - (i * 2) % (length - 2):] = 0
    return src


def forced_logits(model: Transformer, src: torch.Tensor, tgt: torch.Tensor, cache: KVCache) -> torch.Tensor:
    "Feed tgt (B, T) through the cache one token at a time -> logits (B, T, V)."
    return torch.stack([decode_step(model, tgt[:, t:t + 1], cache) for t in range(tgt.shape[1])], dim=1)


def strip(row: torch.Tensor, eos_id: int) -> torch.Tensor:
    hits = (row[1:] == eos_id).nonzero()
    return row if len(hits) == 0 else row[: int(hits[0]) + 2]


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_step_logits_equal_full_decode(norm_first, static, seed):
    model, src = tiny_model(seed, norm_first), padded_src(seed)
    tgt = torch.randint(3, 60, (src.shape[0], 11), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        memory = model.encode(src)
        full = model.decode(tgt, memory, src)
    cache = new_cache(model, memory, src, max_len=16, static=static)
    torch.testing.assert_close(forced_logits(model, src, tgt, cache), full)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("eos_id", [None, 5])
def test_cached_greedy_equals_uncached(norm_first, seed, eos_id):
    model, src = tiny_model(seed, norm_first), padded_src(seed)
    slow = greedy_decode_uncached(model, src, 20, BOS, eos_id)
    with torch.no_grad():   # near-ties would make token equality luck: require a clear argmax first
        full = model(src, slow[:, :-1])
        steps = forced_logits(model, src, slow[:, :-1], new_cache(model, model.encode(src), src, 20))
    top = full.topk(2, dim=-1).values
    assert (top[..., 0] - top[..., 1]).min() > 2 * (steps - full).abs().max(), "near-tie: choose another seed"
    assert torch.equal(greedy_decode(model, src, 20, BOS, eos_id), slow)
    assert torch.equal(greedy_decode(model, src, 20, BOS, eos_id, use_cache=False), slow)


def uneven_eos(free: torch.Tensor) -> int:
    "A token that first appears at different steps in different rows of free (B, 1 + n), used as eos_id."
    for v in range(int(free.max()) + 1):
        firsts = {int((row[1:] == v).nonzero()[0]) if (row[1:] == v).any() else None for row in free}
        if len(firsts) > 1 and firsts != {None}:
            return v
    raise AssertionError("no token ends the rows unevenly: choose another seed")


def test_rows_finish_at_different_steps_and_batch_equals_alone():
    model = tiny_model(3, tgt_vocab_size=12)
    src = padded_src(3, batch=5)
    eos = uneven_eos(greedy_decode(model, src, 15, BOS))        # rows end at different steps
    out = greedy_decode(model, src, 15, BOS, eos)
    ends = [len(strip(r, eos)) for r in out]
    assert len(set(ends)) > 1 and torch.equal(out, greedy_decode_uncached(model, src, 15, BOS, eos))
    for i in range(src.shape[0]):
        alone = greedy_decode(model, src[i:i + 1, : int((src[i] != 0).sum())], 15, BOS, eos)[0]
        assert torch.equal(out[i, : len(alone)], alone)
        assert torch.all(out[i, len(alone):] == model.config.pad_id)


@pytest.mark.parametrize("static", [False, True])
def test_step_never_reads_unwritten_slots(static):
    model, src = tiny_model(4), padded_src(4)
    tgt = torch.randint(3, 60, (src.shape[0], 8), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        memory = model.encode(src)
    clean = forced_logits(model, src, tgt, new_cache(model, memory, src, 20, static=static))
    dirty = new_cache(model, memory, src, 20, static=static)
    for t in range(tgt.shape[1]):
        with torch.no_grad():   # before each step, fill every slot from the current one on
            tail = dirty.self_k[:, :, :, t:]
            if static:   # the static mode reads masked slots with weight 0: finite garbage must not matter
                tail.uniform_(-1e3, 1e3); dirty.self_v[:, :, :, t:].uniform_(-1e3, 1e3)
            else:        # the slicing mode never reads them at all: even NaN must not matter
                tail.fill_(float("nan")); dirty.self_v[:, :, :, t:].fill_(float("nan"))
        logits = decode_step(model, tgt[:, t:t + 1], dirty)
        torch.testing.assert_close(logits, clean[:, t], rtol=0, atol=1e-6 if static else 0)


def test_cache_is_written_in_place_and_memory_projected_once():
    model, src = tiny_model(5), padded_src(5)
    calls = []
    hooks = [layer.cross_attn.k_proj.register_forward_hook(lambda *_: calls.append(1)) for layer in model.decoder.layers]
    memory = model.encode(src)
    cache = new_cache(model, memory, src, 10)
    ptr = cache.self_k.data_ptr()
    for t in range(10):
        decode_step(model, torch.full((src.shape[0], 1), 3 + t), cache)
    assert cache.self_k.data_ptr() == ptr and cache.length == 10 and int(cache.position) == 10
    assert len(calls) == model.config.n_layers                  # once per layer, not once per step
    assert cache.nbytes() == {"self": 2 * 2 * 4 * 10 * 32 * 4, "cross": 2 * 2 * 4 * src.shape[1] * 32 * 4}
    for h in hooks:
        h.remove()
    with pytest.raises(ValueError, match="cache is full"):
        decode_step(model, torch.full((src.shape[0], 1), 3), cache)


def test_reorder_follows_rows_in_every_tensor():
    model, src = tiny_model(6), padded_src(6)
    tgt = torch.randint(3, 60, (src.shape[0], 6), generator=torch.Generator().manual_seed(6))
    memory = model.encode(src)
    cache = new_cache(model, memory, src, 8)
    forced_logits(model, src, tgt[:, :5], cache)
    index = torch.tensor([2, 0, 0, 3, 1, 2])                       # reorder and grow B = 4 -> 6
    cache.reorder(index)
    expected = new_cache(model, memory[index], src[index], 8)
    expected_logits = forced_logits(model, src[index], tgt[index], expected)[:, -1]
    torch.testing.assert_close(decode_step(model, tgt[index, 5:6], cache), expected_logits)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_size_one_is_greedy(norm_first, seed):
    model, src = tiny_model(seed, norm_first, tgt_vocab_size=12), padded_src(seed)
    eos = int(greedy_decode(model, src, 12, BOS)[1, 4])            # a token the model does produce
    greedy = greedy_decode(model, src, 12, BOS, eos)
    beams = beam_search(model, src, beam_size=1, max_new_tokens=12, bos_id=BOS, eos_id=eos)
    assert all(torch.equal(b, strip(g, eos)) for b, g in zip(beams, greedy))


def log_prob(model: Transformer, src: torch.Tensor, hyp: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        logp = model(src, hyp[None, :-1]).log_softmax(-1)[0]
    return logp.gather(1, hyp[1:, None]).sum()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_beam_as_wide_as_the_vocabulary_is_exhaustive(seed, alpha):
    "k = V over two steps ranks every one- and two-token translation: it must find the best by brute force."
    model, V = tiny_model(seed, tgt_vocab_size=8), 8
    src = padded_src(seed, batch=1)
    hyps = [torch.tensor([BOS, EOS])] + [torch.tensor([BOS, a, b]) for a, b in itertools.product(range(V), repeat=2) if a != EOS]
    scores = torch.stack([log_prob(model, src, y) / gnmt_length_penalty(torch.tensor(len(y) - 1.0), alpha) for y in hyps])
    found = beam_search(model, src, beam_size=V, max_new_tokens=2, bos_id=BOS, eos_id=EOS, length_penalty=alpha)[0]
    assert torch.equal(found, hyps[int(scores.argmax())])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("k", [2, 4])
def test_beam_search_without_cache_is_the_same_search(norm_first, seed, k):
    model, src = tiny_model(seed, norm_first, tgt_vocab_size=12), padded_src(seed)
    eos = int(greedy_decode(model, src, 8, BOS)[0, 3])
    cached = beam_search(model, src, k, 10, bos_id=BOS, eos_id=eos)
    plain = beam_search(model, src, k, 10, bos_id=BOS, eos_id=eos, use_cache=False)
    assert all(torch.equal(a, b) for a, b in zip(cached, plain))


ENGLISH = ["In the beginning God created the heavens and the earth.", "The earth was formless and empty.",
           "God said, Let there be light, and there was light.", "The king said to Daniel, Your God is the God of gods."]
FRENCH = ["Au commencement, Dieu créa les cieux et la terre.", "La terre était informe et vide.",
          "Dieu dit: Que la lumière soit! Et la lumière fut.", "Le roi dit à Daniel: Votre Dieu est le Dieu des dieux."]


def test_translate_front_end():
    "translate: greedy cached == chapter 09's uncached loop; beam with and without cache agree; input order kept."
    tokenizer = train_tokenizer(ENGLISH + FRENCH, vocab_size=90)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(tokenizer.vocab_size, tokenizer.vocab_size, share_embeddings=True)).eval()
    sentences = ENGLISH + ["Light.", "God saw the light."]
    greedy = translate(model, tokenizer, sentences)
    assert len(greedy) == len(sentences) and all(isinstance(t, str) for t in greedy)
    assert greedy == translate(model, tokenizer, sentences, use_cache=False)
    assert greedy == translate(model, tokenizer, sentences, batch_size=1)   # batching never changes a greedy output
    assert translate(model, tokenizer, sentences[::-1]) == greedy[::-1]
    beam = translate(model, tokenizer, sentences, beam_size=3)
    assert beam == translate(model, tokenizer, sentences, beam_size=3, use_cache=False) and len(beam) == len(sentences)
    assert translate(model, tokenizer, []) == []
    with pytest.raises(ValueError, match="beam_size"):
        translate(model, tokenizer, sentences, beam_size=0)
    with pytest.raises(ValueError, match="batch_size"):
        translate(model, tokenizer, sentences, batch_size=0)


def test_beam_search_batch_equals_alone_and_shapes():
    model, src = tiny_model(7, tgt_vocab_size=12), padded_src(7)
    eos = int(greedy_decode(model, src, 8, BOS)[0, 3])
    together = beam_search(model, src, beam_size=3, max_new_tokens=10, bos_id=BOS, eos_id=eos)
    assert len(together) == src.shape[0]
    for i, hyp in enumerate(together):
        alone = beam_search(model, src[i:i + 1, : int((src[i] != 0).sum())], 3, 10, bos_id=BOS, eos_id=eos)[0]
        assert torch.equal(hyp, alone)
        assert hyp[0] == BOS and len(hyp) <= 11 and (hyp[-1] == eos or len(hyp) == 11)
        assert not (hyp[1:-1] == eos).any()


def test_zero_new_tokens():
    model, src = tiny_model(8), padded_src(8)
    assert torch.equal(greedy_decode(model, src, 0, BOS), torch.full((4, 1), BOS))
    assert all(torch.equal(y, torch.tensor([BOS])) for y in beam_search(model, src, 2, 0, bos_id=BOS, eos_id=EOS))


def test_length_penalty():
    torch.testing.assert_close(gnmt_length_penalty(torch.tensor([1.0, 7.0]), 0.6), torch.tensor([1.0, 2.0 ** 0.6]))


def test_bad_inputs():
    model, src = tiny_model(9), padded_src(9)
    with pytest.raises(ValueError, match="^use_cache must be True or False, got 'no'$"):
        beam_search(model, src, use_cache="no")   # was taken as True
    with pytest.raises(ValueError, match="^use_cache must be True or False, got 0$"):
        greedy_decode(model, src, 5, 1, 2, use_cache=0)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, src, beam_size=0)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, src, beam_size=61)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(model, src, length_penalty=-1.0)
    for fn in (lambda n: greedy_decode(model, src, n, BOS), lambda n: beam_search(model, src, 2, n)):
        with pytest.raises(ValueError, match="max_new_tokens"):
            fn(-1)
        with pytest.raises(ValueError, match="max_new_tokens"):
            fn(1000)
    with pytest.raises(ValueError, match="bos_id"):
        greedy_decode(model, src, 3, bos_id=60)
    with pytest.raises(ValueError, match="eos_id"):
        greedy_decode(model, src, 3, BOS, eos_id=-1)
    with pytest.raises(TypeError, match="src"):
        greedy_decode(model, src.float(), 3, BOS)
    with pytest.raises(ValueError, match=r"src must have shape \(B, L\), got \(9,\)"):
        greedy_decode(model, src[0], 3, BOS)
    with pytest.raises(ValueError, match=r"src must have shape \(B, L\), got \(1, 4, 9\)"):
        beam_search(model, src[None], 2, 3)
    with pytest.raises(ValueError, match="max_len"):
        new_cache(model, model.encode(src), src, max_len=0)
    # ids outside the vocabulary: refused once, where they enter (not in every forward)
    for fn in (lambda s: greedy_decode(model, s, 3, BOS), lambda s: beam_search(model, s, 2, 3),
               lambda s: greedy_decode(model, s, 3, BOS, use_cache=False)):
        with pytest.raises(ValueError, match=r"src must hold ids in \[0, 50\)"):
            fn(src.clone().fill_(50))
        with pytest.raises(ValueError, match=r"src must hold ids in \[0, 50\)"):
            fn(src.clone().fill_(-1))


# Issue 13: the inference API's edge cases. Each test below failed on the code before the fix.

@pytest.fixture(scope="module")
def translator():
    "A tokenizer of the test sentences and a seeded random tiny model on its vocabulary."
    tokenizer = train_tokenizer(ENGLISH + FRENCH, vocab_size=90)
    torch.manual_seed(1)   # a model whose beams show the old batch dependence (seed 0's happen not to)
    V = tokenizer.vocab_size
    return Transformer(TransformerConfig.tiny(V, V, share_embeddings=True)).eval(), tokenizer


def test_translate_refuses_a_single_string(translator):
    "A str is a Sequence[str] (of characters): it used to come back as one translation per character."
    model, tokenizer = translator
    with pytest.raises(ValueError, match=r"sentences must be a list of str.*\[text\]"):
        translate(model, tokenizer, "Light.")
    assert len(translate(model, tokenizer, ("Light.", "Amen."))) == 2   # any other sequence is fine


def test_translate_and_output_limit_refuse_values_of_the_wrong_kind(translator):
    model, tokenizer = translator
    with pytest.raises(ArgumentError, match="^use_cache must be True or False, got 1$"):
        translate(model, tokenizer, ["x"], use_cache=1)
    with pytest.raises(ArgumentError, match="^source_tokens must be an int >= 0, got -1$"):
        output_limit(-1, 100)   # used to give 8
    with pytest.raises(ArgumentError, match="^max_len must be an int >= 2, got '9'$"):
        output_limit(3, "9")
    assert output_limit(10, 100) == 25 and output_limit(100, 100) == 99


@pytest.mark.parametrize("bad, words", [([1, "x"], "sentences[0] must be a str"),
                                        (["x", None], "sentences[1] must be a str"),
                                        (["x", "y", "lone \udc80"], "sentences[2] is not text")])
def test_translate_names_the_sentence_that_is_no_text(translator, bad, words):
    "Before: an error from inside sentencepiece, naming neither the argument nor the item."
    model, tokenizer = translator
    with pytest.raises(ArgumentError) as caught:
        translate(model, tokenizer, bad)
    assert words in str(caught.value)


@pytest.mark.parametrize("training", [True, False])
def test_translate_leaves_the_model_in_its_mode(translator, training):
    """Before: a model that was training came back in eval mode (dropout off); then it was
    switched for the call (another thread training it lost its dropout meanwhile). Now a
    model in training mode is refused, and keeps its mode."""
    model, tokenizer = translator
    model.train(training)
    try:
        if training:
            with pytest.raises(ArgumentError, match=r"^model is in training mode .*model\.eval\(\)"):
                translate(model, tokenizer, ["Light."])
        else:
            translate(model, tokenizer, ["Light."])
        assert model.training is training and all(m.training is training for m in model.modules())
    finally:
        model.eval()


@pytest.mark.parametrize("use_cache", [True, False])
def test_empty_batch(translator, use_cache):
    "B = 0: beam search returned an IndexError; now every decoder returns an empty result."
    model, src = tiny_model(10), padded_src(10)
    assert beam_search(model, src[:0], 3, 5, bos_id=BOS, eos_id=EOS, use_cache=use_cache) == []
    assert beam_search(model, src[:0], 3, torch.zeros(0, dtype=torch.long), bos_id=BOS, eos_id=EOS, use_cache=use_cache) == []
    assert greedy_decode(model, src[:0], 5, BOS, EOS, use_cache=use_cache).shape[0] == 0
    assert translate(*translator, [], beam_size=3, use_cache=use_cache) == []


@pytest.mark.parametrize("alpha", [float("nan"), float("inf"), float("-inf"), -0.5])
def test_length_penalty_must_be_finite_and_non_negative(translator, alpha):
    model, src = tiny_model(9), padded_src(9)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(model, src, 2, 3, length_penalty=alpha)
    for beam_size in (1, 2):   # translate checks it before any work, even for greedy or no sentences
        for sentences in (["Light."], []):
            with pytest.raises(ValueError, match="length_penalty"):
                translate(*translator, sentences, beam_size=beam_size, length_penalty=alpha)


def test_beam_search_budget_per_sentence():
    "max_new_tokens as a (B,) tensor: each sentence gets what it gets alone with its own budget."
    model, src = tiny_model(9, tgt_vocab_size=12), padded_src(9)
    budget = torch.tensor([12, 5, 3, 0])
    for use_cache in (True, False):
        together = beam_search(model, src, 4, budget, bos_id=BOS, eos_id=EOS, use_cache=use_cache)
        for i, hyp in enumerate(together):
            own = src[i:i + 1, : int((src[i] != 0).sum())]
            alone = beam_search(model, own, 4, int(budget[i]), bos_id=BOS, eos_id=EOS, use_cache=use_cache)[0]
            assert torch.equal(hyp, alone) and len(hyp) <= 1 + budget[i], (use_cache, i)
    cut = [y[: 1 + int(n)] for y, n in zip(beam_search(model, src, 4, 12, bos_id=BOS, eos_id=EOS), budget)]
    assert any(not torch.equal(a, b) for a, b in zip(cut, together))   # running to 12 and cutting differs
    for bad in (torch.tensor([3, 4]), torch.tensor([3.0, 4.0, 5.0, 6.0]), torch.tensor([3, -1, 2, 2]),
                torch.tensor([3, 1000, 2, 2])):
        with pytest.raises(ValueError, match="max_new_tokens"):
            beam_search(model, src, 2, bad)


LONG_AND_SHORT = ["Light.", ENGLISH[0] + " " + ENGLISH[2], "Amen.", ENGLISH[1], ENGLISH[3] + " " + ENGLISH[0]]


@pytest.mark.parametrize("beam_size", [1, 4])
def test_translate_batch_equals_one_by_one(translator, beam_size):
    "Sentences of very different lengths in one batch: each translates as it does alone, cached or not."
    model, tokenizer = translator
    lengths = [len(ids) for ids in tokenizer.encode(LONG_AND_SHORT)]
    assert max(lengths) > 3 * min(lengths) and max(lengths) < model.config.max_len - 1
    together = translate(model, tokenizer, LONG_AND_SHORT, beam_size=beam_size)
    assert together == [translate(model, tokenizer, [s], beam_size=beam_size)[0] for s in LONG_AND_SHORT]
    assert together == translate(model, tokenizer, LONG_AND_SHORT, beam_size=beam_size, use_cache=False)
    assert together == translate(model, tokenizer, LONG_AND_SHORT, beam_size=beam_size, batch_size=2)


def test_translate_warns_for_each_cut_sentence(translator):
    "A line longer than max_len - 1 tokens is still cut (the model cannot read more), but never silently."
    _, tokenizer = translator
    torch.manual_seed(0)
    V = tokenizer.vocab_size
    model = Transformer(TransformerConfig.tiny(V, V, share_embeddings=True, max_len=16)).eval()
    long = " ".join(ENGLISH)
    n = len(tokenizer.encode(long))
    assert n > 15
    with pytest.warns(InputTruncatedWarning) as record:
        out = translate(model, tokenizer, ["Light.", long, "Amen.", long], beam_size=2)
    cut = [w.message for w in record if w.category is InputTruncatedWarning]
    assert [str(w) for w in cut] == [f"sentence {i} has {n} tokens, more than the model reads (15): only its first "
                                     "15 are translated" for i in (1, 3)]
    assert [(w.index, w.tokens, w.limit) for w in cut] == [(1, n, 15), (3, n, 15)]   # for the CLI to map to lines
    assert all(w.filename == __file__ for w in record)   # the warning points at the caller of translate
    assert len(out) == 4 and all(isinstance(t, str) for t in out)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputTruncatedWarning)
        translate(model, tokenizer, ["Light.", "Amen."])   # short lines: no warning


# --- from the hostile-input rounds (issues 32, 39, 47, 50) --------------------


@pytest.fixture(scope="module")
def shipped_pair():
    from transformer_lit.pretrained import load_pretrained
    return load_pretrained()


@pytest.mark.parametrize("argument, value", [("model", None), ("tokenizer", None),
                                             ("tokenizer", "tok")])
def test_translate_names_a_model_or_tokenizer_that_is_not_one(shipped_pair, argument, value):
    from transformer_lit.inference import translate
    model, tokenizer = shipped_pair
    given = {"model": model, "tokenizer": tokenizer, argument: value}
    with pytest.raises(ArgumentError, match=f"^{argument} must be a "):
        translate(given["model"], given["tokenizer"], ["Amen."])


def test_numpy_numbers_are_numbers(shipped_pair):
    "beam_size=np.int64(2) was taken while length_penalty=np.float32(0.5) was refused."
    from transformer_lit.inference import translate
    model, tokenizer = shipped_pair
    expected = translate(model, tokenizer, ["Amen."], beam_size=2, length_penalty=0.5)
    got = translate(model, tokenizer, ["Amen."], beam_size=np.int64(2),
                    length_penalty=np.float32(0.5))
    assert got == expected
    with pytest.raises(ArgumentError, match="length_penalty"):
        translate(model, tokenizer, ["Amen."], length_penalty=np.bool_(True))


def test_translate_never_switches_a_training_model_out_of_training_mode(shipped_pair):
    """Round four: two threads entering and leaving translate (A, B, A, B) left a model
    in training mode in evaluation mode. Now decoding never changes the caller's mode
    (house rule 26): a model in training mode is refused, and stays in training mode."""
    from transformer_lit.inference import translate
    from transformer_lit.validate import ArgumentError

    model, tokenizer = shipped_pair
    model.train()
    try:
        with pytest.raises(ArgumentError, match=r"call model\.eval\(\)"):
            translate(model, tokenizer, ["Amen."])
        assert model.training
    finally:
        model.eval()
