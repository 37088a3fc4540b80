"""The Chinese edition's catalogues: how complete each is, and whether it uses the glossary's terms.

Usage: python tools/translations.py [--terms]

Prints, for each catalogue of locales/zh_CN/LC_MESSAGES/ (one per page, written by `make
translations`), its messages translated, fuzzy and untranslated, as `msgfmt --statistics`
counts them, and marks the pages that must be complete: the introduction, the glossary and
every chapter of the reader's path (the parts before Engineering); of the other chapters,
the section "What to remember". --terms also lists the messages whose English uses a glossary
term whose Chinese (the glossary's 中文 column) their translation lacks. Exits 1 if a required
message is missing, or (with --terms) a term.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))
from glossary_anchors import names  # noqa: E402
from glossary_links import IGNORED, pattern, reader_chapters  # noqa: E402
from language_switch import blank, syntax_errors  # noqa: E402

LOCALE = ROOT / "locales" / "zh_CN" / "LC_MESSAGES"
WHOLE_PAGES = ["book/intro", "book/glossary"]
SECTION = "What to remember"
# (page, start of the English message, English term): where Chinese grammar or sense asks
# for another word than the glossary's, the reason given
TERM_EXCEPTIONS: dict[tuple[str, str, str], str] = {}


def read_catalogue(path: Path) -> polib.POFile:
    """The catalogue at path; ValueError, in one line, for what is not one: not a regular
    file (a folder, a pipe: never waited on), not UTF-8, or not .po syntax."""
    sys.path.insert(0, str(ROOT))
    from transformer_lit.files import open_regular
    try:
        with open_regular(path) as f:
            text = f.read().decode("utf-8")
    except OSError as e:
        raise ValueError(f"{path}: cannot be read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 (byte {e.start:,})") from None
    if lines := syntax_errors(text):
        raise ValueError(f"{path}:{lines[0]}: not .po syntax (a string not closed?)")
    return polib.pofile(text)


def _read_all() -> tuple[dict[str, polib.POFile], list[str]]:
    found, errors = {}, []
    for p in sorted(LOCALE.rglob("*.po")):
        try:
            found[str(p.relative_to(LOCALE).with_suffix(""))] = read_catalogue(p)
        except ValueError as e:
            errors.append(str(e))
    return found, errors


def catalogues() -> dict[str, polib.POFile]:
    "Every catalogue that can be read, by page ('nbs/03_attention', 'book/glossary')."
    return _read_all()[0]


def problems() -> list[str]:
    """A line for each catalogue that cannot be read, and for each page that must be
    complete whose catalogue is missing or holds no message."""
    found, errors = _read_all()
    unread = {e.split(":")[0] for e in errors}
    for page in required_pages():
        path = LOCALE / f"{page}.po"
        if page not in found and str(path) not in unread:
            errors.append(f"{path}: missing, and {page} must be complete")
        elif page in found and not [e for e in found[page] if not e.obsolete]:
            errors.append(f"{path}: holds no message, and {page} must be complete")
    return errors


def required_pages() -> list[str]:
    return WHOLE_PAGES + [f"nbs/{stem}" for stem in reader_chapters()]


def cell_of(entry: polib.POEntry) -> int | None:
    "The notebook cell a message comes from (Sphinx numbers a notebook's lines cell*10000+line)."
    for _, line in entry.occurrences:
        if line and line.isdigit() and int(line) >= 10000:
            return int(line) // 10000 - 1
    return None


def section_cells(page: str) -> set[int]:
    "The cells of a chapter's 'What to remember' section."
    nb = json.loads((ROOT / f"{page}.ipynb").read_text())
    cells, inside = set(), False
    for i, cell in enumerate(nb["cells"]):
        heads = re.findall(r"(?m)^(#+)\s+(.*)$", "".join(cell["source"])) \
            if cell["cell_type"] == "markdown" else []
        for level, title in heads:
            if title.strip().startswith(SECTION):
                inside = True
            elif inside and len(level) <= 2:
                inside = False
        if inside or any(t.strip().startswith(SECTION) for _, t in heads):
            cells.add(i)
    return cells


def required(page: str, po: polib.POFile) -> list[polib.POEntry]:
    "The messages of a page that must be translated."
    entries = [e for e in po if not e.obsolete]
    if page in required_pages():
        return entries
    if not page.startswith("nbs/"):
        return []
    cells = section_cells(page)
    if not cells:
        return []
    start = min(cells)
    return [e for e in entries if e.msgid == SECTION or (cell_of(e) or -1) >= start
            and cell_of(e) in cells]


def missing(po_entries: list[polib.POEntry]) -> list[polib.POEntry]:
    return [e for e in po_entries if blank(e.msgstr) or "fuzzy" in e.flags]


def chinese_terms(cell: str) -> list[str]:
    "The Chinese alternatives of a glossary cell; a leading Latin name counts as one too."
    out = []
    for piece in re.split(r"[、/，,]", re.sub(r"（[^）]*）|\([^)]*\)", "", cell)):
        piece = piece.strip()
        if piece:
            out.append(piece)
            if m := re.match(r"[A-Za-z][\w\- ]*?(?=\s|[^\x00-\x7f]|$)", piece):
                out.append(m.group(0).strip())
    return out


def glossary_rows() -> list[tuple[list[str], list[str]]]:
    "(English names, Chinese alternatives) of each glossary row."
    rows = []
    for line in (ROOT / "book" / "glossary.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or cells[0] == "term" \
                or set(cells[0]) <= set("-: "):
            continue
        english = [n for n in names(cells[0]) if n not in IGNORED]
        rows.append((english, chinese_terms(cells[1])))
    return rows


def term_misses(page: str, po: polib.POFile) -> list[str]:
    """Messages of a reader's page that use a glossary term without its Chinese. Longer
    names are looked for first and then blanked out: "rotary position embedding" asks
    for 旋转位置编码, not also for embedding's 嵌入."""
    out = []
    terms = sorted(((name, chinese) for english, chinese in glossary_rows()
                    for name in english), key=lambda t: -len(t[0]))
    for e in po:
        if blank(e.msgstr) or page == "book/glossary":
            continue
        # code, inline math, link targets and the names inside LaTeX macros (\mathrm{FFN},
        # \mathrm{LayerNorm}: a display-math message is all LaTeX) are not prose
        text = re.sub(r"`[^`]*`|\$[^$]*\$|\]\([^)]*\)|\\[A-Za-z]+\{[^{}]*\}", " ", e.msgid)
        for name, chinese in terms:
            found = pattern(name)
            if not found.search(text):
                continue
            text = found.sub(" ", text)
            if not any(c in e.msgstr for c in chinese) and \
                    (page, e.msgid[:40], name) not in TERM_EXCEPTIONS:
                out.append(f"{page}: '{name}' ({' / '.join(chinese)}) in: {e.msgid[:70]}")
    return out


def _markers(text: str) -> tuple[int, int]:
    "The ** and lone * that CommonMark leaves as text (emphasis it did not see), outside code."
    from markdown_it import MarkdownIt
    html = MarkdownIt("commonmark").render(text)
    html = re.sub(r"<code>.*?</code>|\$[^$]*\$", "", html, flags=re.S)
    return html.count("**"), len(re.findall(r"(?<!\*)\*(?!\*)", html))


def broken_emphasis(page: str, po: polib.POFile) -> list[str]:
    """Messages whose translation shows ** or * as text where the English has emphasis:
    CommonMark opens `**` before punctuation only after a space or punctuation, so
    "它的**[查询](…)**" stays literal; "它的 **[查询](…)**" is bold."""
    out = []
    for e in po:
        if e.msgstr and any(b > a for a, b in zip(_markers(e.msgid), _markers(e.msgstr))):
            out.append(f"{page}: stray emphasis markers in: {e.msgstr[:70]}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--terms", action="store_true", help="check the glossary's terms")
    args = parser.parse_args()
    found, errors = catalogues(), problems()
    for line in errors:
        print(line)
    bad = len(errors)
    for page, po in found.items():
        entries = [e for e in po if not e.obsolete]
        fuzzy = sum("fuzzy" in e.flags for e in entries)
        untranslated = sum(blank(e.msgstr) and "fuzzy" not in e.flags for e in entries)
        need = missing(required(page, po))
        bad += len(need)
        rule = "must be complete" if page in required_pages() else (
            f"'{SECTION}' must be" if required(page, po) else "may stay English")
        print(f"{page:30s} {len(entries) - fuzzy - untranslated:4d} translated {fuzzy:4d} fuzzy "
              f"{untranslated:4d} untranslated   {rule}: {len(need)} missing")
        if args.terms and page in required_pages():
            for miss in term_misses(page, po):
                bad += 1
                print("   ", miss)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
