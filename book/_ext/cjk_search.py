"""Sphinx extension: search that works in Chinese, by character bigrams.

Chinese is written without spaces, so Sphinx's default splitter sees a whole sentence as one
word, and its own Chinese splitter needs jieba and a dictionary (and made the book's build
about three times longer). Here each run of Chinese characters is indexed as its single
characters and its overlapping pairs of characters ("解码器" -> 解, 码, 器, 解码, 码器), and a
query is split the same way in the browser (`splitQuery`, in language_data.js): a query of two
or more characters asks for all of its pairs, so a page is found when it contains them. Latin
words are split and stemmed as in English. Registered as the search language "zh".
"""
from __future__ import annotations

import re

import snowballstemmer
from sphinx.search import SearchLanguage, languages
from sphinx.search.zh import english_stopwords, js_porter_stemmer

# the CJK Unified Ideographs (and their Extension A and compatibility blocks)
CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUN = re.compile(rf"[{CJK}]+|[^\W{CJK}]+")  # a word's Chinese and other runs
_IS_CJK = re.compile(rf"[{CJK}]")

# The same split in JavaScript. Sphinx writes this into language_data.js through a
# template that may escape HTML's special characters, so the code uses none of them.
JS_SPLITTER = r"""
function splitQuery(query) {
  var out = [];
  var cjk = /[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]/u;
  query.split(/[^\p{L}\p{N}_]+/u).forEach(function (word) {
    var runs = word.match(/[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[^\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+/gu) || [];
    runs.forEach(function (run) {
      var chars = Array.from(run);
      if (!cjk.test(run) || chars.length === 1) { out.push(run); return; }
      chars.slice(1).forEach(function (c, i) { out.push(chars[i] + c); });
    });
  });
  return out;
}
"""


def split_words(text: str) -> list[str]:
    "Latin words, and each Chinese run's characters and character pairs."
    out = []
    for run in _RUN.findall(text):
        if _IS_CJK.match(run):
            out += list(run) + [a + b for a, b in zip(run, run[1:])]
        else:
            out.append(run)
    return out


def query_terms(query: str) -> list[str]:
    "What JS_SPLITTER makes of a query: its Latin words and its Chinese runs' pairs."
    out = []
    for run in _RUN.findall(query):
        if _IS_CJK.match(run) and len(run) > 1:
            out += [a + b for a, b in zip(run, run[1:])]
        else:
            out.append(run)
    return out


class BigramChinese(SearchLanguage):
    "Chinese by character pairs; Latin words as in English."

    lang = "zh"
    language_name = "Chinese"
    js_stemmer_code = js_porter_stemmer
    js_splitter_code = JS_SPLITTER
    stopwords = english_stopwords

    def init(self, options: dict[str, str]) -> None:
        self.stemmer = snowballstemmer.stemmer("porter")  # as the browser's

    def split(self, input: str) -> list[str]:
        return split_words(input)

    def word_filter(self, stemmed_word: str) -> bool:
        return len(stemmed_word) > 1 or bool(_IS_CJK.match(stemmed_word))

    def stem(self, word: str) -> str:
        return word if _IS_CJK.match(word) else self.stemmer.stemWord(word.lower())


def setup(app):
    languages["zh"] = BigramChinese
    return {"parallel_read_safe": True, "parallel_write_safe": True}
