"""Draw the book's structure diagrams as SVG files.

    python tools/diagrams.py            # writes nbs/figures/*.svg (commit them)
    python tools/diagrams.py OUT_DIR    # writes them into OUT_DIR instead (tests/test_diagrams.py)

Each diagram is drawn twice: NAME.svg in English and NAME.zh_CN.svg for the Chinese edition,
its labels from the table ZH below (its <desc> from ZH_DESC). The chapters show NAME.svg; the
Chinese build shows NAME.zh_CN.svg in its place by itself (a chapter's <img> is a Sphinx image,
book/_ext/nbdev_directives.py, and Sphinx's figure_language_filename prefers the file named
for the build's language). The alt texts are the chapters' own, translated in their catalogues.

Each diagram is one function below that returns an `Svg`. The SVG is written by hand (boxes,
lines and real <text>), so the text stays sharp at any zoom and can be searched; matplotlib is
used only to measure text. Nothing random, no dates, no generated ids (so no `svg.hashsalt` to
set): running the script twice gives the same bytes, which the tests check.

Text widths are measured with DejaVu Sans, the font matplotlib ships and the first font the SVG
asks for; in a Chinese drawing the characters DejaVu lacks are measured with WenQuanYi Micro
Hei, the first of the CJK fonts that drawing asks for next (a CJK character is one em wide in
all of them). Before a file is written, `Svg.check` refuses a label that overlaps another label,
is crossed by a line or sticks out of its box, and a line that runs through a box, and in a
Chinese drawing a label that is still English (`english_words`): a layout that would make a
reader stumble fails here rather than in a screenshot.

Conventions shared by all diagrams: data flows upwards, as in the paper's figures; colours follow
the paper's Figure 1 (orange attention, blue feed-forward, yellow add & norm, pink embeddings);
shapes use the book's letters (chapter 01): B batch, S source length, T target length,
D = d_model, H heads, Dh = D/H, F = d_ff, V vocabulary. Each is drawn 640-720 px wide with
14-16 px text, for the book's text column at 1280 px (book/_static/custom.css keeps them
readable on a phone).
"""
from __future__ import annotations

import contextlib
import functools
import logging
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "nbs" / "figures"

FONT = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
# the Chinese drawings: the same fonts for Latin text, then CJK fonts for the rest (a browser
# takes each character from the first font that has it); measured with WenQuanYi Micro Hei
CJK_FONTS = ("WenQuanYi Micro Hei, Noto Sans CJK SC, Source Han Sans SC, PingFang SC, "
             "Microsoft YaHei")
FONT_ZH = FONT.replace(", sans-serif", f", {CJK_FONTS}, sans-serif")
MONO_ZH = MONO.replace(", monospace", f", {CJK_FONTS}, monospace")
INK, LINE, MUTED, WHITE = "#1f2328", "#4b5563", "#6b7280", "#ffffff"
ATTN, FFN, NORM, EMB, OUT = "#fcd9b6", "#cfe3f6", "#fff0a6", "#f8d3de", "#e3d9f4"
FRAME, FRAME_EDGE = "#f3f4f6", "#aab2bd"
MAY, BLOCKED = "#2b7bba", "#d9d9d9"                 # chapter 04's mask colours
NEW, OLD, CROSS = "#f59e0b", "#93c5fd", "#a7d7c5"   # cache slots: written now, earlier; cross
SKIP = "#2a9d8f"                                    # the residual path in norm_placement
LABEL, SMALL, SHAPE = 16, 14, 14                    # font sizes, in px of the viewBox

Point = tuple[float, float]


# -- measuring and checking ------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def text_width(s: str, size: float, mono: bool = False, bold: bool = False,
               cjk: bool = False) -> float:
    "Width of s in px at font size `size`, measured with DejaVu Sans (Mono), then (cjk) WenQuanYi."
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath
    family = ["DejaVu Sans Mono" if mono else "DejaVu Sans"]
    if cjk:   # the characters DejaVu lacks come from the CJK font, as in the browser
        family.append("WenQuanYi Micro Hei Mono" if mono else "WenQuanYi Micro Hei")
    font = FontProperties(family=family, weight="bold" if bold else "normal", size=100)
    # WenQuanYi has no bold face: matplotlib measures its regular one and logs that it did
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    w, _, _ = TextToPath().get_text_width_height_descent(s, font, ismath=False)
    return w * size / 100


def num(v: float) -> str:
    "A coordinate as short, fixed text: 12, 12.5, 12.25 (never 12.000000001)."
    s = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if s == "-0" else s


# -- the two languages -------------------------------------------------------------------------
LANGUAGES = ("en", "zh_CN")   # zh_CN: NAME.zh_CN.svg, which Sphinx's Chinese build shows
_LANGUAGE = ["en"]


@contextlib.contextmanager
def language(lang: str):
    "Draw in `lang` inside the block: Svg.text and Svg.render translate through ZH."
    assert lang in LANGUAGES, lang
    _LANGUAGE.append(lang)
    try:
        yield
    finally:
        _LANGUAGE.pop()


def chinese() -> bool:
    return _LANGUAGE[-1] == "zh_CN"


def tr(s: str) -> str:
    "s in the language being drawn: the English itself, or its entry in ZH (else s unchanged)."
    return ZH.get(s, s) if chinese() else s


# Words a Chinese drawing keeps in Latin letters: names the Chinese chapters keep too (glossary:
# Transformer, softmax, logits), shape letters, code values, the example sentences' tokens.
KEPT = {"Transformer", "softmax", "argmax", "logits", "Concat", "log", "True", "False",
        "Tq", "Tk", "Dh", "Tmax",
        "the", "cat", "sat", "le", "chat", "assit", "pad", "un", "chien", "dort", "mange", "est"}
_WORD = re.compile(r"[A-Za-z][A-Za-z_]*[A-Za-z]")
_CODE_AFTER = re.compile(r"\s*(=|//|%)|[(.]")   # `rows = `, `index // V`, `f(`, `cache.`
_CODE_BEFORE = re.compile(r"(=|//|%)\s*$|\.$|\w\($")   # `= index`, `.reorder`, `f(rows`


def english_words(s: str) -> list[str]:
    """The English words of a label: words of two or more letters that are neither in KEPT nor
    code (a name with _, or a name in an expression: `cache.reorder(rows)`, `index // V`)."""
    words = []
    for m in _WORD.finditer(s):
        w = m.group()
        code = ("_" in w or _CODE_AFTER.match(s, m.end()) is not None
                or _CODE_BEFORE.search(s[:m.start()]) is not None)
        if w not in KEPT and not code:
            words.append(w)
    return words


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    @property
    def top(self) -> float:
        return self.y

    @property
    def bottom(self) -> float:
        return self.y + self.h

    @property
    def left(self) -> float:
        return self.x

    @property
    def right(self) -> float:
        return self.x + self.w

    def inset(self, d: float) -> Box:
        return Box(self.x + d, self.y + d, self.w - 2 * d, self.h - 2 * d)

    def overlaps(self, o: Box) -> bool:
        return self.x < o.right and o.x < self.right and self.y < o.bottom and o.y < self.bottom

    def contains(self, o: Box) -> bool:
        return (self.x <= o.x and o.right <= self.right
                and self.y <= o.y and o.bottom <= self.bottom)


def segment_hits(box: Box, a: Point, b: Point) -> bool:
    "Does the segment a-b pass through the open box? (Liang-Barsky clipping.)"
    (x0, y0), (x1, y1) = a, b
    dx, dy, t0, t1 = x1 - x0, y1 - y0, 0.0, 1.0
    for p, q in ((-dx, x0 - box.x), (dx, box.right - x0), (-dy, y0 - box.y),
                 (dy, box.bottom - y0)):
        if p == 0:
            if q <= 0:
                return False
            continue
        if p < 0:
            t0 = max(t0, q / p)
        else:
            t1 = min(t1, q / p)
        if t0 >= t1:
            return False
    return True


# -- the drawing ------------------------------------------------------------------------------
class Svg:
    "SVG elements in drawing order, plus what `check` needs to find collisions."

    def __init__(self, width: float, title: str, desc: str):
        self.width, self.height, self.title, self.desc = width, 0.0, title, desc
        self.parts: list[str] = []
        self.texts: list[tuple[Box, str]] = []
        self.solids: list[tuple[Box, str]] = []   # boxes that lines must not cross
        self.frames: list[tuple[Box, str]] = []   # containers: a label is inside or outside
        self.segments: list[tuple[Point, Point]] = []
        self.english: list[str] = []              # Chinese drawing: labels still English

    def rect(self, box: Box, fill: str, stroke: str = LINE, rx: float = 6, width: float = 1.3,
             dash: str | None = None, solid: bool | None = True, name: str = "") -> Box:
        "A rectangle: solid (lines may not cross it), a frame (False), or unchecked (None)."
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(
            f'<rect x="{num(box.x)}" y="{num(box.y)}" width="{num(box.w)}" '
            f'height="{num(box.h)}" rx="{num(rx)}" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="{num(width)}"{extra}/>')
        if solid is not None:
            (self.solids if solid else self.frames).append((box, name))
        return box

    def text(self, x: float, y: float, s: str, size: float = LABEL, anchor: str = "middle",
             mono: bool = False, bold: bool = False, italic: bool = False, color: str = INK,
             check: bool = True, rotate: bool = False) -> Box:
        "One line of text whose vertical middle is at y (rotate: reads upwards, middle at x)."
        s = tr(s)
        if chinese() and english_words(s):
            self.english.append(s)
        w = text_width(s, size, mono, bold, cjk=chinese())
        if rotate:   # a quarter turn anticlockwise: the text runs upwards from y
            y0 = {"start": y - w, "middle": y - w / 2, "end": y}[anchor]
            bbox = Box(x - 0.42 * size, y0, 0.84 * size, w)
            bx = x + 0.36 * size
            attrs = [f'x="{num(bx)}"', f'y="{num(y)}"',
                     f'transform="rotate(-90 {num(bx)} {num(y)})"', f'font-size="{num(size)}"']
        else:
            x0 = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
            bbox = Box(x0, y - 0.42 * size, w, 0.84 * size)
            attrs = [f'x="{num(x)}"', f'y="{num(y + 0.36 * size)}"', f'font-size="{num(size)}"']
        if anchor != "start":
            attrs.append(f'text-anchor="{anchor}"')
        if mono:
            attrs.append(f'font-family="{MONO_ZH if chinese() else MONO}"')
        if bold:
            attrs.append('font-weight="bold"')
        if italic:
            attrs.append('font-style="italic"')
        if color != INK:
            attrs.append(f'fill="{color}"')
        self.parts.append(f'<text {" ".join(attrs)}>{escape(s)}</text>')
        if check:
            self.texts.append((bbox, s))
        return bbox

    def lines(self, x: float, cy: float, rows: list[str], size: float = LABEL, **kw) -> None:
        "Several lines of text, centred as a block on cy."
        top = cy - (len(rows) - 1) * size * 1.25 / 2
        for i, row in enumerate(rows):
            self.text(x, top + i * size * 1.25, row, size, **kw)

    def box(self, box: Box, fill: str, rows: list[str] | str, size: float = LABEL,
            note: str | None = None, **kw) -> Box:
        "A filled box with centred text; `note` adds a smaller grey line under it."
        self.rect(box, fill, **kw)
        rows = [rows] if isinstance(rows, str) else list(rows)
        if note is None:
            self.lines(box.cx, box.cy, rows, size)
            return box
        top = box.cy - (len(rows) * size * 1.25 + SMALL * 1.25) / 2 + size * 0.6
        for i, row in enumerate(rows):
            self.text(box.cx, top + i * size * 1.25, row, size)
        self.text(box.cx, top + len(rows) * size * 1.25 + 1, note, SMALL, color=MUTED,
                  italic=True)
        return box

    def path(self, points: list[Point], color: str = LINE, width: float = 1.6,
             dash: str | None = None) -> None:
        d = " ".join(f"{'L' if i else 'M'}{num(x)},{num(y)}" for i, (x, y) in enumerate(points))
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<path d="{d}" fill="none" stroke="{color}" '
                          f'stroke-width="{num(width)}" stroke-linejoin="round"{extra}/>')
        self.segments.extend(zip(points, points[1:]))

    def arrow(self, points: list[Point], color: str = LINE, width: float = 1.6, head: float = 9,
              dash: str | None = None) -> None:
        "A polyline ending in an arrowhead whose tip is exactly the last point."
        (x0, y0), (x1, y1) = points[-2], points[-1]
        length = math.hypot(x1 - x0, y1 - y0)
        ux, uy = (x1 - x0) / length, (y1 - y0) / length
        bx, by = x1 - ux * head, y1 - uy * head
        self.path(points[:-1] + [(bx, by)], color, width, dash)
        half = head * 0.45
        tip = [(x1, y1), (bx - uy * half, by + ux * half), (bx + uy * half, by - ux * half)]
        self.parts.append('<path d="M' + " L".join(f"{num(x)},{num(y)}" for x, y in tip)
                          + f' Z" fill="{color}"/>')

    def dot(self, x: float, y: float, r: float = 3.2, color: str = LINE) -> None:
        self.parts.append(f'<circle cx="{num(x)}" cy="{num(y)}" r="{num(r)}" fill="{color}"/>')

    def plus(self, x: float, y: float, r: float = 10) -> Box:
        "The ⊕ of a residual addition."
        a = r * 0.6
        self.parts.append(f'<circle cx="{num(x)}" cy="{num(y)}" r="{num(r)}" fill="{WHITE}" '
                          f'stroke="{LINE}" stroke-width="1.5"/>')
        self.parts.append(f'<path d="M{num(x - a)},{num(y)} L{num(x + a)},{num(y)} '
                          f'M{num(x)},{num(y - a)} L{num(x)},{num(y + a)}" '
                          f'stroke="{LINE}" stroke-width="1.5"/>')
        b = Box(x - r, y - r, 2 * r, 2 * r)
        self.solids.append((b, "+"))
        return b

    def heading(self, s: str, sub: str | None = None) -> float:
        "The title at the top, and an optional grey line under it; returns the y below them."
        self.text(self.width / 2, 22, s, 18, bold=True)
        if sub:
            self.text(self.width / 2, 46, sub, SMALL, color=MUTED)
            return 62
        return 40

    def check(self) -> None:
        "Raise if a label overlaps a label, is crossed by a line, or straddles a box's edge."
        problems = []
        page = Box(0, 0, self.width, self.height).inset(2)
        for i, (a, s) in enumerate(self.texts):
            if not page.contains(a):
                problems.append(f"text {s!r} leaves the drawing")
            problems += [f"texts {s!r} and {t!r} overlap"
                         for b, t in self.texts[i + 1:] if a.inset(-1).overlaps(b)]
            problems += [f"text {s!r} straddles the edge of box {name or b}"
                         for b, name in self.solids + self.frames
                         if a.overlaps(b) and not b.inset(2).contains(a)]
            problems += [f"text {s!r} is crossed by a line {p}-{q}"
                         for p, q in self.segments if segment_hits(a.inset(-1.5), p, q)]
        problems += [f"a line {p}-{q} runs through box {name or b}"
                     for b, name in self.solids for p, q in self.segments
                     if segment_hits(b.inset(1), p, q)]
        problems += [f"text {s!r} keeps English words {english_words(s)}: add it to ZH"
                     for s in self.english]
        if chinese():
            problems += [f"no Chinese {what} of {self.title!r} in {table}"
                         for what, table, d in (("title", "ZH", ZH), ("desc", "ZH_DESC", ZH_DESC))
                         if self.title not in d]
        if problems:
            raise ValueError(f"{self.title}:\n  " + "\n  ".join(problems))

    def render(self) -> str:
        self.check()
        w, h = num(self.width), num(self.height)
        lang, font = (' xml:lang="zh-CN"', FONT_ZH) if chinese() else ("", FONT)
        return "\n".join([
            f'<svg xmlns="http://www.w3.org/2000/svg"{lang} viewBox="0 0 {w} {h}" width="{w}" '
            f'height="{h}" role="img" aria-labelledby="title desc" font-family="{font}" '
            f'fill="{INK}">',
            f'<title id="title">{escape(tr(self.title))}</title>',
            f'<desc id="desc">{escape(ZH_DESC[self.title] if chinese() else self.desc)}</desc>',
            f'<rect width="{w}" height="{h}" fill="{WHITE}"/>',
            *self.parts,
            "</svg>",
        ]) + "\n"


# -- shared pieces ----------------------------------------------------------------------------
def shape_label(svg: Svg, x: float, y: float, s: str, anchor: str = "start") -> Box:
    return svg.text(x, y, s, SHAPE, anchor=anchor, mono=True, color=MUTED)


def residual(svg: Svg, stream_x: float, branch_y: float, side_x: float, target: Box) -> None:
    "The skip connection: from the stream at branch_y, round the side, into the target's flank."
    edge = target.right if side_x > target.right else target.left
    svg.dot(stream_x, branch_y)
    svg.arrow([(stream_x, branch_y), (side_x, branch_y), (side_x, target.cy), (edge, target.cy)])


def three_inputs(svg: Svg, cx: float, below: float, box: Box, spread: float = 58) -> None:
    "Self-attention: the stream splits into query, key and value, as in the paper's Figure 1."
    y = box.bottom + 12
    svg.path([(cx, below), (cx, y)])
    svg.path([(cx - spread, y), (cx + spread, y)])
    for x in (cx - spread, cx, cx + spread):
        svg.arrow([(x, y), (x, box.bottom)], head=7)


def grid(svg: Svg, x: float, y: float, cell: float, fills: list[list[str]],
         texts: list[list[str]] | None = None, name: str = "grid") -> Box:
    "Square cells, rows top to bottom, optionally with a short text each; returns the outline."
    for i, row in enumerate(fills):
        for j, fill in enumerate(row):
            svg.parts.append(
                f'<rect x="{num(x + j * cell)}" y="{num(y + i * cell)}" width="{num(cell)}" '
                f'height="{num(cell)}" fill="{fill}" stroke="{WHITE}" stroke-width="1.5"/>')
            if texts and texts[i][j]:
                svg.text(x + (j + 0.5) * cell, y + (i + 0.5) * cell, texts[i][j], 12,
                         check=False)
    box = Box(x, y, cell * len(fills[0]), cell * len(fills))
    svg.solids.append((box, name))
    return box


def blend(colour: str, amount: float) -> str:
    "colour mixed with white: amount 1 is the colour, 0 is white."
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(255 + (c - 255) * amount):02x}" for c in rgb)


def mask_fills(mask: list[list[bool]]) -> list[list[str]]:
    return [[MAY if m else BLOCKED for m in row] for row in mask]


def input_box(svg: Svg, cx: float, y: float, letter: str, shape: str) -> Box:
    "An input: a letter in a white box, its shape underneath."
    b = svg.box(Box(cx - 25, y, 50, 30), WHITE, letter)
    shape_label(svg, cx, b.bottom + 14, shape, anchor="middle")
    return b


# -- (a) the whole model, for chapter 01 --------------------------------------------------------
def architecture() -> Svg:
    svg = Svg(712, "The Transformer: encoder, decoder and output projection, with tensor shapes", (
        "Bottom-up data path of the encoder-decoder Transformer (post-norm, as in the paper). "
        "Left: source tokens (B, S) are embedded, scaled by the square root of D and added to "
        "the positional encoding, then pass N encoder layers, each multi-head self-attention "
        "and a feed-forward network, each followed by add & norm with a residual path. The "
        "encoder output, the memory (B, S, D), enters every decoder layer's cross-attention "
        "as keys and values. Right: target tokens shifted right (B, T) are embedded the same "
        "way and pass N decoder layers: masked self-attention, cross-attention with queries "
        "from the decoder, and feed-forward, each with add & norm. A linear layer tied to the "
        "target embedding gives logits (B, T, V) and a softmax the next-token probabilities."))
    top = svg.heading("The Transformer (post-norm, as in the paper)")
    BW = 230
    enc_x, dec_x = 86 + BW / 2, 394 + BW / 2
    (enc_l, enc_r), (dec_l, dec_r) = (54, 332), (378, 656)   # the two layer frames

    def at(x: float, y: float, h: float) -> Box:
        return Box(x - BW / 2, y, BW, h)

    # the decoder, laid out top-down from its output
    out_y = top + 14
    svg.text(dec_x, out_y, "next-token probabilities", 15)
    softmax = svg.box(at(dec_x, out_y + 44, 34), OUT, "softmax over V")
    svg.arrow([(dec_x, softmax.top), (dec_x, out_y + 12)])
    shape_label(svg, dec_x + 8, softmax.top - 17, "(B, T, V)")
    linear = svg.box(at(dec_x, softmax.bottom + 34, 50), OUT, "linear  D → V",
                     note="weights = target embedding")
    svg.arrow([(dec_x, linear.top), (dec_x, softmax.bottom)])
    shape_label(svg, dec_x + 8, linear.top - 17, "(B, T, V) logits")
    frame_top = linear.bottom + 34
    an3 = at(dec_x, frame_top + 12, 30)
    ffn = at(dec_x, an3.bottom + 22, 40)
    an2 = at(dec_x, ffn.bottom + 34, 30)
    cross = at(dec_x, an2.bottom + 22, 66)
    an1 = at(dec_x, cross.bottom + 44, 30)
    self_attn = at(dec_x, an1.bottom + 22, 66)
    frame_bottom = self_attn.bottom + 46
    frame = Box(dec_l, frame_top, dec_r - dec_l, frame_bottom - frame_top)
    svg.rect(frame, FRAME, FRAME_EDGE, rx=10, solid=False, name="decoder layer")
    svg.text(frame.right + 14, frame.cy, "× N", LABEL, bold=True, anchor="start")
    svg.box(self_attn, ATTN, ["masked multi-head", "self-attention"],
            note="mask: causal")
    svg.box(an1, NORM, "add & norm")
    svg.box(cross, ATTN, ["multi-head", "cross-attention"], note="mask: source padding")
    svg.box(an2, NORM, "add & norm")
    svg.box(ffn, FFN, "feed-forward")
    svg.box(an3, NORM, "add & norm")
    svg.arrow([(dec_x, an3.top), (dec_x, linear.bottom)])
    shape_label(svg, dec_x + 8, frame_top - 17, "(B, T, D)")
    emb = svg.box(at(dec_x, frame_bottom + 34, 50), EMB,
                  ["embedding × √D", "+ positional encoding"], 15)
    shape_label(svg, dec_x + 8, emb.top - 17, "(B, T, D)")
    tgt_y = emb.bottom + 56
    svg.text(dec_x, tgt_y, "target tokens, shifted right", 15)
    svg.arrow([(dec_x, tgt_y - 12), (dec_x, emb.bottom)])
    shape_label(svg, dec_x + 8, emb.bottom + 22, "(B, T)")
    side = dec_r - 16
    three_inputs(svg, dec_x, emb.top, self_attn)                  # masked self-attention
    residual(svg, dec_x, frame_bottom - 10, side, an1)
    svg.arrow([(dec_x, self_attn.top), (dec_x, an1.bottom)])
    svg.arrow([(dec_x, an1.top), (dec_x, cross.bottom)])         # cross-attention: Q from below
    svg.text(dec_x - 8, cross.bottom + 14, "Q", SMALL, anchor="end", bold=True)
    residual(svg, dec_x, an1.top - 12, side, an2)
    svg.arrow([(dec_x, cross.top), (dec_x, an2.bottom)])
    svg.arrow([(dec_x, an2.top), (dec_x, ffn.bottom)])           # feed-forward
    residual(svg, dec_x, an2.top - 12, side, an3)
    svg.arrow([(dec_x, ffn.top), (dec_x, an3.bottom)])

    # the encoder, top-down from the memory line at the height of the cross-attention
    memory_y = cross.cy
    e_an2 = at(enc_x, memory_y + 56, 30)
    e_ffn = at(enc_x, e_an2.bottom + 22, 40)
    e_an1 = at(enc_x, e_ffn.bottom + 34, 30)
    e_attn = at(enc_x, e_an1.bottom + 22, 66)
    e_frame = Box(enc_l, e_an2.top - 12, enc_r - enc_l, e_attn.bottom + 58 - e_an2.top)
    svg.rect(e_frame, FRAME, FRAME_EDGE, rx=10, solid=False, name="encoder layer")
    svg.text(e_frame.left - 14, e_frame.cy, "N ×", LABEL, bold=True, anchor="end")
    svg.box(e_attn, ATTN, ["multi-head", "self-attention"], note="mask: source padding")
    svg.box(e_an1, NORM, "add & norm")
    svg.box(e_ffn, FFN, "feed-forward")
    svg.box(e_an2, NORM, "add & norm")
    e_emb = svg.box(at(enc_x, e_frame.bottom + 34, 50), EMB,
                    ["embedding × √D", "+ positional encoding"], 15)
    shape_label(svg, enc_x + 8, e_frame.bottom + 17, "(B, S, D)")
    src_y = e_emb.bottom + 56
    svg.text(enc_x, src_y, "source tokens", 15)
    svg.arrow([(enc_x, src_y - 12), (enc_x, e_emb.bottom)])
    shape_label(svg, enc_x + 8, e_emb.bottom + 22, "(B, S)")
    side = enc_l + 16
    three_inputs(svg, enc_x, e_emb.top, e_attn)
    residual(svg, enc_x, e_frame.bottom - 10, side, e_an1)
    svg.arrow([(enc_x, e_attn.top), (enc_x, e_an1.bottom)])
    svg.arrow([(enc_x, e_an1.top), (enc_x, e_ffn.bottom)])
    residual(svg, enc_x, e_an1.top - 12, side, e_an2)
    svg.arrow([(enc_x, e_ffn.top), (enc_x, e_an2.bottom)])
    # the memory: up out of the encoder, across into the flank of the cross-attention
    svg.arrow([(enc_x, e_an2.top), (enc_x, memory_y), (cross.left, memory_y)], width=2.2,
              color=INK)
    svg.text(enc_x - 40, memory_y - 14, "memory (B, S, D)", SHAPE, anchor="start", mono=True,
             bold=True)
    svg.text(enc_x - 40, memory_y - 34, "read by all N decoder layers", SMALL, anchor="start",
             italic=True, color=MUTED)
    svg.text(dec_l - 6, memory_y + 14, "K, V", SMALL, anchor="end", bold=True)
    key = ["B batch, S source length,", "T target length, D = d_model,", "V vocabulary"]
    svg.lines(dec_x, tgt_y + 56, key, SMALL, color=MUTED)
    svg.height = max(src_y, tgt_y + 74) + 22
    return svg


# -- (b) scaled dot-product attention, for chapter 03 -------------------------------------------
def attention_sdpa() -> Svg:
    svg = Svg(640, "Scaled dot-product attention with a mask", (
        "Bottom-up: queries Q (..., Tq, Dh) and keys K (..., Tk, Dh) are multiplied to "
        "scores Q K-transpose (..., Tq, Tk), divided by the square root of Dh, then every "
        "score whose mask entry is False is replaced by minus infinity; a softmax over the "
        "keys turns each row into weights that sum to 1 and are exactly 0 where the mask "
        "blocks; the weights times the values V (..., Tk, Dh) give the output (..., Tq, Dh). "
        "Beside the steps, a 4 by 4 causal mask (True = may attend) and the weights it allows."))
    top = svg.heading("Scaled dot-product attention with a mask (eq. 1)",
                      "… = any leading dimensions, e.g. (B, H);  Tq queries, Tk keys;  "
                      "Dh = the paper's d_k")
    cx, BW = 250, 230

    def step(y: float, h: float, rows: str, note: str | None = None) -> Box:
        return svg.box(Box(cx - BW / 2, y, BW, h), ATTN, rows, note=note)

    out_y = top + 16
    svg.text(cx, out_y, "output", 15)
    shape_label(svg, cx + 36, out_y, "(…, Tq, Dh)")
    mm2 = step(out_y + 40, 38, "weights × V")
    svg.arrow([(cx, mm2.top), (cx, out_y + 11)])
    soft = step(mm2.bottom + 40, 50, "softmax over the keys", note="each row sums to 1")
    svg.arrow([(cx, soft.top), (cx, mm2.bottom)])
    shape_label(svg, cx + 8, mm2.bottom + 20, "weights (…, Tq, Tk)")
    fill = step(soft.bottom + 100, 50, "where mask is False:", note="score ← −∞")
    svg.arrow([(cx, fill.top), (cx, soft.bottom)])
    shape_label(svg, cx + 8, soft.bottom + 50, "(…, Tq, Tk)")
    scale = step(fill.bottom + 40, 38, "÷ √Dh")
    svg.arrow([(cx, scale.top), (cx, fill.bottom)])
    shape_label(svg, cx + 8, fill.bottom + 20, "(…, Tq, Tk)")
    mm1 = step(scale.bottom + 40, 38, "Q Kᵀ")
    svg.arrow([(cx, mm1.top), (cx, scale.bottom)])
    shape_label(svg, cx + 8, scale.bottom + 20, "scores (…, Tq, Tk)")
    # inputs: Q and K under the first product; V on the left, up into the last product
    iy = mm1.bottom + 40
    q = input_box(svg, cx - 60, iy, "Q", "(…, Tq, Dh)")
    k = input_box(svg, cx + 60, iy, "K", "(…, Tk, Dh)")
    v = input_box(svg, 70, iy, "V", "(…, Tk, Dh)")
    svg.arrow([(q.cx, q.top), (q.cx, mm1.bottom)])
    svg.arrow([(k.cx, k.top), (k.cx, mm1.bottom)])
    svg.arrow([(v.cx, v.top), (v.cx, mm2.cy), (mm2.left, mm2.cy)])
    # beside the steps: the mask that comes in, and the weights that come out
    cell, gx, n = 22, 470, 4
    causal = [[j <= i for j in range(n)] for i in range(n)]
    m = grid(svg, gx, fill.cy - 2 * cell, cell, mask_fills(causal), name="mask")
    svg.text(m.cx, m.top - 14, "mask (…, Tq, Tk)", SMALL, mono=True, color=MUTED)
    svg.text(m.cx, m.bottom + 14, "True = may attend", SMALL, color=MUTED)
    svg.arrow([(m.left - 10, fill.cy), (fill.right, fill.cy)])
    # for the picture the scores are equal, so row i spreads its weight evenly over keys 0..i
    shades = [[blend(MAY, 1 / (i + 1)) if c else WHITE for c in row]
              for i, row in enumerate(causal)]
    zeros = [["" if c else "0" for c in row] for row in causal]
    wg = grid(svg, gx, soft.cy - 2 * cell, cell, shades, zeros, name="weights")
    svg.rect(wg, "none", BLOCKED, rx=0, width=1, solid=False)
    svg.text(wg.cx, wg.top - 14, "weights", SMALL, color=MUTED)
    svg.text(wg.cx, wg.bottom + 14, "0 where blocked", SMALL, color=MUTED)
    svg.path([(soft.right, soft.cy), (wg.left - 10, soft.cy)], dash="3 3")
    svg.height = iy + 66
    return svg


# -- (c) multi-head attention, for chapter 03 ---------------------------------------------------
HEAD_COLOURS = ["#e76f51", "#2a9d8f", "#e9c46a", "#6a4c93"]


def attention_multi_head() -> Svg:
    svg = Svg(680, "Multi-head attention: project, split into heads, attend, merge, project", (
        "Bottom-up: query (B, Tq, D), key and value (B, Tk, D) each pass a linear layer D "
        "to D, then split_heads reshapes (B, Tq, D) to (B, Tq, H, Dh) and transposes it to "
        "(B, H, Tq, Dh), so that each head is a separate batch entry. Scaled dot-product "
        "attention runs on all H heads at once and gives (B, H, Tq, Dh); merge_heads "
        "transposes and reshapes back to (B, Tq, D), which is the Concat of the heads, and "
        "the output projection W^O maps D to D. Below, one token's D features cut into H = 4 "
        "heads of Dh features each: head h holds features h*Dh to (h+1)*Dh - 1."))
    top = svg.heading("Multi-head attention: one reshape, not a loop",
                      "D = H · Dh;  shapes on the right follow the query "
                      "(keys, values: Tk for Tq)")
    lanes, LW = (95, 225, 355), 112
    mid, sx = lanes[1], 428    # sx: the column of shapes on the right
    out_y = top + 16
    svg.text(mid, out_y, "output", 15)
    wo = svg.box(Box(mid - 130, out_y + 40, 260, 50), ATTN, "output projection Wᴼ",
                 note="linear D → D")
    svg.arrow([(mid, wo.top), (mid, out_y + 11)])
    shape_label(svg, sx, out_y + 20, "(B, Tq, D)")
    merge = svg.box(Box(mid - 130, wo.bottom + 44, 260, 50), ATTN, "merge heads = Concat",
                    note="transpose, reshape")
    svg.arrow([(mid, merge.top), (mid, wo.bottom)])
    shape_label(svg, sx, wo.bottom + 22, "(B, Tq, D)")
    att = Box(mid - 150, merge.bottom + 60, 300, 56)
    for d in (16, 8):   # two cards behind it: the heads, side by side in the batch
        svg.rect(Box(att.x + d, att.y - d, att.w, att.h), blend(ATTN, 0.6), solid=None)
    svg.box(att, ATTN, "scaled dot-product attention", note="every head at once, as a batch")
    svg.arrow([(mid, att.top - 16), (mid, merge.bottom)])
    shape_label(svg, sx, merge.bottom + 22, "(B, H, Tq, Dh)")
    split = [Box(x - LW / 2, att.bottom + 44, LW, 40) for x in lanes]
    for b, letter in zip(split, "QKV"):
        svg.box(b, ATTN, "split heads", size=15)
        svg.arrow([(b.cx, b.top), (b.cx, att.bottom)])
        svg.text(b.cx - 8, b.top - 20, letter, SMALL, bold=True, anchor="end")
    shape_label(svg, sx, att.bottom + 22, "(B, H, Tq, Dh)")
    svg.text(sx, split[0].cy - 10, "reshape (B, Tq, H, Dh),", SMALL, anchor="start", color=MUTED)
    svg.text(sx, split[0].cy + 10, "transpose T and H", SMALL, anchor="start", color=MUTED)
    proj = [Box(x - LW / 2, b.bottom + 44, LW, 50) for x, b in zip(lanes, split)]
    for b, s in zip(proj, split):
        svg.box(b, ATTN, "linear", note="D → D", size=15)
        svg.arrow([(b.cx, b.top), (b.cx, s.bottom)])
    shape_label(svg, sx, split[0].bottom + 22, "(B, Tq, D)")
    iy = proj[0].bottom + 40
    inputs = (("query", "(B, Tq, D)"), ("key", "(B, Tk, D)"), ("value", "(B, Tk, D)"))
    for x, b, (name, shape) in zip(lanes, proj, inputs):
        inp = svg.box(Box(x - 45, iy, 90, 30), WHITE, name, size=15)
        shape_label(svg, x, inp.bottom + 14, shape, anchor="middle")
        svg.arrow([(x, inp.top), (x, b.bottom)])
    # one position's features, cut into heads
    by = iy + 94
    svg.text(24, by, "split heads, one position (D = 12, H = 4, Dh = 3):", SMALL,
             anchor="start", bold=True)
    cell, H, Dh = 22, 4, 3
    bar_y = by + 54
    bar = grid(svg, 24, bar_y, cell, [[HEAD_COLOURS[j // Dh] for j in range(H * Dh)]],
               name="features")
    svg.text(bar.cx, bar.bottom + 14, "D features", SMALL, color=MUTED)
    px = bar.right + 90
    svg.arrow([(bar.right + 14, bar.cy), (px - 14, bar.cy)])
    for h in range(H):
        g = grid(svg, px, bar_y - 36 + h * 28, cell, [[HEAD_COLOURS[h]] * Dh], name=f"head {h}")
        svg.text(g.right + 10, g.cy,
                 tr("head {}: features {}…{}").format(h, h * Dh, h * Dh + Dh - 1), SMALL,
                 anchor="start", color=MUTED)
    svg.height = bar_y + 98
    return svg


# -- (d) residual + norm for chapter 05, the encoder and decoder layers for 07 and 08 -----------
@dataclass(frozen=True)
class Sub:
    "One sub-layer of a layer diagram."
    rows: tuple[str, ...]
    fill: str
    note: str | None = None
    inputs: str = "one"   # "three": self-attention; "query": cross-attention (K, V from the side)
    height: float = 50


def layer_column(svg: Svg, cx: float, y: float, subs: list[Sub], norm_first: bool,
                 side: float, bw: float = 200) -> tuple[list[Box], float]:
    "One layer's sub-layers top-down (the last is applied first); returns their boxes, bottom y."
    svg.text(cx, y, "to the next layer", SMALL, color=MUTED)
    above, y = y + 9, y + 34    # above: where the arrow out of the sub-layer below ends
    if norm_first:
        fn = svg.box(Box(cx - bw / 2, y, bw, 44), NORM, "final LayerNorm",
                     note="once, after layer N", dash="5 4")
        svg.arrow([(cx, fn.top), (cx, above)])
        above, y = fn.bottom, fn.bottom + 26
    boxes = []
    for sub in subs:
        gap = 28 if sub.inputs == "three" else 22   # below the sub-layer, for its inputs
        if norm_first:   # + , sub-layer, LayerNorm, branch
            plus = svg.plus(cx, y + 10)
            out = plus.top
            box = svg.box(Box(cx - bw / 2, plus.bottom + 22, bw, sub.height), sub.fill,
                          list(sub.rows), note=sub.note)
            ln = svg.box(Box(cx - bw / 2, box.bottom + gap, bw, 30), NORM, "LayerNorm")
            feed, branch = ln.top, ln.bottom + 16
            svg.arrow([(cx, branch), (cx, ln.bottom)])
        else:            # LayerNorm, +, sub-layer, branch
            ln = svg.box(Box(cx - bw / 2, y, bw, 30), NORM, "LayerNorm")
            plus = svg.plus(cx, ln.bottom + 26)
            svg.arrow([(cx, plus.top), (cx, ln.bottom)])
            out = ln.top
            box = svg.box(Box(cx - bw / 2, plus.bottom + 22, bw, sub.height), sub.fill,
                          list(sub.rows), note=sub.note)
            feed = branch = box.bottom + (26 if sub.inputs == "three" else 18)
        svg.arrow([(cx, box.top), (cx, plus.bottom)])
        if sub.inputs == "three":
            three_inputs(svg, cx, feed, box, spread=52)
        else:
            svg.arrow([(cx, feed), (cx, box.bottom)])
        if sub.inputs == "query":
            svg.text(cx - 8, box.bottom + 10, "Q", SMALL, anchor="end", bold=True)
        residual(svg, cx, branch, side, plus)
        if boxes:   # the stream goes on into the sub-layer above
            svg.path([(cx, out), (cx, above)])
        else:
            svg.arrow([(cx, out), (cx, above)])
        boxes.append(box)
        above, y = branch, branch + 18
    svg.text(cx, y + 14, "from the layer below", SMALL, color=MUTED)
    svg.path([(cx, y + 4), (cx, above)])
    return boxes, y + 30


def norm_placement() -> Svg:
    W = 660
    svg = Svg(W, "Post-norm and pre-norm: where the LayerNorm sits around a sub-layer", (
        "Two ways to wrap a sub-layer (attention or feed-forward) with a residual connection "
        "and layer normalisation, side by side. Left, post-norm as in the paper: the "
        "sub-layer's output passes dropout, the input x is added back, then LayerNorm: "
        "y = LayerNorm(x + Dropout(Sublayer(x))). Right, pre-norm (norm_first=True): "
        "LayerNorm first, then the sub-layer and dropout, then the input x is added back: "
        "y = x + Dropout(Sublayer(LayerNorm(x))); the residual path is a chain of additions, "
        "and the stack needs one final LayerNorm after its last layer. In post-norm every "
        "LayerNorm sits on the residual path."))
    top = svg.heading("Where the norm goes: post-norm and pre-norm",
                      "green: the residual path, which skips the sub-layer")
    columns = ((175, "post-norm (the paper)", "LayerNorm(x + Dropout(Sublayer(x)))", False),
               (490, "pre-norm (norm_first=True)", "x + Dropout(Sublayer(LayerNorm(x)))", True))
    bottom = 0.0
    for cx, title, formula, first in columns:
        svg.text(cx, top + 14, title, LABEL, bold=True)
        svg.text(cx, top + 38, formula, 13, mono=True)
        y_y = top + 70
        svg.text(cx, y_y, "y", LABEL, bold=True)
        order = ["LayerNorm", "+", "dropout", "sub-layer"]   # top-down
        if first:
            order = order[1:] + order[:1]
        items, y = {}, y_y + 34
        for name in order:
            if name == "+":
                items[name] = svg.plus(cx, y + 11, 11)
                y += 46
                continue
            h = 50 if name == "sub-layer" else 32
            fill = {"LayerNorm": NORM, "dropout": WHITE, "sub-layer": FFN}[name]
            items[name] = svg.box(Box(cx - 100, y, 200, h), fill, name,
                                  note="attention or feed-forward" if name == "sub-layer" else None,
                                  size=SMALL if name == "dropout" else LABEL)
            y += h + 24
        branch, x_y = y - 6, y + 24
        svg.text(cx, x_y, "x", LABEL, bold=True)
        plus, stack = items["+"], [items[name] for name in order]   # top-down
        # x comes in and branches: through the sub-layer (grey), and round it (green) to the +
        svg.path([(cx, x_y - 11), (cx, branch)], color=SKIP, width=2.4)
        svg.arrow([(cx, branch), (cx, stack[-1].bottom)])
        for upper, lower in zip(stack, stack[1:]):
            on_skip = lower.top <= plus.top   # at or after the +, the skip path goes on
            svg.arrow([(cx, lower.top), (cx, upper.bottom)], color=SKIP if on_skip else LINE,
                      width=2.4 if on_skip else 1.6)
        svg.arrow([(cx, stack[0].top), (cx, y_y + 11)], color=SKIP, width=2.4)
        svg.dot(cx, branch, 4, SKIP)
        side = cx - 125
        svg.arrow([(cx, branch), (side, branch), (side, plus.cy), (plus.left, plus.cy)],
                  color=SKIP, width=2.4)
        bottom = max(bottom, x_y)
    notes = ["Post-norm puts a LayerNorm on the residual path in every sub-layer.",
             "Pre-norm keeps that path a chain of additions; its stack then needs",
             "one final LayerNorm after the last layer."]
    svg.lines(W / 2, bottom + 50, notes, SMALL, color=MUTED)
    svg.height = bottom + 109
    return svg


def encoder_layer() -> Svg:
    svg = Svg(660, "The encoder layer, post-norm and pre-norm", (
        "One encoder layer drawn twice, data flowing upwards. Left, post-norm as in the "
        "paper: multi-head self-attention over the source (mask: source padding), its input "
        "added back, LayerNorm; then the feed-forward network, its input added back, "
        "LayerNorm. Right, pre-norm (norm_first=True): LayerNorm before each sub-layer, the "
        "input added back after it, and one final LayerNorm after the N-th layer. Residual "
        "paths run on the left of each column. Dropout before each addition is not drawn."))
    top = svg.heading("The encoder layer",
                      "input and output (B, S, D); dropout before each + not drawn")
    subs = [Sub(("feed-forward",), FFN, "D → F → D"),
            Sub(("multi-head", "self-attention"), ATTN, "mask: source padding", "three", 66)]
    bottom = 0.0
    for cx, title, first in ((185, "post-norm (the paper)", False),
                             (490, "pre-norm (norm_first=True)", True)):
        svg.text(cx, top + 14, title, LABEL, bold=True)
        _, b = layer_column(svg, cx, top + 46, subs, first, side=cx - 120)
        bottom = max(bottom, b)
    svg.height = bottom + 8
    return svg


def decoder_layer() -> Svg:
    svg = Svg(700, "The decoder layer, post-norm and pre-norm", (
        "One decoder layer drawn twice, data flowing upwards. Left, post-norm as in the "
        "paper: masked multi-head self-attention over the target (mask: causal), add, "
        "LayerNorm; cross-attention whose queries come from the decoder and "
        "whose keys and values come from the encoder's memory (mask: source padding), add, "
        "LayerNorm; the feed-forward network, add, LayerNorm. Right, pre-norm "
        "(norm_first=True): LayerNorm before each sub-layer (the memory enters unnormalised "
        "by the decoder), the input added back after it, and one final LayerNorm after the "
        "N-th layer. Residual paths run on the right of each column. Dropout before each "
        "addition is not drawn."))
    top = svg.heading("The decoder layer",
                      "input and output (B, T, D), memory (B, S, D); dropout not drawn")
    subs = [Sub(("feed-forward",), FFN, "D → F → D"),
            Sub(("multi-head", "cross-attention"), ATTN, "mask: source padding", "query", 66),
            Sub(("masked multi-head", "self-attention"), ATTN, "mask: causal",
                "three", 66)]
    bottom = 0.0
    for cx, title, first in ((200, "post-norm (the paper)", False),
                             (520, "pre-norm (norm_first=True)", True)):
        svg.text(cx, top + 14, title, LABEL, bold=True)
        boxes, b = layer_column(svg, cx, top + 46, subs, first, side=cx + 120)
        cross = boxes[1]
        start = cross.left - 90
        svg.arrow([(start, cross.cy), (cross.left, cross.cy)], width=2.2, color=INK)
        svg.text(start, cross.cy - 13, "memory", SMALL, anchor="start", bold=True)
        svg.text(cross.left - 6, cross.cy + 13, "K, V", SMALL, anchor="end", bold=True)
        bottom = max(bottom, b)
    svg.height = bottom + 8
    return svg


# -- (e) the three attention sites and their masks, for chapter 04 -------------------------------
def attention_sites_masks() -> Svg:
    svg = Svg(640, "The three attention sites and their masks", (
        "Three masks for chapter 04's first sentence pair: source 'the cat sat' padded to "
        "S = 5, target '<s> le chat s’assit' padded to T = 6; rows are queries, columns are "
        "keys, blue means may attend (True), grey blocked (False). Encoder self-attention: "
        "source queries and keys, padding_mask(src, pad), shape (B, 1, 1, S): the two padding "
        "columns are blocked for every row. Decoder masked self-attention: target queries and "
        "keys, causal_mask(T), shape (T, T): the lower triangle, whose four real rows "
        "already block the two padding columns. Cross-attention: target queries, keys and "
        "values from the encoder's memory, padding_mask(src, pad), shape (B, 1, 1, S): every "
        "target row sees the three real source tokens."))
    top = svg.heading("Three attention sites, three masks", "rows: queries · columns: keys")
    ly = top + 14
    grid(svg, 170, ly - 8, 16, [[MAY]], name="legend")
    svg.text(194, ly, "may attend (True)", SMALL, anchor="start")
    grid(svg, 350, ly - 8, 16, [[BLOCKED]], name="legend")
    svg.text(374, ly, "blocked (False)", SMALL, anchor="start")
    src = ["the", "cat", "sat", "<pad>", "<pad>"]
    tgt = ["<s>", "le", "chat", "s’assit", "<pad>", "<pad>"]
    src_real = [t != "<pad>" for t in src]
    causal = [[j <= i for j in range(len(tgt))] for i in range(len(tgt))]
    sites = [
        ("encoder self-attention", "source", "source", "padding_mask(src, pad)",
         "(B, 1, 1, S) → scores (B, H, S, S)", src, src, [src_real] * len(src)),
        ("decoder masked self-attention", "target", "target",
         "causal_mask(T)", "(T, T) → scores (B, H, T, T)",
         tgt, tgt, causal),
        ("decoder cross-attention", "target", "memory (source)", "padding_mask(src, pad)",
         "(B, 1, 1, S) → scores (B, H, T, S)", tgt, src, [src_real] * len(tgt)),
    ]
    cell, gx = 26, 78
    tx = gx + len(tgt) * cell + 30   # one column of text for all three
    y = ly + 30
    for title, queries, keys, expr, shape, rows, cols, mask in sites:
        gy = y + 46
        for j, t in enumerate(cols):
            svg.text(gx + (j + 0.5) * cell, gy - 6, t, 12, anchor="start", rotate=True)
        for i, t in enumerate(rows):
            svg.text(gx - 6, gy + (i + 0.5) * cell, t, 12, anchor="end")
        g = grid(svg, gx, gy, cell, mask_fills(mask), name=title)
        svg.text(tx, gy + 8, title, LABEL, anchor="start", bold=True)
        svg.text(tx, gy + 34, tr("queries: {}").format(tr(queries)), SMALL, anchor="start")
        svg.text(tx, gy + 54, tr("keys, values: {}").format(tr(keys)), SMALL, anchor="start")
        svg.text(tx, gy + 80, expr, 13, anchor="start", mono=True)
        svg.text(tx, gy + 104, shape, 13, anchor="start", mono=True, color=MUTED)
        y = g.bottom + 26
    svg.height = y
    return svg


# -- (f) the KV cache: one cached decoding step, for chapter 15 ----------------------------------
def slots(svg: Svg, x: float, y: float, fills: list[str], labels: list[str],
          name: str, cell: float = 24) -> Box:
    "One row of cache slots, with their numbers underneath where labels has them."
    g = grid(svg, x, y, cell, [fills], name=name)
    svg.rect(g, "none", LINE, rx=0, width=1, solid=None)
    for j, t in enumerate(labels):
        if t:
            svg.text(x + (j + 0.5) * cell, g.bottom + 11, t, 12, color=MUTED)
    return g


def kv_cache() -> Svg:
    svg = Svg(720, "One cached decoding step: the newest token through every decoder layer", (
        "Step t of cached decoding, data flowing upwards. Only the newest token (B, 1) "
        "enters: it is embedded with the positional encoding of position t, giving "
        "(B, 1, D). In each of the L decoder layers, masked self-attention projects it to q, "
        "k, v of shape (B, H, 1, Dh), writes k and v into slot t of that layer's "
        "self-attention cache self_k, self_v (L, B, H, Tmax, Dh), and lets q attend over "
        "slots 0 to t. Cross-attention projects only q; its keys and values cross_k, cross_v "
        "(L, B, H, S, Dh) were projected from the encoder memory once, before step 0. After "
        "the feed-forward sub-layer and the last layer, the tied output projection gives "
        "logits (B, V); the chosen token is fed back as the newest token of step t + 1."))
    top = svg.heading("The KV cache: one decoding step",
                      "step t feeds one position; "
                      "the cache holds what steps 0 … t − 1 computed")
    BW, cx = 230, 196

    def at(y: float, h: float) -> Box:
        return Box(cx - BW / 2, y, BW, h)

    out_y = top + 16
    svg.text(cx, out_y, "next token (B,)", 15)
    pick = svg.box(at(out_y + 40, 34), OUT, "argmax, or a beam step")
    svg.arrow([(cx, pick.top), (cx, out_y + 11)])
    linear = svg.box(at(pick.bottom + 36, 34), OUT, "linear D → V (tied)")
    svg.arrow([(cx, linear.top), (cx, pick.bottom)])
    shape_label(svg, cx + 8, pick.bottom + 18, "logits (B, V)")
    frame_top = linear.bottom + 36
    an3 = at(frame_top + 34, 28)
    ffn = at(an3.bottom + 20, 36)
    an2 = at(ffn.bottom + 30, 28)
    cross = at(an2.bottom + 20, 56)
    an1 = at(cross.bottom + 36, 28)
    attn = at(an1.bottom + 20, 56)
    frame_bottom = attn.bottom + 40
    frame = svg.rect(Box(44, frame_top, 305, frame_bottom - frame_top), FRAME, FRAME_EDGE,
                     rx=10, solid=False, name="layer")
    svg.text(frame.right - 12, frame_top + 16, "layer ℓ of L", SMALL, anchor="end", bold=True)
    svg.box(an3, NORM, "add & norm", size=15)
    svg.box(ffn, FFN, "feed-forward", size=15)
    svg.box(an2, NORM, "add & norm", size=15)
    svg.box(cross, ATTN, "cross-attention", note="project q only", size=15)
    svg.box(an1, NORM, "add & norm", size=15)
    svg.box(attn, ATTN, "masked self-attention", note="project q, k, v (B, H, 1, Dh)", size=15)
    svg.arrow([(cx, an3.top), (cx, linear.bottom)])
    shape_label(svg, cx + 8, frame_top - 18, "(B, 1, D)")
    emb = svg.box(at(frame_bottom + 36, 50), EMB, ["embedding × √D", "+ PE at position t"], 15)
    shape_label(svg, cx + 8, frame_bottom + 18, "(B, 1, D)")
    tok_y = emb.bottom + 50
    svg.text(cx, tok_y, "newest token (B, 1)", 15)
    svg.arrow([(cx, tok_y - 11), (cx, emb.bottom)])
    side = frame.left + 16
    three_inputs(svg, cx, emb.top, attn, spread=52)
    residual(svg, cx, frame_bottom - 12, side, an1)
    svg.arrow([(cx, attn.top), (cx, an1.bottom)])
    svg.arrow([(cx, an1.top), (cx, cross.bottom)])
    svg.text(cx - 8, cross.bottom + 12, "q", SMALL, anchor="end", bold=True)
    residual(svg, cx, an1.top - 12, side, an2)
    svg.arrow([(cx, cross.top), (cx, an2.bottom)])
    svg.arrow([(cx, an2.top), (cx, ffn.bottom)])
    residual(svg, cx, an2.top - 12, side, an3)
    svg.arrow([(cx, ffn.top), (cx, an3.bottom)])
    # the chosen token is the next step's input
    svg.arrow([(cx - 70, out_y), (12, out_y), (12, tok_y), (cx - 82, tok_y)], dash="5 4")
    svg.text(16, out_y - 16, "fed back: step t + 1", SMALL, anchor="start", italic=True,
             color=MUTED)

    # the two caches of layer ℓ, right of it
    gx, t, tmax, S = 452, 4, 8, 5
    mid = (frame.right + gx - 8) / 2   # labels of the arrows between layer and cache
    fills = [OLD] * t + [NEW] + [WHITE] * (tmax - t - 1)
    numbers = [str(i) for i in range(t)] + ["t"] + [""] * (tmax - t - 1)
    svg.text(gx, attn.top - 10, "self-attention cache, layer ℓ", SMALL, anchor="start",
             bold=True)
    k_row = slots(svg, gx + 28, attn.top + 6, fills, [""] * tmax, "self_k")
    v_row = slots(svg, gx + 28, k_row.bottom + 8, fills, numbers, "self_v")
    svg.text(gx + 20, k_row.cy, "k", SMALL, anchor="end", bold=True)
    svg.text(gx + 20, v_row.cy, "v", SMALL, anchor="end", bold=True)
    svg.text(gx, v_row.bottom + 30, "(B, H, Tmax, Dh)", 12, anchor="start", mono=True,
             color=MUTED)
    svg.arrow([(attn.right, attn.cy + 12), (gx - 8, attn.cy + 12)])
    svg.text(mid, attn.cy + 26, "write k, v", 13, color=MUTED)
    svg.arrow([(gx - 8, attn.cy - 12), (attn.right, attn.cy - 12)])
    svg.text(mid, attn.cy - 26, "read 0 … t", 13, color=MUTED)
    svg.text(gx, cross.top - 40, "cross-attention cache, layer ℓ", SMALL, anchor="start",
             bold=True)
    ck = slots(svg, gx + 28, cross.top - 22, [CROSS] * S, [""] * S, "cross_k")
    cv = slots(svg, gx + 28, ck.bottom + 8, [CROSS] * S, [str(i) for i in range(S)], "cross_v")
    svg.text(gx + 20, ck.cy, "k", SMALL, anchor="end", bold=True)
    svg.text(gx + 20, cv.cy, "v", SMALL, anchor="end", bold=True)
    svg.text(gx, cv.bottom + 28, "(B, H, S, Dh)", 12, anchor="start", mono=True, color=MUTED)
    svg.text(gx, cv.bottom + 46, "projected from the memory once,", 13, anchor="start",
             color=MUTED)
    svg.text(gx, cv.bottom + 63, "before step 0", 13, anchor="start", color=MUTED)
    svg.arrow([(gx - 8, cross.cy), (cross.right, cross.cy)])
    svg.text(mid, cross.cy - 14, "read all S", 13, color=MUTED)
    legend = ((OLD, "written at steps 0 … t − 1"), (NEW, "written at step t"),
              (WHITE, "empty until later steps"))
    for i, (fill, what) in enumerate(legend):
        y = tok_y - 30 + i * 22
        g = grid(svg, gx, y - 8, 16, [[fill]], name="legend")
        svg.rect(g, "none", LINE, rx=0, width=1, solid=None)
        svg.text(gx + 24, y, what, 13, anchor="start")
    svg.height = tok_y + 24
    return svg


# -- (g) beam search: expand, keep the best k, reorder, for chapter 16 ---------------------------
def minus(v: float) -> str:
    "A number with one decimal and a real minus sign."
    return f"{v:.1f}".replace("-", "−")


def beam_reorder() -> Svg:
    W = 720
    beams = [("le chat", -0.9), ("un chat", -1.6), ("le chien", -2.1)]   # prefix, log P
    vocab = ["dort", "mange", "est", ".", "</s>"]
    logits = [[2.0, 1.5, 0.2, -1.0, -1.0], [0.3, 0.2, 0.1, 0.0, 0.0], [2.5, 0.0, 0.0, -1.0, -1.0]]
    k, V = len(beams), len(vocab)
    total = []   # score + log_softmax(logits), the k x V candidates
    for (_, score), row in zip(beams, logits):
        log_z = math.log(sum(math.exp(v) for v in row))
        total.append([score + v - log_z for v in row])
    ranked = sorted(((total[b][j], b, j) for b in range(k) for j in range(V)), reverse=True)[:k]
    origin = [b for _, b, _ in ranked]
    svg = Svg(W, "Beam search: k beams expand to k·V candidates, the best k survive, "
                 "the cache follows", (
        f"One step of beam search for one sentence with k = {k} beams and a toy vocabulary of "
        f"V = {V} tokens. Left, the beams and their summed log-probabilities. Middle, the k by "
        "V grid of candidates, each beam's score plus the log-probability of one next token; "
        f"the best {k} of all k·V candidates are outlined. Right, the new beams, numbered by "
        "rank and coloured like their parent: two come from the same parent and one beam has "
        "no child. Below, the cache rows (one per beam, in every layer) are gathered by parent "
        f"beam with index_select: rows {origin}."))
    top = svg.heading("Beam search: expand, keep the best k, reorder the cache",
                      f"one sentence, k = {k} beams, toy vocabulary V = {V}; "
                      "numbers: summed log-probabilities")
    colours = ["#2a9d8f", "#e76f51", "#6a4c93"]
    cw, ch = 62, 34
    gx, gy = 200, top + 62
    svg.text(94, gy - 28, "beams at step t", SMALL, bold=True)
    svg.text(gx + cw * V / 2, gy - 46, "k·V candidates: score + log p(token)", SMALL, bold=True)
    for j, tok in enumerate(vocab):
        svg.text(gx + (j + 0.5) * cw, gy - 18, tok, 13)
    chosen = {(b, j) for _, b, j in ranked}
    for b, (prefix, score) in enumerate(beams):
        y = gy + b * (ch + 8)
        pb = svg.box(Box(14, y, 160, ch), blend(colours[b], 0.25), f"{prefix}  {minus(score)}",
                     size=14, stroke=colours[b])
        svg.arrow([(pb.right, pb.cy), (gx - 4, pb.cy)], head=7)
        for j in range(V):
            cell = Box(gx + j * cw + 2, y, cw - 4, ch)
            best = (b, j) in chosen
            svg.rect(cell, blend(colours[b], 0.12), colours[b] if best else "#c7ccd1", rx=3,
                     width=2.6 if best else 1, name=f"candidate {b} {j}")
            svg.text(cell.cx, cell.cy, minus(total[b][j]), 13, mono=True, bold=best)
    grid_bottom = gy + k * (ch + 8) - 8
    svg.text(gx + cw * V / 2, grid_bottom + 16,
             f"top-{k} of all {k * V}: parent = index // V, token = index % V", 13, color=MUTED)
    nx = 546
    svg.text(nx + 80, gy - 28, "beams at step t + 1", SMALL, bold=True)
    for r, (score, b, j) in enumerate(ranked):
        y = gy + r * (ch + 8)
        svg.box(Box(nx, y, 162, ch), blend(colours[b], 0.25),
                f"{beams[b][0]} {vocab[j]}  {minus(score)}", size=14, stroke=colours[b])
        svg.text(nx - 8, y + ch / 2, f"{r + 1}", 13, anchor="end", bold=True, color=colours[b])
    # the cache follows: every row is replaced by a copy of its parent's row
    cy0 = grid_bottom + 64
    svg.text(W / 2, cy0, "every layer's cache rows follow their parent beam:", SMALL, bold=True)
    svg.text(W / 2, cy0 + 22,
             f"cache.reorder(rows), rows = {origin}  (index_select on the beam rows)", 13,
             mono=True)
    ry, cell, bx, ax = cy0 + 56, 22, 150, 470
    svg.text(bx + 2.5 * cell, ry - 14, "before", SMALL, color=MUTED)
    svg.text(ax + 2.5 * cell, ry - 14, "after", SMALL, color=MUTED)
    for b in range(k):
        y = ry + b * 36
        svg.text(bx - 10, y + cell / 2, tr("row {}").format(b), 13, anchor="end")
        grid(svg, bx, y, cell, [[blend(colours[b], 0.55)] * 5], name=f"before {b}")
        svg.text(ax - 10, y + cell / 2, tr("row {}").format(b), 13, anchor="end")
        grid(svg, ax, y, cell, [[blend(colours[origin[b]], 0.55)] * 5], name=f"after {b}")
    for r, b in enumerate(origin):
        y0, y1 = ry + b * 36 + cell / 2, ry + r * 36 + cell / 2
        svg.arrow([(bx + 5 * cell + 8, y0), (ax - 56, y1)], color=colours[b], head=7)
    svg.height = ry + k * 36 + 16
    return svg


# -- the Chinese drawings ----------------------------------------------------------------------
# Every label of the English drawings, in Chinese, with the terms of book/glossary.md and of the
# chapters' catalogues (编码器, 掩蔽, 层规范化, 暂退法, 词元, 束搜索, 键值缓存, ...). Code names,
# shapes and the example sentences stay as they are. A label of a Chinese drawing that keeps
# English words (english_words) stops its drawing in Svg.check: add the label here.
ZH: dict[str, str] = {
    # shared
    "output": "输出", "linear": "线性层", "linear D → D": "线性层 D → D",
    "add & norm": "残差连接和层规范化", "feed-forward": "前馈网络", "LayerNorm": "层规范化",
    "final LayerNorm": "最终的层规范化", "once, after layer N": "只在第 N 层之后用一次",
    "multi-head": "多头", "masked multi-head": "掩蔽多头", "self-attention": "自注意力",
    "cross-attention": "交叉注意力", "masked self-attention": "掩蔽自注意力",
    "mask: causal": "因果掩蔽", "mask: source padding": "源序列填充掩蔽",
    "embedding × √D": "嵌入 × √D", "+ positional encoding": "+ 位置编码",
    "post-norm (the paper)": "后规范化（论文的做法）",
    "pre-norm (norm_first=True)": "前规范化（norm_first=True）",
    "to the next layer": "送往下一层", "from the layer below": "来自上一层",
    "memory": "记忆",
    # (a) architecture
    "The Transformer: encoder, decoder and output projection, with tensor shapes":
        "Transformer：编码器、解码器和输出投影，标有张量形状",
    "The Transformer (post-norm, as in the paper)": "Transformer（后规范化，与论文相同）",
    "next-token probabilities": "下一个词元的概率",
    "softmax over V": "在 V 上做 softmax",
    "linear  D → V": "线性层  D → V",
    "weights = target embedding": "权重 = 目标嵌入",
    "target tokens, shifted right": "目标词元（右移）",
    "source tokens": "源词元",
    "memory (B, S, D)": "记忆 (B, S, D)",
    "read by all N decoder layers": "N 个解码器层都读取它",
    "B batch, S source length,": "B 批量大小，S 源序列长度，",
    "T target length, D = d_model,": "T 目标序列长度，D = d_model，",
    "V vocabulary": "V 词表大小",
    # (b) attention_sdpa
    "Scaled dot-product attention with a mask": "带掩蔽的缩放点积注意力",
    "Scaled dot-product attention with a mask (eq. 1)": "带掩蔽的缩放点积注意力（公式 1）",
    "… = any leading dimensions, e.g. (B, H);  Tq queries, Tk keys;  Dh = the paper's d_k":
        "… = 任意前导维度，如 (B, H)；Tq 个查询，Tk 个键；Dh = 论文中的 d_k",
    "weights × V": "权重 × V",
    "softmax over the keys": "在键上做 softmax",
    "each row sums to 1": "每行之和为 1",
    "weights (…, Tq, Tk)": "权重 (…, Tq, Tk)",
    "where mask is False:": "掩蔽为 False 的位置：",
    "score ← −∞": "分数 ← −∞",
    "scores (…, Tq, Tk)": "分数 (…, Tq, Tk)",
    "mask (…, Tq, Tk)": "掩蔽 (…, Tq, Tk)",
    "True = may attend": "True = 可以关注",
    "weights": "权重",
    "0 where blocked": "被阻止处为 0",
    # (c) attention_multi_head
    "Multi-head attention: project, split into heads, attend, merge, project":
        "多头注意力：投影，拆分成头，注意力，合并，投影",
    "Multi-head attention: one reshape, not a loop": "多头注意力：一次变形，而不是循环",
    "D = H · Dh;  shapes on the right follow the query (keys, values: Tk for Tq)":
        "D = H · Dh；右侧的形状按查询标注（键、值：把 Tq 换成 Tk）",
    "output projection Wᴼ": "输出投影 Wᴼ",
    "merge heads = Concat": "合并各头 = Concat",
    "transpose, reshape": "转置，变形",
    "scaled dot-product attention": "缩放点积注意力",
    "every head at once, as a batch": "所有头一次算完，当作批量",
    "split heads": "拆分成头",
    "reshape (B, Tq, H, Dh),": "变形为 (B, Tq, H, Dh)，",
    "transpose T and H": "再转置 T 和 H",
    "query": "查询", "key": "键", "value": "值",
    "split heads, one position (D = 12, H = 4, Dh = 3):":
        "拆分成头，一个位置（D = 12，H = 4，Dh = 3）：",
    "D features": "D 个特征",
    "head {}: features {}…{}": "头 {}：特征 {}…{}",
    # (d) norm_placement, encoder_layer, decoder_layer
    "Post-norm and pre-norm: where the LayerNorm sits around a sub-layer":
        "后规范化与前规范化：层规范化在子层周围的位置",
    "Where the norm goes: post-norm and pre-norm": "规范化放在哪里：后规范化与前规范化",
    "green: the residual path, which skips the sub-layer": "绿色：残差路径，它绕过子层",
    "dropout": "暂退法",
    "sub-layer": "子层",
    "attention or feed-forward": "注意力或前馈网络",
    "Post-norm puts a LayerNorm on the residual path in every sub-layer.":
        "后规范化在每个子层的残差路径上都放了一个层规范化。",
    "Pre-norm keeps that path a chain of additions; its stack then needs":
        "前规范化让这条路径只是一串加法；",
    "one final LayerNorm after the last layer.":
        "这样它的堆叠需要在最后一层之后再加一个层规范化。",
    "The encoder layer, post-norm and pre-norm": "编码器层：后规范化与前规范化",
    "The encoder layer": "编码器层",
    "input and output (B, S, D); dropout before each + not drawn":
        "输入和输出 (B, S, D)；每个 + 之前的暂退法未画出",
    "The decoder layer, post-norm and pre-norm": "解码器层：后规范化与前规范化",
    "The decoder layer": "解码器层",
    "input and output (B, T, D), memory (B, S, D); dropout not drawn":
        "输入和输出 (B, T, D)，记忆 (B, S, D)；暂退法未画出",
    # (e) attention_sites_masks
    "The three attention sites and their masks": "三处注意力及其掩蔽",
    "Three attention sites, three masks": "三处注意力，三种掩蔽",
    "rows: queries · columns: keys": "行：查询 · 列：键",
    "may attend (True)": "可以关注（True）",
    "blocked (False)": "被阻止（False）",
    "encoder self-attention": "编码器自注意力",
    "decoder masked self-attention": "解码器掩蔽自注意力",
    "decoder cross-attention": "解码器交叉注意力",
    "queries: {}": "查询：{}", "keys, values: {}": "键、值：{}",
    "source": "源序列", "target": "目标序列", "memory (source)": "记忆（源序列）",
    "(B, 1, 1, S) → scores (B, H, S, S)": "(B, 1, 1, S) → 分数 (B, H, S, S)",
    "(T, T) → scores (B, H, T, T)": "(T, T) → 分数 (B, H, T, T)",
    "(B, 1, 1, S) → scores (B, H, T, S)": "(B, 1, 1, S) → 分数 (B, H, T, S)",
    # (f) kv_cache
    "One cached decoding step: the newest token through every decoder layer":
        "带缓存的一个解码步：最新的词元穿过每个解码器层",
    "The KV cache: one decoding step": "键值缓存：解码的一步",
    "step t feeds one position; the cache holds what steps 0 … t − 1 computed":
        "第 t 步只输入一个位置；缓存存着第 0 … t − 1 步算出的结果",
    "next token (B,)": "下一个词元 (B,)",
    "argmax, or a beam step": "argmax，或束搜索的一步",
    "linear D → V (tied)": "线性层 D → V（权重共享）",
    "layer ℓ of L": "第 ℓ 层（共 L 层）",
    "project q only": "只投影 q",
    "project q, k, v (B, H, 1, Dh)": "投影 q, k, v (B, H, 1, Dh)",
    "+ PE at position t": "+ 位置 t 的位置编码",
    "newest token (B, 1)": "最新的词元 (B, 1)",
    "fed back: step t + 1": "送回：第 t + 1 步",
    "self-attention cache, layer ℓ": "第 ℓ 层的自注意力缓存",
    "write k, v": "写入 k, v",
    "read 0 … t": "读取 0 … t",
    "cross-attention cache, layer ℓ": "第 ℓ 层的交叉注意力缓存",
    "projected from the memory once,": "由记忆投影而来，只算一次，",
    "before step 0": "在第 0 步之前",
    "read all S": "读取全部 S 个",
    "written at steps 0 … t − 1": "第 0 … t − 1 步写入",
    "written at step t": "第 t 步写入",
    "empty until later steps": "空着，留给以后的步",
    # (g) beam_reorder
    "Beam search: k beams expand to k·V candidates, the best k survive, the cache follows":
        "束搜索：k 个束扩展成 k·V 个候选，最好的 k 个留下，缓存随之重排",
    "Beam search: expand, keep the best k, reorder the cache":
        "束搜索：扩展，保留最好的 k 个，重排缓存",
    "one sentence, k = 3 beams, toy vocabulary V = 5; numbers: summed log-probabilities":
        "一个句子，k = 3 个束，玩具词表 V = 5；数字：对数概率之和",
    "beams at step t": "第 t 步的束",
    "k·V candidates: score + log p(token)": "k·V 个候选：分数 + log p(词元)",
    "top-3 of all 15: parent = index // V, token = index % V":
        "全部 15 个中的前 3 个：父束 = index // V，词元 = index % V",
    "beams at step t + 1": "第 t + 1 步的束",
    "every layer's cache rows follow their parent beam:": "每一层缓存的各行都跟随其父束：",
    "cache.reorder(rows), rows = [0, 0, 2]  (index_select on the beam rows)":
        "cache.reorder(rows)，rows = [0, 0, 2]（在束的各行上做 index_select）",
    "before": "重排前", "after": "重排后",
    "row {}": "第 {} 行",
}

# The longer description (<desc>) of each Chinese drawing, by its English title. Its English is
# in the drawing's function: a change there is for the Chinese here too.
ZH_DESC: dict[str, str] = {
    "The Transformer: encoder, decoder and output projection, with tensor shapes": (
        "编码器-解码器 Transformer 自下而上的数据通路（后规范化，与论文相同）。左侧：源词元 "
        "(B, S) 经过嵌入，乘以 D 的平方根，加上位置编码，然后穿过 N 个编码器层；每层是多头自注意力"
        "和一个前馈网络，二者之后各有带残差路径的残差连接和层规范化。编码器的输出，即记忆 "
        "(B, S, D)，作为键和值进入每个解码器层的交叉注意力。右侧：右移后的目标词元 (B, T) "
        "以同样方式嵌入，穿过 N 个解码器层：掩蔽自注意力、查询来自解码器的交叉注意力、前馈网络，"
        "每个之后都有残差连接和层规范化。一个与目标嵌入共享权重的线性层给出 logits (B, T, V)，"
        "softmax 函数再给出下一个词元的概率。"),
    "Scaled dot-product attention with a mask": (
        "自下而上：查询 Q (..., Tq, Dh) 与键 K (..., Tk, Dh) 相乘，得到分数 Q K 转置 "
        "(..., Tq, Tk)，除以 Dh 的平方根；然后凡是掩蔽项为 False 的分数都换成负无穷；在键上做的 "
        "softmax 把每一行变成和为 1 的权重，掩蔽阻止的位置恰好为 0；权重乘以值 V (..., Tk, Dh) "
        "得到输出 (..., Tq, Dh)。步骤旁边是一个 4 乘 4 的因果掩蔽（True = 可以关注）"
        "及其允许的权重。"),
    "Multi-head attention: project, split into heads, attend, merge, project": (
        "自下而上：查询 (B, Tq, D)、键和值 (B, Tk, D) 各自经过一个 D 到 D 的线性层，然后 "
        "split_heads 把 (B, Tq, D) 变形为 (B, Tq, H, Dh) 并转置为 (B, H, Tq, Dh)，使每个头成为"
        "批量中单独的一项。缩放点积注意力一次在全部 H 个头上运行，得到 (B, H, Tq, Dh)；"
        "merge_heads 转置并变形回 (B, Tq, D)，这就是各个头的 Concat；输出投影 W^O 把 D 映射到 D。"
        "下方：一个词元的 D 个特征切成 H = 4 个头，每个头 Dh 个特征：头 h 拥有第 h*Dh 到 "
        "(h+1)*Dh - 1 个特征。"),
    "Post-norm and pre-norm: where the LayerNorm sits around a sub-layer": (
        "用残差连接和层规范化包装一个子层（注意力或前馈网络）的两种方式，左右并排。左侧是论文的"
        "后规范化：子层的输出经过暂退法，加回输入 x，再做层规范化：y = LayerNorm(x + "
        "Dropout(Sublayer(x)))。右侧是前规范化（norm_first=True）：先做层规范化，再经过子层和"
        "暂退法，然后加回输入 x：y = x + Dropout(Sublayer(LayerNorm(x)))；残差路径是一串加法，"
        "堆叠需要在最后一层之后再加一个层规范化。在后规范化中，每个层规范化都在残差路径上。"),
    "The encoder layer, post-norm and pre-norm": (
        "一个编码器层画了两遍，数据自下而上流动。左侧是论文的后规范化：在源序列上的多头自注意力"
        "（源序列填充掩蔽），加回其输入，层规范化；然后是前馈网络，加回其输入，层规范化。右侧是"
        "前规范化（norm_first=True）：每个子层之前做层规范化，之后加回输入，并在第 N 层之后再做"
        "一次最终的层规范化。残差路径画在每一列的左侧。每次相加之前的暂退法没有画出。"),
    "The decoder layer, post-norm and pre-norm": (
        "一个解码器层画了两遍，数据自下而上流动。左侧是论文的后规范化："
        "在目标序列上的掩蔽多头自注意力（因果掩蔽），相加，层规范化；"
        "交叉注意力，其查询来自解码器，键和值来自编码器的记忆（源序列填充掩蔽），相加，层规范化；前馈网络，相加，层规范化。右侧是前规范化"
        "（norm_first=True）：每个子层之前做层规范化（记忆进入时不经解码器规范化），之后加回输入，"
        "并在第 N 层之后再做一次最终的层规范化。残差路径画在每一列的右侧。"
        "每次相加之前的暂退法没有画出。"),
    "The three attention sites and their masks": (
        "第 04 章第一个句对的三个掩蔽：源序列 'the cat sat' 填充到 S = 5，目标序列 "
        "'<s> le chat s’assit' 填充到 T = 6；行是查询，列是键，蓝色表示可以关注（True），灰色表示"
        "被阻止（False）。编码器自注意力：查询和键都来自源序列，padding_mask(src, pad)，形状 "
        "(B, 1, 1, S)：两个填充列对每一行都被阻止。解码器掩蔽自注意力：查询和键都来自目标序列，"
        "causal_mask(T)，形状 (T, T)：下三角，其中四个真实的行已经阻止了两个填充列。交叉注意力："
        "查询来自目标序列，键和值来自编码器的记忆，padding_mask(src, pad)，形状 (B, 1, 1, S)："
        "每个目标行都看到三个真实的源词元。"),
    "One cached decoding step: the newest token through every decoder layer": (
        "带缓存解码的第 t 步，数据自下而上流动。只有最新的词元 (B, 1) 进入：它经过嵌入，加上位置 t "
        "的位置编码，得到 (B, 1, D)。在 L 个解码器层的每一层中，掩蔽自注意力把它投影为形状 "
        "(B, H, 1, Dh) 的 q, k, v，把 k 和 v 写入该层自注意力缓存 self_k, self_v "
        "(L, B, H, Tmax, Dh) 的槽位 t，并让 q 关注槽位 0 到 t。交叉注意力只投影 q；它的键和值 "
        "cross_k, cross_v (L, B, H, S, Dh) 在第 0 步之前由编码器的记忆投影而来，只算一次。经过"
        "前馈子层和最后一层之后，权重共享的输出投影给出 logits (B, V)；选出的词元作为第 t + 1 步"
        "最新的词元送回。"),
    "Beam search: k beams expand to k·V candidates, the best k survive, the cache follows": (
        "一个句子的束搜索的一步，k = 3 个束，玩具词表有 V = 5 个词元。"
        "左侧：各个束及其对数概率之和。"
        "中间：k 乘 V 的候选网格，每个候选是束的分数加上下一个词元的对数概率；全部 k·V 个候选中"
        "最好的 3 个加了粗框。右侧：新的束，按名次编号，颜色与其父束相同：两个来自同一个父束，"
        "有一个束没有子束。下方：缓存的行（每层中每个束一行）用 index_select 按父束收集：第 "
        "[0, 0, 2] 行。"),
}


DIAGRAMS = {   # file name -> drawing; each shown in the chapter its comment above names
    "architecture": architecture,
    "attention_sdpa": attention_sdpa,
    "attention_multi_head": attention_multi_head,
    "norm_placement": norm_placement,
    "encoder_layer": encoder_layer,
    "decoder_layer": decoder_layer,
    "attention_sites_masks": attention_sites_masks,
    "kv_cache": kv_cache,
    "beam_reorder": beam_reorder,
}


def file_name(name: str, lang: str) -> str:
    "architecture.svg, architecture.zh_CN.svg (Sphinx's figure_language_filename's default)."
    return f"{name}.svg" if lang == "en" else f"{name}.{lang}.svg"


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else FIGURES
    out.mkdir(parents=True, exist_ok=True)
    for lang in LANGUAGES:
        with language(lang):
            for name, draw in DIAGRAMS.items():
                (out / file_name(name, lang)).write_text(draw().render(), encoding="utf-8",
                                                         newline="\n")


if __name__ == "__main__":
    main(sys.argv[1:])
