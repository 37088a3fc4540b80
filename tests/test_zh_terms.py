"""One Chinese term for each thing (issue 60, item 4): tools/zh_terms.py's rules hold over
every catalogue, and the check finds and mends each kind of slip on a catalogue whose
answer is known, code and link targets left alone."""
from __future__ import annotations

import sys
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import zh_terms  # noqa: E402


def entry(msgid: str, msgstr: str) -> polib.POEntry:
    return polib.POEntry(msgid=msgid, msgstr=msgstr)


def test_the_catalogues_keep_one_term_for_each_thing():
    found = [(po.relative_to(zh_terms.LOCALE), name, msgid[:60])
             for po in sorted(zh_terms.LOCALE.rglob("*.po"))
             for name, msgid in zh_terms.check(polib.pofile(str(po)))]
    assert not found, f"{len(found)} slips, the first: {found[:5]}"


def test_each_rule_finds_and_mends_its_slip():
    entries = [
        entry("See chapter 09.", "见第 09 章。"),
        entry("the second stack", "第二个栈"),
        entry("the shipped model", "随包模型和随包提供的分词器"),
        entry("the recipe", "训练方案"),
        entry("each verse", "每个经节"),
        entry("three pieces", "三个片段"),
        entry("Check: it holds", "检验：成立"),
        entry("Ruth and 1 John", "路得记和《约翰一书》"),
        entry("Print to PDF", "列印成 PDF"),
        entry("the identity path", "单位路径"),
        entry("What remains is bookkeeping.", "剩下的是记账工作。"),
        entry("It raises loudly.", "它大声报错。"),
        entry("They load without complaint.", "它们毫无怨言地加载。"),
    ]
    found = zh_terms.check(entries, fix=True)
    assert len(found) == len(zh_terms.RULES)
    assert [e.msgstr for e in entries] == [
        "见第 9 章。", "第二个堆叠", "随包发布的模型和随包发布的分词器", "训练配方",
        "每个经文", "三个词片", "检查：成立", "《路得记》和《约翰一书》", "打印成 PDF",
        "恒等映射路径", "剩下的是例行的管理工作。", "它明确报错。", "它们照常加载。"]
    assert zh_terms.check(entries) == []


def test_code_link_targets_and_other_words_are_left_alone():
    entries = [entry("the stack", "`栈` 见 [第 09 章](../nbs/09_x.ipynb#第-09-章)"),
               entry("a passage", "一个片段"),          # no "piece" in the English
               entry("a verse", "同一节经文")]
    found = zh_terms.check(entries, fix=True)
    assert [e.msgstr for e in entries] == ["`栈` 见 [第 9 章](../nbs/09_x.ipynb#第-09-章)",
                                           "一个片段", "同一节经文"]
    assert len(found) == 1
