"""Hostile input, round four (issue 50): text from a model reaches the terminal as one
printable line per input line, in whatever encoding the terminal has."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import transformer_lit.cli.translate as cli_translate
from transformer_lit.cli.translate import printable

from synthetic import run

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


def test_printable_escapes_what_would_command_the_terminal():
    crafted = "Dieu\nest\x1b]0;owned\x07 amour\r\u2028\u202eœ\t"
    shown = printable(crafted)
    assert shown == "Dieu\\nest\\x1b]0;owned\\x07 amour\\r\\u2028\\u202eœ\\t"
    assert shown.isprintable() and printable("Dieu est amour, œ é ß 神") == "Dieu est amour, œ é ß 神"


def test_one_line_in_gives_one_line_out_whatever_the_model_writes(monkeypatch, capsys):
    "A checkpoint whose tokenizer writes newlines and escape sequences (re-signed checksums)."
    monkeypatch.setattr(cli_translate, "load_model", lambda *a, **k: (None, None))
    crafted = lambda model, tokenizer, texts: [f"{t}\n\x1b]0;title\x07\nmore" for t in texts]
    monkeypatch.setattr(cli_translate, "translator_from_args", lambda args: crafted)
    status, out, err = run(["translate", "Hello.", "Amen."], capsys)
    assert status == 0 and err == "", err
    assert out.splitlines() == ["Hello.\\n\\x1b]0;title\\x07\\nmore", "Amen.\\n\\x1b]0;title\\x07\\nmore"]
    assert "\x1b" not in out


# `transformer-lit translate` with a model that writes characters latin-1 lacks (œ is in
# neither ascii nor latin-1) and a newline
CRAFTED = ("import sys; import transformer_lit.cli.translate as t; "
           "t.load_model = lambda *a, **k: (None, None); "
           "t.translator_from_args = lambda args: lambda m, tok, texts: "
           "['Dieu est amour, œ \u2028 é' for _ in texts]; "
           "from transformer_lit.cli import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_without_the_characters_gets_escapes_not_a_traceback(encoding):
    done = subprocess.run([sys.executable, "-c", CRAFTED, "translate", "Hello.", "Amen."],
                          capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONIOENCODING": encoding})
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    shown = done.stdout.decode(encoding).splitlines()   # every byte is the terminal's
    assert shown == ["Dieu est amour, \\u0153 \\u2028 " + ("\\xe9" if encoding == "ascii" else "é")] * 2
