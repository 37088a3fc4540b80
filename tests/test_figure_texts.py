"""Printed tables in the page's language (chapter 44's say, issue 60 item 2): the text is
written once per language asked for, each output marked; the book keeps the page's."""
from __future__ import annotations

import re

import pytest

from transformer_lit import figures
from transformer_lit.validate import ArgumentError

from test_book import HTML


def write(words):
    return f"{figures.ljust(words('system', '系统'), 10)}|"


def test_say_writes_each_language_marked(monkeypatch, shown):
    monkeypatch.setenv(figures.FIGURES_ENV, "en,zh_CN")
    figures.say(write)
    assert [(d["text/plain"], m["transformer_lit"]["language"]) for d, m in shown] == [
        ("system    |", "en"), ("系统      |", "zh_CN")]


def test_a_reader_sees_the_english_text(monkeypatch, shown):
    monkeypatch.delenv(figures.FIGURES_ENV, raising=False)
    figures.say(write)
    assert [d["text/plain"] for d, _ in shown] == ["system    |"]


def test_write_must_return_text(shown):
    with pytest.raises(ArgumentError, match="write must return"):
        figures.say(lambda words: None)


@pytest.mark.parametrize("text, columns", [("abc", 3), ("系统", 4), ("BLEU 分数", 9),
                                           ("", 0), ("ｆｕｌｌ", 8)])
def test_width_counts_a_wide_character_as_two_columns(text, columns):
    assert figures.width(text) == columns
    assert figures.width(figures.ljust(text, 12)) == max(12, columns)


ROWS = {"en": r"copy the source\s+2\.1", "zh_CN": r"照抄源句\s+2\.1"}   # page 44's table


@pytest.mark.parametrize("lang, kept, dropped", [("", "en", "zh_CN"), ("zh/", "zh_CN", "en")])
def test_the_built_page_prints_the_table_in_its_language(lang, kept, dropped):
    page = HTML / lang / "nbs" / "44_figures.html"
    if not page.exists():
        pytest.fail(f"no built book at {page}: run `make book` first")
    text = re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8"))   # the code holds both
    assert re.search(ROWS[kept], text) and not re.search(ROWS[dropped], text)
