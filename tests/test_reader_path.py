"""The reader's path (the parts before Engineering) as issue 48 set it: short enough to read,
in plain words, terms linked to the glossary, no talk of how the book is made.

The figures come from the tools that print them per chapter (tools/screens.py,
tools/sentences.py, tools/glossary_links.py, tools/process_words.py); each tool is also
checked on a small input whose answer is known, so a broken tool cannot pass the book.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import glossary_links  # noqa: E402
import process_words  # noqa: E402
import screens  # noqa: E402
import sentences  # noqa: E402

CORE = glossary_links.reader_chapters()
MAX_CORE_SCREENS, MAX_CHAPTER_SCREENS = 130, 16
MAX_WORDS, MAX_LONG_SHARE, MAX_CHAPTER_WORDS = 20, 10, 23


def test_the_core_is_the_transformer():
    "The core starts with the overview and leaves argument checking to the Reference part."
    assert CORE[0].endswith("_overview") and not any("validate" in s for s in CORE)
    assert any("validate" in s for caption, stems in screens.parts() if caption == "Reference"
               for s in stems)


def test_core_screens():
    counts = {s: screens.screens(s) for s in CORE}
    assert sum(counts.values()) <= MAX_CORE_SCREENS, f"{sum(counts.values()):.0f} screens"
    assert not {s: n for s, n in counts.items() if n > MAX_CHAPTER_SCREENS}


def test_core_sentences():
    n, words, over = sentences.figures(CORE)
    assert n > 500   # the whole core was read, not an empty list
    assert words <= MAX_WORDS and over <= MAX_LONG_SHARE, (words, over)
    per_chapter = {s: sentences.figures([s])[1] for s in CORE}
    assert not {s: w for s, w in per_chapter.items() if w > MAX_CHAPTER_WORDS}


def test_sentence_counter_on_known_text():
    text = ("The cat sat. It saw `a.b` and $x.y$ on the [mat](x.md)!\n\n"
            "- one item without a stop\n- two: more words here\n\n"
            "```python\nnot. counted. at. all.\n```\n# A heading is not a sentence\n")
    blocks = sentences.paragraphs(text)
    assert blocks == ["The cat sat. It saw CODE and MATH on the mat!",
                      "one item without a stop", "two: more words here"]


def test_glossary_terms_are_linked_at_first_use():
    missing = {s: glossary_links.unlinked(s) for s in CORE}
    assert not {s: m for s, m in missing.items() if m}


def test_glossary_link_check_finds_an_unlinked_term(monkeypatch):
    text = ("Here [dropout](../book/glossary.md#dropout) is linked, but beam search is "
            "not, and the second [beam search](../book/glossary.md#beam-search) is too late.")
    monkeypatch.setattr(glossary_links, "prose", lambda stem: text)
    assert glossary_links.unlinked("any") == ["beam search"]


def test_no_process_words_on_reader_pages():
    found = {s: process_words.hits(s) for s in CORE}
    assert not {s: h for s, h in found.items() if h}


@pytest.mark.parametrize("line", ["On a lent GPU it runs faster.", "CI runs it.",
                                  "the committed results", "see tests/test_model.py",
                                  "short trial runs chose it", "if QUICK: steps = 10"])
def test_process_words_are_caught(line):
    assert process_words.WORDS.search(line)
