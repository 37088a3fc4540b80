"""Scoring (chapter 17): like-for-like tables; analysis (chapter 20): the failure-mode counters on
made-up outputs with known answers, and the modern sentences' loader. Scores are checked against sacrebleu itself."""
from __future__ import annotations

import pytest
import sacrebleu

from transformer_lit.analysis import (LENGTH_BAND, failure_modes, length_ratio, load_modern_pairs,
                                      merge_names, modern_path, name_dictionary, name_errors,
                                      repeated_ngrams, tokens, untranslated_words, vocabulary)
from transformer_lit.corpus import Verse
from transformer_lit.validate import ArgumentError
from transformer_lit.scoring import (bleu, corpus_scores, like_for_like, reference_scores,
                                     translated_verses)

LSG = ["Le roi dit à Daniel: Ton Dieu est le Dieu des dieux.",
       "Et Naomi dit à Ruth: Va, ma fille.",
       "Il y eut un soir, et il y eut un matin."]
DARBY = ["Et le roi parla à Daniel: Ton Dieu est le Dieu des dieux.",
         "Et Naomi lui dit: Va, ma fille.",
         "Et il y eut soir, et il y eut matin."]
MODEL = ["Le roi dit à Daniel: Dieu est grand.",
         "Et Nachomi dit à Ruth: Va, ma fille, ma fille, ma fille.",
         "Il y avait un soir et un matin."]


def test_like_for_like_scores_human_and_model_against_the_same_single_reference():
    table = like_for_like({"model": MODEL}, {"l": LSG, "5": DARBY})
    assert set(table) == {"l", "5"}
    assert set(table["l"]) == {"model", "human: 5"} and set(table["5"]) == {"model", "human: l"}
    for code, reference in (("l", LSG), ("5", DARBY)):
        for row in table[code].values():
            assert row["reference"] == code
            assert row["bleu_signature"].startswith("nrefs:1|")
            assert row["chrf_signature"].startswith("nrefs:1|")
        assert table[code]["model"]["bleu"] == pytest.approx(
            sacrebleu.corpus_bleu(MODEL, [reference]).score)
        assert table[code]["model"]["chrf"] == pytest.approx(
            sacrebleu.corpus_chrf(MODEL, [reference]).score)
    # the human row of LSG is Darby scored against LSG, and the other way round
    assert table["l"]["human: 5"]["bleu"] == pytest.approx(sacrebleu.corpus_bleu(DARBY, [LSG]).score)
    assert table["5"]["human: l"]["bleu"] == pytest.approx(sacrebleu.corpus_bleu(LSG, [DARBY]).score)


def test_like_for_like_needs_two_versions_and_streams_that_pair_up():
    with pytest.raises(ValueError, match="at least two references"):
        like_for_like({"model": MODEL}, {"l": LSG})
    with pytest.raises(ValueError, match="pair up"):
        reference_scores(MODEL[:2], LSG)


def test_the_single_reference_score_is_below_the_two_reference_one():
    one = reference_scores(MODEL, LSG)["bleu"]
    both = corpus_scores(MODEL, {"l": LSG, "5": DARBY})
    assert both["bleu_single"] == pytest.approx(one)
    assert both["bleu"] >= one
    assert bleu(MODEL, LSG) == pytest.approx(one)


def test_tokens_split_words_numbers_and_punctuation():
    assert tokens("L'Éternel dit: Amen! 12 fois.") == ["l", "'", "éternel", "dit", ":", "amen",
                                                      "!", "12", "fois", "."]


def test_a_loop_is_a_repetition_the_reference_does_not_have():
    ref = "afin que le roi et ses grands, ses femmes et ses concubines, s'en servissent."
    hyp = "et le roi et ses princes, et ses femmes, et ses concubines, et ses concubines."
    assert repeated_ngrams(hyp, [ref]) == [("ses", "concubines")]
    assert repeated_ngrams("Amen! Amen!", ["Amen."]) == [("amen", "!")]
    # the source says it twice, and so does the reference: no loop
    twice = "Je vis dans la vision, et je vis dans la vision."
    assert repeated_ngrams(twice, [twice]) == []
    # short function words repeat in any French sentence
    assert repeated_ngrams("le fils de la femme de la maison", ["la maison"]) == []
    # far apart (more than `window` tokens between the starts), a repetition is no loop
    far = "la maison de Dieu est grande et la maison brille"
    assert repeated_ngrams(far, ["une maison"]) == []
    assert repeated_ngrams(far, ["une maison"], window=7) == [("la", "maison")]
    # any reference that repeats as often excuses it
    assert repeated_ngrams("la terre, la terre", ["la mer", "la terre et la terre"]) == []


def test_untranslated_words_are_copied_english_words_not_names():
    french = vocabulary(["Nous l'aimons, parce qu'il nous a aimés.", "Daniel dit"])
    english = vocabulary(["We love him, because he first loved us.", "Daniel said"],
                         lower_case_only=True)
    assert "daniel" not in english and "him" in english
    source = "We love Him, because he first loved us. Daniel said so."
    assert untranslated_words("Nous aimons Him, parce qu'il nous a aimés.", source, french,
                              english) == ["Him"]
    # a name copied from the source is not an untranslated word
    assert untranslated_words("Daniel dit ainsi.", source, french, english) == []
    # an English word that the source does not have was not copied from it
    assert untranslated_words("Nous aimons him.", "We love you.", french, english) == []


def test_the_length_ratio_uses_the_reference_closest_in_length():
    assert length_ratio("un deux trois", ["a b c d e f", "a b c d"]) == pytest.approx(3 / 4)
    low, high = LENGTH_BAND
    assert low < 1 < high


def test_the_name_dictionary_pairs_names_that_occur_together():
    pairs = [("Naomi said to Ruth, go.", "Naomi dit à Ruth: va."),
             ("Naomi went home.", "Naomi rentra."),
             ("Belshazzar the king made a feast.", "Le roi Belschatsar fit un festin."),
             ("Belshazzar drank wine.", "Belschatsar but du vin."),
             ("Belshazzar said to Naomi, go.", "Belschatsar dit à Naomi: va."),
             ("the king went home.", "le roi rentra.")]
    names = name_dictionary(pairs, min_count=2)
    assert names == {"Naomi": {"Naomi"}, "Belshazzar": {"Belschatsar"}}
    # names that always occur together tie on counts: the closer spelling decides
    three = [("Shadrach, Meshach, and Azariah went.", "Shadrac, Méschac et Azaria partirent.")] * 3
    assert name_dictionary(three) == {"Shadrach": {"Shadrac"}, "Meshach": {"Méschac"},
                                      "Azariah": {"Azaria"}}
    darby = name_dictionary([(e, f.replace("Belschatsar", "Belshatsar")) for e, f in pairs],
                            min_count=2)
    both = merge_names(names, darby)
    assert both["Belshazzar"] == {"Belschatsar", "Belshatsar"}
    # Nachomi is not a form of Naomi; a name the reference leaves out is not checked
    assert name_errors("Nachomi dit à Ruth", "Naomi said to Ruth", "Naomi dit à Ruth",
                       both) == (["Naomi"], 1)
    assert name_errors("Et Belshatsar but", "Belshazzar drank", "Belschatsar but", both) == ([], 1)
    assert name_errors("Il but", "Belshazzar drank", "Il but", both) == ([], 0)


def test_failure_modes_count_what_they_say():
    sources = ["We love Him.", "Naomi said to Ruth.", "Amen.", "The king spoke to all the people."]
    reference = ["Nous l'aimons.", "Naomi dit à Ruth.", "Amen.",
                 "Le roi parla à tout le peuple."]
    hyps = ["Nous aimons Him.", "Nachomi dit à Ruth.", "Amen! Amen!", "Le roi."]
    french = vocabulary(reference)
    english = vocabulary(["we love him", "said to", "the king spoke to all the people"],
                         lower_case_only=True)
    names = {"Naomi": {"Naomi"}, "Ruth": {"Ruth"}}
    out = failure_modes(hyps, sources, reference, french, english, names)
    assert out["examples"] == {"untranslated": [0], "loop": [2], "length": [2, 3]}
    assert out["untranslated"] == 0.25 and out["loop"] == 0.25 and out["length"] == 0.5
    assert out["names_checked"] == 2 and out["names"] == 0.5
    perfect = failure_modes(reference, sources, reference, french, english, names)
    assert perfect["untranslated"] == perfect["loop"] == perfect["length"] == perfect["names"] == 0
    with pytest.raises(ValueError, match="pair up"):
        failure_modes(hyps[:2], sources, reference, french, english, names)


def test_the_modern_set_ships_with_the_package_and_loads(root):
    pairs = load_modern_pairs()
    assert len(pairs) >= 40
    assert len({p.id for p in pairs}) == len(pairs)
    assert {p.domain for p in pairs} == {"everyday", "news", "technology"}
    lengths = [len(p.en.split()) for p in pairs]
    assert min(lengths) >= 4 and max(lengths) <= 25
    assert "CC BY 4.0" in modern_path().read_text(encoding="utf-8").split("\nid\t")[0]
    assert '"data_files/*.tsv"' in (root / "pyproject.toml").read_text()


def test_a_malformed_modern_file_is_refused_with_its_line(tmp_path):
    from transformer_lit.corpus import CorpusError
    bad = tmp_path / "bad.tsv"
    bad.write_text("# comment\nid\tdomain\ten\tfr\n1\tnews\tHello there.\tBonjour.\n"
                   "2\tnews\tonly English\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="data line 2"):   # the file is wrong, not an argument
        load_modern_pairs(bad)
    bad.write_text("1\tnews\tHello there.\tBonjour.\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="header"):
        load_modern_pairs(bad)


def test_the_ladder_results_are_complete_and_match_their_sources():
    import json

    from transformer_lit.corpus import ENGLISH_VERSIONS, FRENCH_VERSIONS
    from transformer_lit.pretrained import pretrained_record
    from transformer_lit.recipe import BOOK_CPU_STEPS

    path = modern_path().parents[1] / "results" / "ladder_cpu.json"
    ladder = json.loads(path.read_text())
    rungs = ladder["rungs"]
    assert set(rungs) == {"1", "2", "3", "4", "5", "6"}
    for r in rungs.values():
        assert {"bleu", "bleu_single", "chrf"} <= r["valid"].keys()
        assert r["steps"] > 0 and r["target_tokens"] > 0 and r["wall_minutes"] > 0
        assert r["device"]
    one, every, small = rungs["1"], rungs["2"], rungs["3"]
    assert (one["preset"], one["english"], one["french"]) == ("cpu", ["4"], ["l"])
    assert one["steps"] == every["steps"] == BOOK_CPU_STEPS
    assert (every["english"], every["french"]) == (list(ENGLISH_VERSIONS), list(FRENCH_VERSIONS))
    assert small["preset"] == "small" and small["token_budget"] == every["target_tokens"]
    if not small["stopped_by_time_cap"]:
        assert small["target_tokens"] >= every["target_tokens"]
    record = pretrained_record()
    valid = record["valid_decoding"]
    assert all(rungs[k]["steps"] == record["steps"] for k in "456")
    assert rungs["5"]["valid"] == valid["greedy"] and rungs["6"]["valid"] == valid["beam 4"]
    assert rungs["4"]["valid"] == valid[f"last weights (step {record['steps']}), greedy, float32"]


def test_the_corpus_lexicon_holds_both_languages_and_the_names():
    from transformer_lit.corpus import Verse
    from transformer_lit.analysis import corpus_lexicon

    verses = [Verse(8, 1, i, {"4": "Naomi said to her.", "k": "Naomi said and went.",
                              "l": "Naomi lui dit.", "5": "Et Naomi dit."}) for i in range(1, 4)]
    lexicon = corpus_lexicon(verses)
    assert lexicon.names == {"Naomi": {"Naomi"}}
    assert {"said", "her", "and"} <= lexicon.english and "naomi" not in lexicon.english
    assert {"naomi", "lui", "dit", "et"} <= lexicon.french


def test_the_plain_loop_writes_what_the_cached_greedy_loop_writes():
    import torch

    from transformer_lit.inference import translate
    from transformer_lit.pretrained import load_pretrained

    torch.set_num_threads(1)
    model, tokenizer = load_pretrained()
    sentences = ["We love Him.", "Where is the train station?", "The king said to Daniel."]
    assert translate(model, tokenizer, sentences, use_cache=False) == translate(model, tokenizer, sentences)


def test_translated_verses_reads_back_the_recorded_verses_and_refuses_others():
    "The verses with the source and every reference, in order; any other set is refused."
    record = {"source": "w", "references": ["l", "5"],
              "sets": {"test": {"keys": ["1:1:1", "1:1:3"]}}}
    verses = [Verse(1, 1, 1, {"w": "a", "l": "b", "5": "c"}),
              Verse(1, 1, 2, {"w": "x", "l": "y"}),            # no Darby: not translated
              Verse(1, 1, 3, {"w": "d", "l": "e", "5": "f"})]
    kept, sources, references = translated_verses(record, "test", verses)
    assert [v.verse for v in kept] == [1, 3] and sources == ["a", "d"]
    assert references == {"l": ["b", "e"], "5": ["c", "f"]}
    for wrong in (verses[:1], verses[::-1]):                   # one missing; another order
        with pytest.raises(ValueError, match=r"^verses: not the test verses the record"):
            translated_verses(record, "test", wrong)


@pytest.mark.parametrize("call, words", [
    # a str is a sequence of characters: scored as one, each character was a sentence
    # (bleu("Dieu est amour.", "Dieu est amour.") gave 0.0)
    (lambda: bleu("Dieu est amour.", "Dieu est amour."), "^hypotheses must be a list of str"),
    (lambda: bleu(["a"], "a"), "^references must be a list of str"),
    (lambda: bleu(["a"], ["a", "b"]), "^hypotheses and references must pair up, got 1 and 2$"),
    (lambda: bleu(["a", None], ["a", "b"]), r"^hypotheses\[1\] must be a str, got None$"),
    (lambda: reference_scores(["a"], "a"), "^reference must be a list of str"),
    (lambda: corpus_scores(["a"], {}), "^references must hold one or more streams, got none$"),
    (lambda: corpus_scores(["a"], {"l": ["a"], "5": ["a", "b"]}),
     r"^hypotheses and references\['5'\] must pair up, got 1 and 2$"),
    (lambda: length_ratio("a b", []), "^references must hold one or more texts, got none$"),
])
def test_scores_refuse_what_is_not_paired_lists_of_texts(call, words):
    with pytest.raises(ArgumentError, match=words):
        call()


def test_a_one_sentence_corpus_is_scored_as_one_sentence():
    assert bleu(["Dieu est amour."], ["Dieu est amour."]) == pytest.approx(100)
    assert corpus_scores(["a b c d"], {"l": ["a b c d"]})["chrf"] == pytest.approx(100)


@pytest.mark.parametrize("kwargs, words", [
    (dict(references="amen amen"), "^references must be a list of str, not a str"),
    (dict(references=["a"], n=0), "^n must be a positive int, got 0$"),   # was [] silently
    (dict(references=["a"], window=-1), "^window must be a positive int, got -1$"),
])
def test_repeated_ngrams_refuses_bad_arguments(kwargs, words):
    with pytest.raises(ArgumentError, match=words):
        repeated_ngrams("amen amen amen amen", **kwargs)
