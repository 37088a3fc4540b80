"""Figures in the page's language (chapter 44, issue 60 item 2): transformer_lit.figures
draws a figure once per language asked for, each output marked with its language and alt
text; the book's extension keeps the page's language and gives the picture its alt."""
from __future__ import annotations

import re
import sys

import pytest

from transformer_lit import figures
from transformer_lit.validate import ArgumentError

from test_book import HTML, ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import figure_languages  # noqa: E402

ALT = ("A line that rises.", "一条上升的线。")


def draw(words):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [0, 1])
    ax.set_title(words("Rise", "上升"))
    return fig


def test_the_languages_come_from_the_environment(monkeypatch):
    monkeypatch.delenv(figures.FIGURES_ENV, raising=False)
    assert figures.languages() == ("en",)
    monkeypatch.setenv(figures.FIGURES_ENV, "en, zh_CN,en")
    assert figures.languages() == ("en", "zh_CN")
    monkeypatch.setenv(figures.FIGURES_ENV, "fr")
    with pytest.raises(ArgumentError, match=figures.FIGURES_ENV):
        figures.languages()


def test_show_draws_each_language_marked_with_its_alt(monkeypatch, shown):
    monkeypatch.setenv(figures.FIGURES_ENV, "en,zh_CN")
    titles = []
    figures.show(lambda w: titles.append(w("Rise", "上升")) or draw(w), ALT)
    assert titles == ["Rise", "上升"]
    assert [m["transformer_lit"] for _, m in shown] == [
        {"language": "en", "alt": ALT[0]}, {"language": "zh_CN", "alt": ALT[1]}]
    assert all(d["image/png"].startswith(b"\x89PNG") for d, _ in shown)
    assert shown[0][0]["image/png"] != shown[1][0]["image/png"]


def test_a_reader_sees_one_figure(monkeypatch, shown):
    monkeypatch.delenv(figures.FIGURES_ENV, raising=False)
    figures.show(draw, ALT)
    assert [m["transformer_lit"]["language"] for _, m in shown] == ["en"]


def test_the_chinese_figure_is_drawn_in_a_chinese_font(monkeypatch):
    import matplotlib
    assert figures.cjk_font() is not None   # make check-tools installs fonts-wqy-microhei
    with figures.style("zh_CN"):
        assert matplotlib.rcParams["font.sans-serif"][0] == figures.cjk_font()
    monkeypatch.setattr(figures, "cjk_font", lambda: None)
    with pytest.raises(RuntimeError, match="no font for Chinese"):
        with figures.style("zh_CN"):
            pass


@pytest.mark.parametrize("alt", [("only English",), ("", "空"), "a string"])
def test_alt_text_in_both_languages_is_required(alt, shown):
    with pytest.raises(ArgumentError, match="alt"):
        figures.show(draw, alt)


def marked(language, alt):
    return {"output_type": "display_data", "data": {"image/png": language},
            "metadata": {"transformer_lit": {"language": language, "alt": alt}}}


def test_the_book_keeps_the_pages_language_and_its_alt():
    plain = {"output_type": "stream", "name": "stdout", "text": "x"}
    cell = {"cell_type": "code", "metadata": {}, "outputs": [
        plain, marked("en", "English."), marked("zh_CN", "中文。")]}
    for language, kept, alt in [("zh_CN", "zh_CN", "中文。"), ("en", "en", "English."),
                                ("fr", "en", "English.")]:
        nb = {"cells": [json_copy(cell)]}
        assert figure_languages.keep_language(nb, language) == 1
        out = nb["cells"][0]
        assert out["outputs"][0] == plain and out["outputs"][1]["data"]["image/png"] == kept
        assert out["metadata"]["mystnb"]["image"]["alt"] == alt
    untouched = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [plain]}]}
    assert figure_languages.keep_language(untouched, "zh_CN") == 0


def json_copy(x):
    import json
    return json.loads(json.dumps(x))


@pytest.mark.parametrize("lang, alt", [("", "The training loss falls"),
                                       ("zh/", "训练损失在")])
def test_the_built_page_shows_one_figure_in_its_language(lang, alt):
    page = HTML / lang / "nbs" / "44_figures.html"
    if not page.exists():
        pytest.fail(f"no built book at {page}: run `make book` first")
    html = page.read_text(encoding="utf-8")
    images = re.findall(r'<img[^>]*alt="([^"]*)"[^>]*src="[^"]*_images/[^"]*\.png"', html)
    images += re.findall(r'<img[^>]*src="[^"]*_images/[^"]*\.png"[^>]*alt="([^"]*)"', html)
    assert len(images) == 1 and images[0].startswith(alt), images


# The notebooks whose stored figures are drawn in English only, still to be converted to
# figures.show (issue 60 item 2). The list only shrinks: a notebook converted leaves it,
# and no notebook outside it may store an unmarked image.
TO_CONVERT = ()
# converted: each stores its figures through figures.show
CONVERTED = ("02_positional_encoding", "03_attention", "04_masking", "06_feed_forward",
             "07_encoder", "08_decoder", "09_transformer", "12_data", "13_training",
             "18_pretrained", "20_analysis", "25_speed", "26_fast_decoding",
             "27_export", "30_onnx", "37_deeper_blocks", "38_deeper_model",
             "19_your_model", "41_deeper_decoding", "42_deeper_results", "44_figures")
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def image_outputs(path):
    "(cell id, the figures.show marking or None) for each image output stored in path."
    import json
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(cell.get("id"), out.get("metadata", {}).get("transformer_lit"))
            for cell in nb["cells"] if cell["cell_type"] == "code"
            for out in cell.get("outputs", [])
            if any(kind.startswith("image/") for kind in out.get("data", {}))]


NOTEBOOKS = sorted((ROOT / "nbs").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_figures_are_marked_with_their_language_and_alt(path):
    images = image_outputs(path)
    unmarked = [cell for cell, mark in images if mark is None]
    if path.stem in TO_CONVERT:
        assert unmarked, f"{path.stem} stores no unmarked figure: remove it from TO_CONVERT"
        return
    assert not unmarked, (f"{path.stem}: cells {unmarked} store a figure without its "
                          f"language: draw it with transformer_lit.figures.show")
    if path.stem in CONVERTED:
        assert images, f"{path.stem} stores no figure"
    cells = {}
    for cell, mark in images:
        cells.setdefault(cell, []).append(mark)
    for cell, marks in cells.items():
        assert [m["language"] for m in marks] == list(figures.LANGUAGES), (path.stem, cell)
        for m in marks:
            assert isinstance(m["alt"], str) and m["alt"].strip(), (path.stem, cell)
        assert CHINESE.search(marks[figures.LANGUAGES.index("zh_CN")]["alt"]), (
            f"{path.stem}, cell {cell}: the Chinese alt text has no Chinese")


def test_the_lists_of_notebooks_name_notebooks():
    stems = {p.stem for p in NOTEBOOKS}
    assert set(TO_CONVERT) <= stems and set(CONVERTED) <= stems
    assert not set(TO_CONVERT) & set(CONVERTED)
