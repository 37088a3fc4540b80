"""tools/translations.py and the Chinese build's reading of the catalogues (issue 61): a
catalogue that is emptied, blank, not UTF-8, not .po syntax, or not a file at all is
reported in one line, never counted complete, and never a traceback; the Chinese build
stops at a catalogue it would misread."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import language_switch  # noqa: E402
import translations  # noqa: E402

PAGE = "nbs/04_masking"  # a page of the reader's path: its catalogue must be complete


@pytest.fixture
def locale(tmp_path, monkeypatch):
    "A copy of the catalogues that the tool reads instead of the repository's."
    copy = tmp_path / "LC_MESSAGES"
    shutil.copytree(translations.LOCALE, copy)
    monkeypatch.setattr(translations, "LOCALE", copy)
    return copy


def report(monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["translations.py"])
    status = translations.main()
    return status, capsys.readouterr().out


def test_the_catalogues_as_committed_are_complete(locale, monkeypatch, capsys):
    status, out = report(monkeypatch, capsys)
    assert status == 0 and f"{PAGE} " in out


def test_an_emptied_catalogue_of_a_page_that_must_be_complete_is_not_complete(
    locale, monkeypatch, capsys
):
    (locale / f"{PAGE}.po").write_text('msgid ""\nmsgstr ""\n')
    status, out = report(monkeypatch, capsys)
    assert status == 1 and f"{PAGE}.po: holds no message, and {PAGE} must be" in out
    (locale / f"{PAGE}.po").unlink()
    status, out = report(monkeypatch, capsys)
    assert status == 1 and f"{PAGE}.po: missing, and {PAGE} must be complete" in out


def test_a_message_translated_as_spaces_is_untranslated(locale, monkeypatch, capsys):
    po = locale / f"{PAGE}.po"
    text = po.read_text()
    start = text.index('msgstr "', text.index("\nmsgid ", text.index("\nmsgid ") + 1))
    end = text.index("\n\n", start)
    po.write_text(text[:start] + 'msgstr " "' + text[end:])
    status, out = report(monkeypatch, capsys)
    line = next(x for x in out.splitlines() if x.startswith(f"{PAGE} "))
    assert status == 1 and line.endswith("must be complete: 1 missing"), line
    language_switch.untranslated.cache_clear()
    assert language_switch.untranslated(po) == 1


@pytest.mark.parametrize("damage", ["byte 0xff", "unclosed string", "folder", "fifo"])
def test_a_catalogue_that_cannot_be_read_is_one_line(
    locale, monkeypatch, capsys, damage
):
    po = locale / f"{PAGE}.po"
    text = po.read_text()
    if damage == "byte 0xff":
        po.write_bytes(text.encode() + b"\n# \xff\n")
    elif damage == "unclosed string":
        po.write_text(text + '\nmsgid "a"\nmsgstr "b\n')
    elif damage == "folder":
        po.unlink()
        po.mkdir()
    else:
        po.unlink()
        os.mkfifo(po)  # opened and read, it would wait for a writer for ever
    status, out = report(monkeypatch, capsys)
    said = [x for x in out.splitlines() if x.startswith(str(po))]
    assert status == 1 and len(said) == 1 and "Traceback" not in out, out[-500:]
    assert {"byte 0xff": "not UTF-8", "unclosed string": "not .po syntax",
            "folder": "cannot be read", "fifo": "cannot be read"}[damage] in said[0]


def test_the_chinese_build_stops_at_a_catalogue_it_would_misread(tmp_path):
    """babel (which Sphinx compiles the catalogues with) and polib read an unclosed
    string a character short, without a word: `-W` passed."""
    from sphinx.errors import ExtensionError

    folder = tmp_path / "locales" / "zh_CN" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    (folder / "page.po").write_text('msgid ""\nmsgstr ""\n\nmsgid "Hello"\nmsgstr "你好\n')

    class App:
        srcdir = str(tmp_path)

        class config:
            language = "zh_CN"
            locale_dirs = ["locales"]

    with pytest.raises(ExtensionError, match=r"page.po:5: not .po syntax"):
        language_switch.check_catalogues(App)
    (folder / "page.po").write_text('msgid ""\nmsgstr ""\n\nmsgid "Hello"\nmsgstr "你好"\n')
    language_switch.check_catalogues(App)
