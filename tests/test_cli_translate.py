"""transformer_lit.cli.translate (chapter 24): `transformer-lit translate` reads its input as it arrives and in bounded memory, writes one line out for one line in (escaped where it would command the terminal), and says in one line what it cut or could not do."""
from __future__ import annotations

import io
import os
import resource
import select
import shlex
import signal
import subprocess
import sys
import warnings

import pytest
import torch
from synthetic import COMMAND, assert_one_line_error, env, one_line_error, run

import transformer_lit.cli.translate as cli_translate
from transformer_lit import inference
from transformer_lit.cli.translate import printable
from transformer_lit.inference import translate

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


# --- from the hostile-input rounds (issues 32, 39, 47, 50) --------------------


class CutWarning(UserWarning):
    "A warning about sentence `index` of a batch, as chapter 16's warnings are."

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index

    def __str__(self) -> str:
        return f"sentence {self.index} was cut at\n its length limit"


def test_out_of_memory_is_one_line(model_pt, capsys, monkeypatch):
    def no_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(cli_translate, "translate", no_memory)
    assert_one_line_error(*run(["translate", "--checkpoint", str(model_pt), "Hi."], capsys),
                          "out of memory", "--beam", "--batch-size")


def test_a_real_out_of_memory_is_one_line():
    "The shipped model, 64 sentences, 500 beams, in 2.5 GiB of address space: torch's allocator fails."
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (5 * 2**29, 5 * 2**29))
    lines = "The king said to his servants, Bring me the man who did this in the land of Egypt.\n" * 64
    done = subprocess.run(COMMAND + ["translate", "--beam", "500", "--threads", "1"], input=lines,
                          capture_output=True, text=True, env=env(), timeout=300, preexec_fn=limit)
    one_line_error(done, "out of memory", "--beam", "--batch-size")


def test_decoding_values_are_refused_in_the_users_words(model_pt, capsys):
    for options, words in ((["--length-penalty", "inf"], ["--length-penalty"]), (["--beam", "500"], ["--beam"]),
                           (["--checkpoint", ""], ["--checkpoint"])):
        argv = ["translate", "--checkpoint", str(model_pt), *options, "Hi."]
        status, out, err = run(argv, capsys)
        assert_one_line_error(status, out, err, *words)
        assert "beam_size" not in err and "length_penalty" not in err


def test_any_warning_of_translate_is_one_line_naming_the_input_line(model_pt, capsys, monkeypatch):
    def warns(model, tokenizer, sentences, *args, **kwargs):
        for i, s in enumerate(sentences):
            if s.startswith("Cut"):
                warnings.warn(CutWarning(i))
        return [s.upper() for s in sentences]

    monkeypatch.setattr(cli_translate, "translate", warns)
    status, out, err = run(["translate", "--checkpoint", str(model_pt), "--batch-size", "2"], capsys,
                           "Hi.\n\nCut one.\nOk.\nCut two.\n", monkeypatch)
    assert status == 0 and out.splitlines() == ["HI.", "", "CUT ONE.", "OK.", "CUT TWO."]
    assert err.splitlines() == ["transformer-lit translate: warning: line 3: sentence 0 was cut at its length limit",
                                "transformer-lit translate: warning: line 5: sentence 0 was cut at its length limit"]


@pytest.mark.skipif(not hasattr(inference, "OutputTruncatedWarning"), reason="the API does not warn yet (issue 27)")
def test_a_translation_cut_at_its_limit_is_one_line(model_pt, capsys):
    # an untrained tiny model rarely says end-of-sentence: its outputs run to the length limit
    status, out, err = run(["translate", "--checkpoint", str(model_pt), "God said.", "Naomi said."], capsys)
    assert status == 0 and len(out.splitlines()) == 2
    warned = err.splitlines()
    assert warned and all(w.startswith("transformer-lit translate: warning: ") for w in warned), err
    assert "Traceback" not in err and len(warned) <= 2


def test_standard_input_is_translated_as_it_arrives(model_pt):
    proc = subprocess.Popen(COMMAND + ["translate", "--device", "cpu", "--checkpoint", str(model_pt),
                                       "--batch-size", "1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        for line in ("God said.", "Naomi said."):
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], 120)   # stdin is still open
            assert ready, "no translation before standard input closed"
            assert proc.stdout.readline().endswith("\n")
    finally:
        proc.stdin.close()
        proc.wait(timeout=120)
    assert proc.returncode == 0


@pytest.mark.parametrize("nonblocking", [False, True])
def test_a_pause_in_standard_input_is_answered_at_the_default_batch_size(model_pt, nonblocking):
    """Issue 61: a stream that stays open (a terminal, `tail -f`, a program waiting for each
    answer) got nothing until 64 lines had arrived; what has arrived is answered when the
    input pauses, also from a descriptor the parent left non-blocking."""
    read_end, write_end = os.pipe()
    if nonblocking:
        os.set_blocking(read_end, False)
    proc = subprocess.Popen(COMMAND + ["translate", "--device", "cpu", "--checkpoint", str(model_pt)],
                            stdin=read_end, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            bufsize=0, env=env())
    os.close(read_end)
    out = b""
    try:
        for lines in (["God said."], ["Naomi said.", "", "Ruth said."]):
            os.write(write_end, "".join(f"{line}\n" for line in lines).encode())
            wanted = out.count(b"\n") + len(lines)
            while out.count(b"\n") < wanted:   # the input is still open
                ready, _, _ = select.select([proc.stdout], [], [], 120)
                assert ready, f"no translation while standard input stays open: {out!r}"
                out += os.read(proc.stdout.fileno(), 1 << 16)
            assert out.count(b"\n") == wanted
    finally:
        os.close(write_end)
        proc.wait(timeout=120)
    assert proc.returncode == 0 and proc.stdout.read() == b""
    assert len(out.splitlines()) == 4 and out.splitlines()[2] == b""   # the blank line stays


def bounded() -> None:
    """In the child: 2 GiB of address space, and SIGINT as a terminal sends it (a pytest-xdist worker
    ignores it, and a child would inherit that)."""
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("redirect, words", [(">&-", ["standard output is closed"]),
                                             ("<&-", ["standard input is closed", "arguments"])])
def test_a_closed_standard_stream_is_one_line(model_pt, redirect, words):
    argv = " ".join(map(shlex.quote, [*COMMAND, "translate", "--checkpoint", str(model_pt)]))
    argv += "" if redirect == "<&-" else " Hi."
    done = subprocess.run(["bash", "-c", f"{argv} {redirect}"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    one_line_error(done, *words)


def test_lines_are_read_up_to_line_bytes(monkeypatch):
    monkeypatch.setattr(cli_translate, "LINE_BYTES", 8)
    stream = io.BytesIO(b"short\n" + b"x" * 30 + b"\n" + b"12345678\n" + b"1234567\xc3\xa9tail\n" + b"end")
    got = list(cli_translate._read_lines(stream))
    assert got == [(b"short\n", False), (b"x" * 8, True), (b"12345678\n", False),
                   (b"1234567\xc3", True), (b"end", False)]


def test_a_long_line_is_cut_with_a_warning(model_pt, capsys, monkeypatch):
    monkeypatch.setattr(cli_translate, "LINE_BYTES", 65)
    stdin = ("é" * 40 + " tail\nHi.\n").encode()   # 85 bytes: byte 65 is half of the 33rd 'é'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    status, out, err = run(["translate", "--checkpoint", str(model_pt)], capsys)
    assert status == 0 and len(out.splitlines()) == 2, err
    assert "line 1 is longer than 65 bytes: only its first 65 are read" in err, err


def test_input_without_line_ends_is_refused_in_bounded_memory_and_time(model_pt, tmp_path):
    """A line with no end (`translate < /dev/zero`) is read up to LINE_BYTES, dropped up to
    LINE_END_BYTES more, then refused in one line (issue 50: it was read for ever)."""
    script = ("import atexit, resource, sys; from transformer_lit.cli import main; "
              "atexit.register(lambda: open(sys.argv[1], 'w').write("
              "str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))); sys.exit(main(sys.argv[2:]))")
    rss = tmp_path / "rss"
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.Popen([sys.executable, "-c", script, str(rss), "translate", "--checkpoint",
                                 str(model_pt)], stdin=zero, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
                                preexec_fn=bounded)
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            proc.kill()   # it would read /dev/zero for ever without the bound
    assert proc.returncode == 2 and out == "" and err.count("\n") == 1, (proc.returncode, err)
    assert "line 1 has no end within 1,048,576 bytes" in err, err
    assert int(rss.read_text()) < 1_000_000, rss.read_text()   # KiB


def test_translate_tokenizes_each_sentence_once(model_pt, monkeypatch):
    from transformer_lit.cli.shared import load_model
    model, tokenizer = load_model(model_pt)
    calls = []
    encode = type(tokenizer).encode
    monkeypatch.setattr(type(tokenizer), "encode", lambda self, texts: calls.append(texts) or encode(self, texts))
    long = "word " * 2000   # far more than the model reads: it warns, and is still tokenized once
    with pytest.warns(UserWarning):
        translate(model, tokenizer, ["Hi.", long])
    assert calls == [["Hi.", long]]


# `transformer-lit translate` with a model that writes characters latin-1 lacks (œ is in
# neither ascii nor latin-1) and a newline
CRAFTED = ("import sys; import transformer_lit.cli.translate as t; "
           "t.load_model = lambda *a, **k: (None, None); "
           "t.translator_from_args = lambda args: lambda m, tok, texts: "
           "['Dieu est amour, œ \u2028 é' for _ in texts]; "
           "from transformer_lit.cli import main; sys.exit(main(sys.argv[1:]))")


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


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_without_the_characters_gets_escapes_not_a_traceback(encoding):
    done = subprocess.run([sys.executable, "-c", CRAFTED, "translate", "Hello.", "Amen."],
                          capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONIOENCODING": encoding})
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    shown = done.stdout.decode(encoding).splitlines()   # every byte is the terminal's
    assert shown == ["Dieu est amour, \\u0153 \\u2028 " + ("\\xe9" if encoding == "ascii" else "é")] * 2


def test_translate_does_not_import_the_compiler():
    "Checking a checkpoint's shapes built the model on the meta device, importing torch._dynamo."
    code = ("import sys; from transformer_lit.cli import main; status = main(['translate', "
            "'God is love.']); print(sorted(m for m in sys.modules if m.startswith(("
            "'torch._dynamo', 'torch._inductor')))); sys.exit(status)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    translation, imported = done.stdout.splitlines()
    assert translation and imported == "[]", imported


def test_a_non_blocking_pipe_read_late_gets_every_line(tiny_run, tmp_path):
    """Issue 61: with standard output a pipe its parent left non-blocking (as Node.js
    leaves a shared pipe) and a reader that starts late, 1,246 of 3,000 lines came
    out, status 0: a write to the full pipe failed at once and Python dropped it.
    (This tiny model writes empty lines, and a warning for each: the reader waits past
    a full pipe of 4 KiB.)"""
    import fcntl
    import threading
    import time

    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)   # full after a few lines
    os.set_blocking(w, False)
    lines = [f"And God said, Let there be light, number {i}." for i in range(6000)]
    errors = open(tmp_path / "stderr", "w")   # a pipe would fill with its warnings
    proc = subprocess.Popen(COMMAND + ["translate", "--checkpoint", str(tiny_run),
                                       "--threads", "1"],
                            stdin=subprocess.PIPE, stdout=w, stderr=errors, env=env())
    os.close(w)

    def feed():
        proc.stdin.write("".join(f"{line}\n" for line in lines).encode())
        proc.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    # the reader starts late: once 4,500 lines were written (4,096 fill the pipe), or
    # once the writer waits (no new warning for 2 s)
    seen, still = 0, time.time()
    while proc.poll() is None and seen < 4500 and time.time() - still < 2:
        time.sleep(0.2)
        now = (tmp_path / "stderr").read_text().count("\n")
        seen, still = now, (time.time() if now > seen else still)
    with os.fdopen(r, "rb") as f:
        got = f.read()
    status = proc.wait(timeout=300)
    errors.close()
    err = (tmp_path / "stderr").read_text()
    assert status == 0, err[-2000:]
    assert got.count(b"\n") == 6000, (got.count(b"\n"), err[-2000:])
