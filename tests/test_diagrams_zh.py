"""The Chinese edition's diagrams (issue 60, item 2): each of the book's SVG diagrams is drawn
in Chinese too (nbs/figures/NAME.zh_CN.svg, by tools/diagrams.py, labels from its table ZH),
with no English label words left but code names, shapes and the example sentences; the
Chinese pages show the Chinese drawings, and every diagram's alt text is in both languages.

The Chinese build picks the Chinese file by itself: a chapter's `<img src="figures/NAME.svg">`
is a Sphinx image (MyST's html_image, book/_ext/nbdev_directives.py), and Sphinx's
`figure_language_filename` ('{root}.{language}{ext}') prefers NAME.zh_CN.svg on the zh_CN
build. The alt texts are messages of the pages' catalogues, like the prose.
"""
from __future__ import annotations

import html
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "nbs" / "figures"
HTML = ROOT / "_build" / "html"
SVG_NS = "{http://www.w3.org/2000/svg}"
CJK = re.compile(r"[\u3400-\u9fff]")
IMG = re.compile(r"<img\b[^>]*>")
sys.path.insert(0, str(ROOT / "tools"))
import diagrams  # noqa: E402

ENGLISH = sorted(p for p in FIGURES.glob("*.svg") if not p.stem.endswith(".zh_CN"))


def chinese_file(path: Path) -> Path:
    return path.with_name(f"{path.stem}.zh_CN.svg")


def placements() -> list[tuple[str, str, str]]:
    "(notebook stem, figure file name, English alt) of every diagram a chapter shows."
    found = []
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for tag in IMG.findall("".join(cell["source"])):
                src = re.search(r'src="figures/([^"]*\.svg)"', tag)
                alt = re.search(r'alt="([^"]*)"', tag)
                if src:
                    found.append((nb.stem, src.group(1), alt.group(1) if alt else ""))
    return found


def texts(path: Path) -> list[str]:
    "The text of every <text> of an SVG file."
    root = ET.parse(path).getroot()
    return ["".join(t.itertext()) for t in root.iter(f"{SVG_NS}text")]


def test_every_diagram_has_a_chinese_drawing():
    assert len(ENGLISH) >= 9
    missing = [p.name for p in ENGLISH if not chinese_file(p).is_file()]
    assert not missing, f"no Chinese drawing of {missing}: run tools/diagrams.py"


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: p.stem)
def test_chinese_drawing_is_chinese(path: Path):
    """Every label of the Chinese drawing is Chinese, but for code names, shapes, letters and
    the example tokens (diagrams.KEPT); its <title> and <desc> are Chinese too."""
    zh = chinese_file(path)
    assert zh.is_file(), f"no {zh.name}"
    root = ET.parse(zh).getroot()
    for tag in ("title", "desc"):
        el = root.find(f"{SVG_NS}{tag}")
        assert el is not None and CJK.search(el.text or ""), f"{zh.name}: <{tag}> not Chinese"
    english = {s: diagrams.english_words(s) for s in texts(zh)}
    left = {s: w for s, w in english.items() if w}
    assert not left, f"{zh.name}: English words left: {left}"
    assert sum(bool(CJK.search(s)) for s in english) >= 5, f"{zh.name}: hardly any Chinese"
    # the same drawing: as many labels as the English one, which is unchanged
    assert len(texts(zh)) == len(texts(path))


def test_english_words_check_is_not_vacuous():
    assert diagrams.english_words("add & norm") == ["add", "norm"]
    assert diagrams.english_words("记忆 (B, S, D)") == []
    assert diagrams.english_words("padding_mask(src, pad)") == []
    assert diagrams.english_words("第 t 步写入") == []


def test_chinese_text_is_measured_with_the_cjk_font():
    "A CJK character is one em wide (WenQuanYi Micro Hei), not DejaVu Sans's missing-glyph box."
    assert diagrams.text_width("编码器", 16, cjk=True) == pytest.approx(48)
    assert diagrams.text_width("abc", 16, cjk=True) == pytest.approx(diagrams.text_width("abc", 16))


def test_chinese_drawings_pass_the_layout_checks():
    "Every Chinese drawing passes Svg.check (overlaps, crossings, text outside its box)."
    for name in diagrams.DIAGRAMS:
        with diagrams.language("zh_CN"):
            diagrams.DIAGRAMS[name]().check()


def test_a_missing_label_is_refused():
    "An English label with no entry in the table stops the Chinese drawing."
    svg = diagrams.Svg(100, "t", "d")
    with diagrams.language("zh_CN"):
        svg.text(50, 20, "a label nobody translated", 12)
        svg.height = 40
        with pytest.raises(ValueError, match="English"):
            svg.check()


def catalogue(stem: str) -> dict[str, tuple[str, bool]]:
    import polib
    po = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / "nbs" / f"{stem}.po"
    return {" ".join(e.msgid.split()): (e.msgstr, "fuzzy" in e.flags)
            for e in polib.pofile(str(po))} if po.exists() else {}


@pytest.mark.parametrize("stem, name, alt", placements(), ids=lambda v: str(v)[:30])
def test_every_diagram_alt_is_translated(stem: str, name: str, alt: str):
    """The chapter's English alt text has a Chinese translation in the page's catalogue, not
    fuzzy: an alt changed in the notebook has no translation until make translations and a
    translator have seen it."""
    assert alt.split(), f"{stem}: {name} has no alt text"
    entry = catalogue(stem).get(" ".join(alt.split()))
    assert entry, f"{stem}: the alt of {name} is not in the catalogue (run make translations)"
    msgstr, fuzzy = entry
    assert msgstr.strip() and not fuzzy and CJK.search(msgstr), (
        f"{stem}: the alt of {name} has no (or a fuzzy) translation")


def test_a_changed_alt_is_noticed():
    "The check above fails for an alt text the catalogue has not seen."
    stem, _, alt = placements()[0]
    assert " ".join(alt.split()) in catalogue(stem)
    assert " ".join((alt + " Changed.").split()) not in catalogue(stem)


def built_images(page: Path) -> list[dict[str, str]]:
    tags = IMG.findall(page.read_text(encoding="utf-8"))
    return [{k: html.unescape(v) for k, v in re.findall(r'\b(src|alt|class)="([^"]*)"', t)}
            for t in tags]


@pytest.mark.parametrize("stem, name, alt", placements(), ids=lambda v: str(v)[:30])
def test_built_pages_show_each_language_its_drawing(stem: str, name: str, alt: str):
    """The built Chinese page shows NAME.zh_CN.svg with the Chinese alt text; the English
    page shows NAME.svg with the English one. Both files are in the built site."""
    en, zh = HTML / "nbs" / f"{stem}.html", HTML / "zh" / "nbs" / f"{stem}.html"
    if not (en.exists() and zh.exists()):
        pytest.fail(f"no built book at {HTML}: run `make book` first")
    root = Path(name).stem
    en_imgs = [i for i in built_images(en) if Path(i.get("src", "")).stem.split(".")[0] == root]
    zh_imgs = [i for i in built_images(zh) if Path(i.get("src", "")).stem.split(".")[0] == root]
    assert en_imgs and zh_imgs, f"{stem}: {name} not on both pages"
    for img in en_imgs:
        assert img["src"].endswith(f"/{root}.svg"), f"en {stem}: {img['src']}"
        assert img.get("alt", "").split() == html.unescape(alt).split()
        assert (en.parent / img["src"]).resolve().is_file()
    for img in zh_imgs:
        assert img["src"].endswith(f"/{root}.zh_CN.svg"), f"zh {stem}: shows {img['src']}"
        assert CJK.search(img.get("alt", "")), f"zh {stem}: alt of {name} not Chinese"
        assert (zh.parent / img["src"]).resolve().is_file()
