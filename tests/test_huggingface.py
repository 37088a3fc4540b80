"""transformer_lit.huggingface (chapter 28): our model written as a transformers model folder.

The same logits as ours (float32, within 1e-4) for post- and pre-norm models with shared and
separate embeddings, through the folder that AutoModelForSeq2SeqLM reads; the folder's position
table is transformers' own (so that recomputing it changes nothing); the tokenizer gives our ids
on the test verses and on awkward strings; the shipped model's greedy translations through
generate equal ours, and beam search is compared; bad arguments are refused in one line.
Everything runs offline, on one thread, in a few seconds.
"""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")   # local folders only: never ask the Hub

import json

import pytest
import torch
from torch import nn

pytest.importorskip("transformers")
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from transformer_lit.corpus import load_verses  # noqa: E402
from transformer_lit.data import (  # noqa: E402
    BOS_ID, EOS_ID, PAD_ID, reference_set, split_by_book, train_tokenizer,
)
from transformer_lit.export import EXPORT_MARKER  # noqa: E402
from transformer_lit.huggingface import (  # noqa: E402
    feature_order, huggingface_config, huggingface_model, huggingface_tokenizer,
    load_weights, to_huggingface,
)
from transformer_lit.inference import beam_search, translate  # noqa: E402
from transformer_lit.model import Transformer, TransformerConfig  # noqa: E402
from transformer_lit.norms import LayerNorm  # noqa: E402
from transformer_lit.pretrained import load_pretrained  # noqa: E402
from transformer_lit.validate import ArgumentError  # noqa: E402

SENTENCES_EN = ["In the beginning God created the heavens and the earth.",
                "God said, Let there be light, and there was light.",
                "The king said to Daniel, Your God is the God of gods.",
                "Naomi said to Ruth, Go, my daughter."]
SENTENCES_FR = ["Au commencement, Dieu créa les cieux et la terre.",
                "Dieu dit: Que la lumière soit! Et la lumière fut.",
                "Le roi dit à Daniel: Votre Dieu est le Dieu des dieux.",
                "Naomi dit à Ruth: Va, ma fille."]
AWKWARD = ["", "   ", "  two  spaces ", "a\tb\nc", "Noe\u0308l, e\u0301te\u0301", "ﬁn ① ½",
           "日本語 ok", "😀😀x", "«Oui»", "<s> hi </s> <pad>", "a ▁ b", "x" * 300]
SAMPLE = 16   # shipped-model verses translated both ways (all 547: benchmarks/hf_parity.py)
BEAM_SAMPLE = 8   # of those, with beam search (four times the work)

# its tests share costly module fixtures (a model, a package): one process runs them all
# under make test's `--dist loadgroup`
pytestmark = pytest.mark.xdist_group("huggingface")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_tok():
    return train_tokenizer(SENTENCES_EN + SENTENCES_FR, vocab_size=80)


def tiny_model(norm_first: bool, share: bool, vocab=(50, 50), seed: int = 0, **choices) -> Transformer:
    "A tiny model whose LayerNorms and biases are random too (a misplaced feature shows)."
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig.tiny(*vocab, norm_first=norm_first,
                                               share_embeddings=share, **choices)).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (LayerNorm, nn.Linear)) and m.bias is not None:
                m.bias.normal_(0, 0.3)
            if isinstance(m, LayerNorm):
                m.weight.normal_(1, 0.3)
    return model


def padded_batch(src_vocab: int, tgt_vocab: int, seed: int = 0):
    "src (3, 7) ending with EOS, two rows padded; tgt (3, 6) starting with BOS."
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, src_vocab, (3, 7), generator=g)
    tgt = torch.randint(4, tgt_vocab, (3, 6), generator=g)
    src[:, -1], tgt[:, 0] = EOS_ID, BOS_ID
    src[1, 3], src[1, 4:] = EOS_ID, PAD_ID
    src[2, 5], src[2, 6:] = EOS_ID, PAD_ID
    return src, tgt


@torch.no_grad()
def their_logits(theirs, src, tgt):
    return theirs(input_ids=src, attention_mask=(src != PAD_ID).long(),
                  decoder_input_ids=tgt).logits


ARRANGEMENTS = [(False, False), (False, True), (True, False), (True, True)]
ARRANGEMENT_IDS = ["post-separate", "post-shared", "pre-separate", "pre-shared"]


@pytest.mark.parametrize("norm_first,share", ARRANGEMENTS, ids=ARRANGEMENT_IDS)
def test_the_folder_computes_our_logits(tmp_path, tiny_tok, norm_first, share):
    V = tiny_tok.vocab_size
    ours = tiny_model(norm_first, share, (V, V))
    folder = to_huggingface(ours, tiny_tok, tmp_path / "out")
    theirs = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    assert type(theirs).__name__ == ("PegasusForConditionalGeneration" if norm_first
                                     else "MarianMTModel")
    src, tgt = padded_batch(V, V)
    with torch.no_grad():
        torch.testing.assert_close(their_logits(theirs, src, tgt), ours(src, tgt),
                                   atol=1e-4, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True], ids=["marian", "pegasus"])
def test_a_gelu_model_is_exported_as_its_config_says(tmp_path, tiny_tok, norm_first):
    "The activation comes from model.config (house rule 27): GELU in ours, 'gelu' in theirs, the same logits."
    V = tiny_tok.vocab_size
    ours = tiny_model(norm_first, True, (V, V), activation="gelu")
    assert huggingface_config(ours).activation_function == "gelu"
    folder = to_huggingface(ours, tiny_tok, tmp_path / "out")
    theirs = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    src, tgt = padded_batch(V, V)
    with torch.no_grad():
        torch.testing.assert_close(their_logits(theirs, src, tgt), ours(src, tgt), atol=1e-4, rtol=0)


def test_two_vocabularies_of_different_sizes_post_norm():
    ours = tiny_model(False, False, (50, 60))
    theirs = huggingface_model(ours)
    src, tgt = padded_batch(50, 60)
    with torch.no_grad():
        torch.testing.assert_close(their_logits(theirs, src, tgt), ours(src, tgt),
                                   atol=1e-4, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True], ids=["marian", "pegasus"])
def test_the_stored_table_is_theirs_and_recomputing_it_changes_nothing(tmp_path, tiny_tok,
                                                                       norm_first):
    V = tiny_tok.vocab_size
    ours = tiny_model(norm_first, True, (V, V))
    theirs = AutoModelForSeq2SeqLM.from_pretrained(
        to_huggingface(ours, tiny_tok, tmp_path / "out")).eval()
    src, tgt = padded_batch(V, V)
    with torch.no_grad():
        for stack in (theirs.model.encoder, theirs.model.decoder):
            table = stack.embed_positions
            own = table.create_weight()
            torch.testing.assert_close(table.weight, own, atol=1e-6, rtol=0)
            table.weight.copy_(own)   # what resize_position_embeddings would do
        torch.testing.assert_close(their_logits(theirs, src, tgt), ours(src, tgt),
                                   atol=1e-4, rtol=0)


def test_feature_order_puts_sines_first():
    assert feature_order(6).tolist() == [0, 2, 4, 1, 3, 5]
    ours = tiny_model(True, True)
    theirs = load_weights(huggingface_model(ours), ours, torch.arange(32))   # no reordering
    src, tgt = padded_batch(50, 50)
    with torch.no_grad():   # right with our table, wrong once the table is theirs
        torch.testing.assert_close(their_logits(theirs, src, tgt), ours(src, tgt),
                                   atol=1e-4, rtol=0)
        for stack in (theirs.model.encoder, theirs.model.decoder):
            stack.embed_positions.weight.copy_(stack.embed_positions.create_weight())
        assert (their_logits(theirs, src, tgt) - ours(src, tgt)).abs().max() > 0.1


def test_config_and_generation_settings(tmp_path, tiny_tok):
    V = tiny_tok.vocab_size
    folder = to_huggingface(tiny_model(False, True, (V, V)), tiny_tok, tmp_path / "out")
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["activation_function"], config["d_model"],
            config["scale_embedding"], config["max_position_embeddings"]) == (
        "marian", "relu", 32, True, 64)
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["decoder_start_token_id"] == BOS_ID
    assert (generation["eos_token_id"], generation["pad_token_id"]) == (EOS_ID, PAD_ID)
    assert generation["max_length"] == 64 and generation.get("num_beams", 1) == 1
    assert generation.get("forced_eos_token_id") is None
    assert not generation.get("do_sample", False)
    theirs = AutoModelForSeq2SeqLM.from_pretrained(folder)
    assert float(theirs.final_logits_bias.abs().max()) == 0.0
    assert theirs.lm_head.weight is theirs.model.shared.weight   # tied, as ours


def test_untied_pegasus_holds_separate_matrices(tmp_path, tiny_tok):
    V = tiny_tok.vocab_size
    ours = tiny_model(True, False, (V, V))
    theirs = AutoModelForSeq2SeqLM.from_pretrained(
        to_huggingface(ours, tiny_tok, tmp_path / "out"))
    m = theirs.model
    assert m.encoder.embed_tokens.weight is not m.decoder.embed_tokens.weight
    order = feature_order(32)
    torch.testing.assert_close(m.encoder.embed_tokens.weight, ours.src_embed.weight[:, order])
    torch.testing.assert_close(theirs.lm_head.weight, ours.tgt_embed.weight[:, order])


def test_the_tokenizer_gives_our_ids_on_every_test_verse_and_awkward_strings(tiny_tok,
                                                                            shipped):
    _, tokenizer = shipped
    sources, references = reference_set(split_by_book(load_verses())["test"])
    assert len(sources) == 547
    texts = sources + sum(references.values(), []) + AWKWARD
    for ours, pool in ((tiny_tok, SENTENCES_FR + AWKWARD), (tokenizer, texts)):
        theirs = huggingface_tokenizer(ours, max_len=256)
        assert theirs(pool)["input_ids"] == [ids + [EOS_ID] for ids in ours.encode(pool)]
    cut = theirs(["x" * 300], truncation=True)["input_ids"][0]   # translate's cut
    assert cut == (tokenizer.encode("x" * 300)[:255] + [EOS_ID])
    labels = theirs(text_target=SENTENCES_FR)["input_ids"]   # fine-tuning: our tgt_out
    assert labels == [ids + [EOS_ID] for ids in tokenizer.encode(SENTENCES_FR)]


@pytest.fixture(scope="module")
def shipped():
    return load_pretrained()


@pytest.fixture(scope="module")
def shipped_folder(tmp_path_factory, shipped):
    model, tokenizer = shipped
    return to_huggingface(model, tokenizer, tmp_path_factory.mktemp("hf") / "shipped")


@pytest.fixture(scope="module")
def sample():
    sources, _ = reference_set(split_by_book(load_verses())["test"])
    return sources[:SAMPLE]


def hf_translate(folder, sentences, **options):
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    batch = tok(sentences, return_tensors="pt", padding=True, truncation=True)
    with torch.no_grad():
        out = model.generate(**batch, **options)
    return tok.batch_decode(out, skip_special_tokens=True)


def test_shipped_model_greedy_through_generate_equals_ours(shipped, shipped_folder, sample):
    model, tokenizer = shipped
    assert hf_translate(shipped_folder, sample) == translate(model, tokenizer, sample)


def test_shipped_model_beam_search_agrees_on_most_verses(shipped, shipped_folder, sample):
    model, tokenizer = shipped
    sample = sample[:BEAM_SAMPLE]
    ids = [x + [EOS_ID] for x in tokenizer.encode(sample)]
    src = torch.full((len(ids), max(map(len, ids))), PAD_ID)
    for r, x in enumerate(ids):
        src[r, :len(x)] = torch.tensor(x)
    ours = [tokenizer.decode(row) for row in beam_search(model, src, 4, 100, length_penalty=0.0)]
    theirs = hf_translate(shipped_folder, sample, num_beams=4, length_penalty=0.0,
                          max_length=101)
    same = sum(a == b for a, b in zip(ours, theirs))
    assert same >= BEAM_SAMPLE - 1, (same, [(a, b) for a, b in zip(ours, theirs) if a != b])


def test_the_card_has_the_hub_header_and_scores_only_from_a_record(tmp_path, tiny_tok,
                                                                     shipped_folder):
    card = (shipped_folder / "README.md").read_text()
    header = card.split("---")[1]
    for line in ("- en", "- fr", "license: apache-2.0", "pipeline_tag: translation",
                 "- translation"):
        assert line in header.splitlines()
    assert "## Test books, like for like" in card and "BLEU" in card
    V = tiny_tok.vocab_size
    other = to_huggingface(tiny_model(True, True, (V, V)), tiny_tok, tmp_path / "o")
    text = (other / "README.md").read_text()
    assert "license: unknown" in text and "BLEU" not in text and "chrF" not in text
    assert (shipped_folder / EXPORT_MARKER).is_file()


def test_force_replaces_only_an_earlier_export(tmp_path, tiny_tok):
    V = tiny_tok.vocab_size
    model = tiny_model(False, True, (V, V))
    out = to_huggingface(model, tiny_tok, tmp_path / "out")
    (out / "mine.txt").write_text("kept")
    with pytest.raises(FileExistsError, match="force=True"):
        to_huggingface(model, tiny_tok, out)
    assert to_huggingface(model, tiny_tok, out, force=True) == out
    assert (out / "mine.txt").read_text() == "kept"
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    with pytest.raises(FileExistsError, match="no export wrote"):
        to_huggingface(model, tiny_tok, other, force=True)
    (tmp_path / "file").write_text("")
    with pytest.raises(FileExistsError, match="not a folder"):
        to_huggingface(model, tiny_tok, tmp_path / "file", force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "other", "out"]


def test_bad_arguments_are_refused_in_one_line(tmp_path, tiny_tok):
    V = tiny_tok.vocab_size
    model = tiny_model(False, True, (V, V))
    out = tmp_path / "x"
    cases = [((None, tiny_tok, out), "model must be a transformer_lit Transformer"),
             ((model, "spm", out), "tokenizer must be a transformer_lit SubwordTokenizer"),
             ((model, tiny_tok, 3), "out must be a folder path"),
             ((tiny_model(False, True), tiny_tok, out), f"tokenizer's {V} pieces"),
             ((tiny_model(True, False, (50, 60)), tiny_tok, out), "one vocabulary")]
    for args, message in cases:
        with pytest.raises(ArgumentError, match=message) as e:
            to_huggingface(*args)
        assert "\n" not in str(e.value)
    with pytest.raises(ArgumentError, match="force must be True or False"):
        to_huggingface(model, tiny_tok, out, force=1)
    # what Marian and Pegasus cannot express, refused by the config's name for it
    with pytest.raises(ArgumentError, match="^model: Marian and Pegasus fix LayerNorm eps at 1e-05, got norm_eps=1e-06$"):
        to_huggingface(tiny_model(False, True, (V, V), norm_eps=1e-6), tiny_tok, out)
    with pytest.raises(ArgumentError, match="^model: the export maps chapter 02's sinusoidal positions only, "
                                            "got positional='learned'$"):
        to_huggingface(tiny_model(True, True, (V, V), positional="learned"), tiny_tok, out)
    assert not out.exists() and not list(tmp_path.iterdir())


def test_the_tokenizer_needs_a_positive_length():
    _, tokenizer = load_pretrained()
    with pytest.raises(ArgumentError, match="^max_len must be a positive int, got 0$"):
        huggingface_tokenizer(tokenizer, 0)
