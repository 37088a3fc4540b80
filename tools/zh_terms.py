"""One Chinese term for each thing: flag (and, with --fix, mend) the translations that use
a term the Chinese edition has settled otherwise (issue 60, item 4).

Usage: python tools/zh_terms.py [--fix]

Each rule below names the English that calls for the term (a regular expression over the
message's msgid, or None for every message), the Chinese that must not stand for it, and
what replaces it. A translation is flagged when its msgid matches the rule's English and its
msgstr contains the unwanted Chinese outside inline code. `--fix` replaces it and saves the
catalogue; run `make translations` before and the check after. Exits 1 if anything is
flagged (after --fix: if anything is left).
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parents[1]
LOCALE = ROOT / "locales" / "zh_CN" / "LC_MESSAGES"

# the Bible's books as the catalogues name them, written with the title marks 《》
BOOKS = ("创世记", "出埃及记", "利未记", "民数记", "申命记", "约书亚记", "士师记", "路得记",
         "列王纪", "以斯帖记", "约伯记", "诗篇", "箴言", "传道书", "雅歌", "以赛亚书",
         "耶利米书", "但以理书", "约拿书", "马太福音", "马可福音", "路加福音", "约翰福音",
         "使徒行传", "罗马书", "希伯来书", "彼得前书", "约翰一书", "启示录")


@dataclass(frozen=True)
class Rule:
    "Where the msgid matches `english`, `wrong` (a regex) in the msgstr becomes `right`."
    name: str
    english: str | None
    wrong: str
    right: str


RULES = (
    Rule("chapter numbers as Chinese writes them", None, r"第 ?0(\d) ?章", r"第 \1 章"),
    Rule("stack: 堆叠", r"(?i)\bstacks?\b", r"栈", "堆叠"),
    Rule("the shipped model: 随包发布的模型", None, r"随包模型", "随包发布的模型"),
    Rule("the shipped model: 随包发布", None, r"随包提供|随书发布", "随包发布"),
    Rule("recipe: 训练配方", r"(?i)\brecipes?\b", r"训练方案", "训练配方"),
    Rule("verse: 经文 (a verse: 一节经文)", r"(?i)\bverses?\b", r"经节", "经文"),
    Rule("piece: 词片", r"(?i)\bpieces?\b", r"片段", "词片"),
    Rule("check: 检查", None, r"检验", "检查"),
    Rule("Bible books in title marks", None,
         r"(?<![《\w])(" + "|".join(BOOKS) + r")(?!》)", r"《\1》"),
    Rule("print: 打印 (mainland usage)", None, r"列印", "打印"),
    # the awkward phrasings issue 60 listed, kept out
    Rule("identity path: 恒等映射 (d2l-zh)", r"(?i)\bidentity\b", r"单位路径", "恒等映射路径"),
    Rule("bookkeeping: 例行的管理工作", r"(?i)\bbookkeeping\b", r"记账工作", "例行的管理工作"),
    Rule("raise loudly: 明确报错", None, r"大声报错", "明确报错"),
    Rule("load without complaint: 照常加载", None, r"毫无怨言地加载", "照常加载"),
)

_CODE = re.compile(r"`[^`]*`|\]\([^)]*\)|<[^>]*>")   # inline code, link targets, tags


def _outside_code(text: str, wrong: str, right: str) -> tuple[str, int]:
    "Replace `wrong` by `right` in the parts of text that are not code, targets or tags."
    out, n, last = [], 0, 0
    for m in list(_CODE.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        piece, k = re.subn(wrong, right, text[last:end])
        out.append(piece)
        n += k
        if m:
            out.append(m.group())
            last = m.end()
    return "".join(out), n


def check(entries, fix: bool = False) -> list[tuple[str, str]]:
    "[(rule name, msgid)] for each rule an entry breaks; with fix, mend the entries."
    found = []
    for e in entries:
        if not e.msgstr or e.obsolete:
            continue
        for rule in RULES:
            if rule.english and not re.search(rule.english, e.msgid):
                continue
            mended, n = _outside_code(e.msgstr, rule.wrong, rule.right)
            if n:
                found.append((rule.name, e.msgid))
                if fix:
                    e.msgstr = mended
    return found


def main(argv: list[str]) -> int:
    fix = "--fix" in argv
    left = 0
    for po_path in sorted(LOCALE.rglob("*.po")):
        po = polib.pofile(str(po_path), wrapwidth=0)
        found = check(po, fix)
        if fix and found:
            po.save(str(po_path))
            found = check(po)
        for name, msgid in found:
            print(f"{po_path.relative_to(LOCALE)}: {name}: {msgid[:70]!r}")
        left += len(found)
    print(f"{left} translation(s) break a term rule")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
