"""The reader's own pairs (chapter 43, issue 59's bad data): every pair read or one line
that names the file, the line and what was expected; what is not data skipped and
counted; a split that keeps near-duplicate sources on one side."""
from __future__ import annotations

import os

import pytest

from transformer_lit.pairs import (
    CJK_COVERAGE, PairsError, character_coverage, near_key, read_pairs, split_pairs,
    too_long)
from transformer_lit.validate import ArgumentError

GOOD = [f"Sentence {i}.\tPhrase {i}." for i in range(120)]


def write(path, lines, end="\n", encoding="utf-8", head=""):
    path.write_bytes((head + end.join(lines) + end).encode(encoding))
    return path


def refused(*args, **kwargs) -> str:
    with pytest.raises(PairsError) as e:
        read_pairs(*args, **kwargs)
    message = str(e.value)
    assert "\n" not in message and isinstance(e.value, ValueError)
    return message


def test_a_good_file_gives_every_pair_in_order(tmp_path):
    read = read_pairs(write(tmp_path / "p.tsv", GOOD))
    assert read.pairs == [(f"Sentence {i}.", f"Phrase {i}.") for i in range(120)]
    assert read.notes() == []


def test_two_aligned_files_give_the_same_pairs(tmp_path):
    src = write(tmp_path / "en.txt", [g.split("\t")[0] for g in GOOD])
    tgt = write(tmp_path / "fr.txt", [g.split("\t")[1] for g in GOOD])
    assert read_pairs(src, tgt).pairs == read_pairs(write(tmp_path / "p.tsv", GOOD)).pairs


def test_not_utf8_names_the_line_and_the_byte(tmp_path):
    lines = GOOD[:5] + ["Coffee.\tCafé."] + GOOD[5:]
    message = refused(write(tmp_path / "l1.tsv", lines, encoding="latin-1"))
    assert message.endswith("l1.tsv:6: not UTF-8 (byte 0xe9 at byte 12 of the line): "
                            "save the file as UTF-8")


def test_utf16_is_named(tmp_path):
    message = refused(write(tmp_path / "u16.tsv", GOOD, encoding="utf-16"))
    assert "UTF-16" in message and "expected UTF-8" in message


def test_a_nul_byte_is_not_text(tmp_path):
    assert refused(write(tmp_path / "n.tsv", GOOD[:3] + ["a\0b\tc"] + GOOD)).endswith(
        "n.tsv:4: a NUL byte: not a text file")


@pytest.mark.parametrize("line, what", [
    ("Alone.", "1 column; expected 2"), ("a\tb\tc", "3 columns; expected 2"),
    ("\tPhrase.", "empty source"), ("Sentence.\t  ", "empty target")])
def test_a_bad_line_is_named_with_how_many_more(tmp_path, line, what):
    message = refused(write(tmp_path / "b.tsv", GOOD[:9] + [line] + GOOD[9:] + [line]))
    assert f"b.tsv:10: {what}" in message and message.endswith("(and 1 more bad line)")


def test_too_few_pairs(tmp_path):
    message = refused(write(tmp_path / "few.tsv", GOOD[:37]))
    assert message.endswith("few.tsv: 37 pairs; a training run needs at least 100 "
                            "(min_pairs)")
    assert len(read_pairs(tmp_path / "few.tsv", min_pairs=37).pairs) == 37


def test_a_file_too_large_is_refused_by_its_size_unread(tmp_path):
    big = tmp_path / "big.tsv"
    with big.open("wb") as f:   # a sparse file: 3 GiB on paper, nothing on disk
        f.truncate(3 * 2**30)
    message = refused(big)
    assert "3,072.0 MiB, more than the 512.0 MiB a file of pairs may hold" in message
    assert "more than the 1,000 bytes" in refused(write(tmp_path / "s.tsv", GOOD),
                                                   max_bytes=1000)


def test_a_fifo_or_a_missing_file_is_one_line(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    assert "cannot be read" in refused(tmp_path / "fifo")   # and does not wait
    assert "cannot be read" in refused(tmp_path / "missing.tsv")


def test_aligned_files_of_different_lengths(tmp_path):
    src = write(tmp_path / "en.txt", ["a"] * 120)
    tgt = write(tmp_path / "fr.txt", ["b"] * 119)
    assert "en.txt has 120 lines and" in refused(src, tgt)
    assert refused(src, write(tmp_path / "fr2.txt", ["b"] * 5 + [""] + ["b"] * 114)
                   ).endswith(":6: empty target")


def test_bom_blank_lines_and_mixed_line_ends_lose_nothing(tmp_path):
    path = tmp_path / "m.tsv"
    path.write_bytes(("\ufeff" + "\r\n".join(GOOD[:60]) + "\r\n\n\n"
                      + "\r".join(GOOD[60:]) + "\n").encode())
    path.write_bytes(path.read_bytes().replace(b"\n\n\n", b"\n \t \n\n"))  # blank
    read = read_pairs(path)
    assert read.pairs == read_pairs(write(tmp_path / "p.tsv", GOOD)).pairs
    assert read.pairs[0][0] == "Sentence 0."            # the mark is not in the text
    assert read.bom and read.blank_lines == 2 and set(read.line_ends) == {"CRLF", "LF", "CR"}
    assert len(read.notes()) == 3 and all("m.tsv" in n for n in read.notes())


def test_other_separators_stay_inside_a_sentence(tmp_path):
    read = read_pairs(write(tmp_path / "s.tsv", ["a\u2028b\tc\x0cd"] + GOOD))
    assert read.pairs[0] == ("a\u2028b", "c\x0cd")


def test_bad_arguments_are_argument_errors(tmp_path):
    with pytest.raises(ArgumentError, match="min_pairs"):
        read_pairs(tmp_path / "x", min_pairs=0)
    with pytest.raises(ArgumentError, match="valid"):
        split_pairs([("a", "b")], valid=0.9)


def test_too_long_counts_and_cuts_nothing():
    pairs = [("a b c", "x"), ("a b c d e f", "x y"), ("a", "x y z w v")]
    assert too_long(pairs, str.split, max_len=4) == [1, 2]
    assert pairs[1] == ("a b c d e f", "x y")


def test_near_keys_in_any_script():
    assert near_key("Thank you!") == near_key("thank  you.") == "thank you"
    assert near_key("Xin chào, thế giới.") == "xin chào thế giới"
    assert near_key("你好，世界。") == near_key("你好 世界") != near_key("你好")


def test_the_split_keeps_near_duplicates_on_one_side_and_is_seeded():
    pairs = [(f"Thank you {i % 40}.", f"Merci {i % 40}.") for i in range(300)]
    pairs += [(f"thank you {i}!", f"merci {i} !") for i in range(40)]
    pairs += [(f"Sentence {i}.", f"Phrase {i}.") for i in range(500)]
    s = split_pairs(pairs, seed=1)
    assert s.duplicates == 260 and s.grouped == 80
    assert len(s.train) + len(s.valid) + len(s.test) == len(pairs) - 260
    sides = [{near_key(src) for src, _ in part} for part in (s.train, s.valid, s.test)]
    assert not (sides[0] & sides[1] or sides[0] & sides[2] or sides[1] & sides[2])
    assert 25 <= len(s.test) <= 35 and 25 <= len(s.valid) <= 35
    assert split_pairs(pairs, seed=1) == s and split_pairs(pairs, seed=2) != s


def test_character_coverage_follows_the_script():
    assert character_coverage(["Xin chào, thế giới.", "مرحبا بالعالم"]) == 1.0
    assert character_coverage(["你好，世界。"]) == CJK_COVERAGE
    assert character_coverage([]) == 1.0
