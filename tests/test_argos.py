"""Chapter 29: the Argos Translate package that `to_argos` writes installs into a fresh Argos
home and translates, with no network, as our greedy decoding does; LibreTranslate serves it
(its JSON API and its web page, driven with Chromium) and refuses bad requests; `to_argos`
refuses bad arguments in one line.

Argos Translate and the LibreTranslate server run in subprocesses, each with an Argos home of
its own in a temporary folder (`offline_home`) and HTTP(S)_PROXY pointing at a closed port:
anything that tried to download would fail at once, and so would the test."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
import torch

# find_spec, not import: importing argostranslate makes its folders in this process's home
if not all(importlib.util.find_spec(m) for m in ("argostranslate", "onnx", "ctranslate2")):
    pytest.skip("Argos Translate, onnx or ctranslate2 is missing: "
                "pip install 'transformer-lit[argos,deploy]'", allow_module_level=True)

from transformer_lit import argos
from transformer_lit.data import train_tokenizer
from transformer_lit.export import EXPORT_MARKER
from transformer_lit.inference import translate
from transformer_lit.model import Transformer, TransformerConfig
from transformer_lit.pretrained import load_pretrained
from transformer_lit.validate import ArgumentError

ROOT = Path(__file__).resolve().parents[1]
LT_VENV = ROOT / ".venv-libretranslate"
LT_BIN = LT_VENV / "bin" / "libretranslate"
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-quic"]
# single sentences (held-out books: Ruth, Daniel, 1 John, and two of our own)
SENTENCES = ["Naomi said to her two daughters-in-law, Go, return each of you to her mother's house.",
             "Daniel answered the king, O king, live forever.",
             "God is love.", "Jesus wept.", "Where are you going?"]
TWO_PARTS = ["The king was very angry.", "He commanded to destroy all the wise men of Babylon."]
TWO = " ".join(TWO_PARTS)   # Argos splits it and translates each sentence alone
DEAD_PROXY = "http://127.0.0.1:9"   # the discard port: nothing listens, a connection is refused
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # for 127.0.0.1
# what the Argos test runs in its home: install with Argos's own function, translate stdin's texts
ARGOS_SCRIPT = """
import json, sys
from argostranslate import package, settings, translate
package.install_from_path(sys.argv[1])
assert (settings.beam_size, settings.compute_type) == (1, "float32"), settings.beam_size
print(json.dumps([translate.translate(t, "en", "fr") for t in json.load(sys.stdin)]))
"""
INSTALL = "import sys; from argostranslate import package; package.install_from_path(sys.argv[1])"

# its tests share costly module fixtures (a model, a package): one process runs them all
# under make test's `--dist loadgroup`
pytestmark = pytest.mark.xdist_group("argos")


def tidied(source: str, translation: str) -> str:
    """What LibreTranslate makes of a translation of a source that ends in punctuation
    (improve_translation_formatting): the translation ends in the source's mark."""
    marks = "!?.,;"
    assert source[-1] in marks
    if translation[-1] == source[-1]:
        return translation
    return (translation[:-1] if translation[-1] in marks else translation) + source[-1]


def offline_env(home: Path, package: Path) -> dict[str, str]:
    "This process's environment plus an Argos home for package, one CPU thread, no way out."
    env = dict(os.environ, **argos.offline_home(package, home), ARGOS_INTRA_THREADS="1",
               HOME=str(home / "home"), PYTHONUNBUFFERED="1", NO_PROXY="127.0.0.1,localhost",
               no_proxy="127.0.0.1,localhost")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env[name] = DEAD_PROXY
    (home / "home").mkdir(parents=True, exist_ok=True)
    return env


@pytest.fixture(scope="module")
def shipped():
    "The shipped model and tokenizer, and our greedy translations of SENTENCES and TWO's two."
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model, tokenizer = load_pretrained()
    ours = translate(model, tokenizer, SENTENCES + TWO_PARTS)
    torch.set_num_threads(threads)
    return model, tokenizer, ours


@pytest.fixture(scope="module")
def package(shipped, tmp_path_factory) -> Path:
    model, tokenizer, _ = shipped
    return argos.to_argos(model, tokenizer, tmp_path_factory.mktemp("pkg") / "en_fr.argosmodel")


@pytest.fixture(scope="module")
def tiny():
    "A tiny untrained model and its tokenizer: for the tests that only need a model to write."
    tokenizer = train_tokenizer(["In the beginning God created the heavens and the earth.",
                                 "Au commencement, Dieu créa les cieux et la terre."] * 10, 60)
    torch.manual_seed(0)
    V = tokenizer.vocab_size
    return Transformer(TransformerConfig.tiny(V, V)).eval(), tokenizer


def test_package_layout(package):
    "One folder in the zip, with the files Argos reads where it reads them."
    with zipfile.ZipFile(package) as z:
        names = set(z.namelist())
        metadata = json.loads(z.read(f"{argos.FOLDER}/metadata.json"))
    assert {n.split("/")[0] for n in names} == {argos.FOLDER}
    inside = {n.removeprefix(argos.FOLDER + "/") for n in names}
    assert {"metadata.json", "sentencepiece.model", "minisbd/en.onnx", "model/model.bin",
            "model/config.json", "model/shared_vocabulary.json", "README.md", EXPORT_MARKER} <= inside
    assert {k: metadata[k] for k in ("type", "from_code", "to_code", "target_prefix")} == {
        "type": "translate", "from_code": "en", "to_code": "fr", "target_prefix": ""}


def test_argos_translates_as_ours(shipped, package, tmp_path):
    "Argos 1.11, offline, with the package's splitter: our greedy output, sentence by sentence."
    _, _, ours = shipped
    env = offline_env(tmp_path / "argos", package)
    # Argos needs only the package's splitter: empty the cache that LibreTranslate checks
    shutil.rmtree(tmp_path / "argos" / "data" / "argos-translate" / "minisbd")
    r = subprocess.run([sys.executable, "-c", ARGOS_SCRIPT, str(package)], env=env,
                       input=json.dumps(SENTENCES + [TWO]), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    theirs = json.loads(r.stdout)
    assert theirs[:-1] == ours[: len(SENTENCES)]
    assert theirs[-1] == " ".join(ours[len(SENTENCES):])   # two sentences, each alone
    models = [p for p in (tmp_path / "argos").rglob("*") if p.suffix in (".onnx", ".bin", ".pt")]
    assert sorted(p.relative_to(tmp_path / "argos").as_posix() for p in models) == [
        f"data/argos-translate/packages/{argos.FOLDER}/minisbd/en.onnx",
        f"data/argos-translate/packages/{argos.FOLDER}/model/model.bin"]   # nothing downloaded


def test_bad_arguments(tiny, tmp_path):
    "Each wrong argument is one line that names it; nothing is written."
    model, tokenizer = tiny
    out = tmp_path / "p.argosmodel"
    cases = [((None, tokenizer, out), ArgumentError, "model must be a Transformer, got NoneType"),
             ((model, "tok", out), ArgumentError, "tokenizer must be a SubwordTokenizer, got str"),
             ((model, tokenizer, 3), ArgumentError, "out must be a path (str or Path), got 3"),
             ((model, tokenizer, tmp_path / "p.zip"), ArgumentError, "ending in .argosmodel"),
             ((model, tokenizer, out, 1), ArgumentError, "force must be True or False, got 1"),
             ((model, tokenizer, tmp_path), ArgumentError, "ending in .argosmodel")]
    for args, error, words in cases:
        with pytest.raises(error) as e:
            argos.to_argos(*args)
        assert words in str(e.value) and "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_force_replaces_only_ours(tiny, tmp_path):
    "An existing out: refused without force; with force, replaced if to_argos wrote it, else kept."
    model, tokenizer = tiny
    out = argos.to_argos(model, tokenizer, tmp_path / "p.argosmodel")
    assert oct(out.stat().st_mode & 0o777) == oct(0o644)
    with pytest.raises(FileExistsError, match="exists; force=True replaces it"):
        argos.to_argos(model, tokenizer, out)
    before = out.stat().st_mtime_ns
    time.sleep(0.01)
    assert argos.to_argos(model, tokenizer, out, force=True) == out
    assert out.stat().st_mtime_ns > before
    theirs = tmp_path / "theirs.argosmodel"
    theirs.write_text("someone else's")
    with pytest.raises(FileExistsError, match="not a package that to_argos wrote"):
        argos.to_argos(model, tokenizer, theirs, force=True)
    assert theirs.read_text() == "someone else's"
    (tmp_path / "dir.argosmodel").mkdir()
    with pytest.raises(FileExistsError, match="exists and is not a file"):
        argos.to_argos(model, tokenizer, tmp_path / "dir.argosmodel", force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.argosmodel", "p.argosmodel",
                                                          "theirs.argosmodel"]


def test_failed_write_leaves_nothing(tiny, tmp_path, monkeypatch):
    "A failure while writing leaves the earlier package as it was and no temporary file."
    model, tokenizer = tiny
    out = argos.to_argos(model, tokenizer, tmp_path / "p.argosmodel")
    before = out.read_bytes()

    def broken(lang: str) -> bytes:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(argos, "sentence_splitter", broken)
    with pytest.raises(OSError, match="No space left"):
        argos.to_argos(model, tokenizer, out, force=True)
    monkeypatch.undo()
    real_replace = os.replace

    def replace_fails(src, dst):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", replace_fails)   # the one atomic write's rename
    with pytest.raises(OSError, match="Input/output"):
        argos.to_argos(model, tokenizer, out, force=True)
    monkeypatch.setattr(os, "replace", real_replace)
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["p.argosmodel"]


def test_a_full_temporary_folder_is_named_not_out(tiny, tmp_path, monkeypatch):
    """Issue 61: with $TMPDIR full, the error named OUT, where nothing had been written yet;
    the package is put together in the temporary folder first, and the message says so."""
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()

    def full(lang: str) -> bytes:
        raise OSError(28, "No space left on device", str(tmp_path / "tmp" / "x" / "en.onnx"))

    monkeypatch.setattr(argos, "sentence_splitter", full)
    out = tmp_path / "p.argosmodel"
    with pytest.raises(OSError) as caught:
        argos.to_argos(*tiny, out)
    assert caught.value.filename == str(tmp_path / "tmp") and "TMPDIR" in caught.value.strerror
    assert not out.exists() and list((tmp_path / "tmp").iterdir()) == []


def test_a_failed_write_into_new_folders_names_out_and_leaves_no_folder(tiny, tmp_path, monkeypatch):
    """Issue 61: `export argos a/b/c/p.argosmodel` on a full disk left a/b/c behind; the
    folders the export made are removed with its temporary file, and the message names out."""
    def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(zipfile.ZipFile, "write", full)
    out = tmp_path / "a" / "b" / "c" / "p.argosmodel"
    with pytest.raises(OSError) as caught:
        argos.to_argos(*tiny, out)
    assert caught.value.filename == str(out) and caught.value.errno == 28
    assert list(tmp_path.iterdir()) == []


def test_offline_home_refuses_other_files(tmp_path):
    other = tmp_path / "x.argosmodel"
    other.write_bytes(b"PK")
    with pytest.raises(ValueError, match="not a package that to_argos wrote"):
        argos.offline_home(other, tmp_path / "home")


# ---- LibreTranslate ----------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict | bytes) -> tuple[int, dict]:
    "POST JSON to url; (status, JSON answer), also for an error status."
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with NO_PROXY.open(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


@pytest.fixture(scope="module")
def server(package, tmp_path_factory):
    "LibreTranslate on 127.0.0.1 serving only our package, from a fresh Argos home, offline."
    if not LT_BIN.exists():
        pytest.skip(f"no LibreTranslate: {LT_VENV.name} is missing; make it with "
                    "tools/libretranslate_venv.sh")
    home = tmp_path_factory.mktemp("lt")
    env = offline_env(home, package)
    python = str(LT_VENV / "bin" / "python")
    subprocess.run([python, "-c", INSTALL, str(package)], env=env, check=True, timeout=60)
    port, log = free_port(), home / "server.log"
    argv = [str(LT_BIN), "--host", "127.0.0.1", "--port", str(port), "--load-only", "en,fr",
            "--char-limit", "5000", "--threads", "2", "--frontend-language-source", "en",
            "--frontend-language-target", "fr", "--disable-files-translation"]
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=home)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with NO_PROXY.open(url + "/languages", timeout=5) as r:
                    languages = json.loads(r.read())
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"LibreTranslate did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)
        assert [lang["code"] for lang in languages] == ["en", "fr"], languages
        yield url, proc, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_libretranslate_api(server, shipped):
    """POST /translate answers our greedy translations, single sentences and two at once, as
    LibreTranslate tidies them (one of ours ends in '!' where its source ends in '.')."""
    url, _, log = server
    _, _, ours = shipped
    for sentence, mine in zip(SENTENCES, ours):
        assert post(url + "/translate", {"q": sentence, "source": "en", "target": "fr"}) == (
            200, {"translatedText": tidied(sentence, mine)})
    status, answer = post(url + "/translate", {"q": TWO, "source": "en", "target": "fr"})
    assert (status, answer["translatedText"]) == (200, tidied(TWO, " ".join(ours[len(SENTENCES):])))
    assert sum(tidied(s, o) != o for s, o in zip(SENTENCES, ours)) == 1
    assert "Loaded support for 2 languages" in log.read_text()


def test_alternatives_mean_beams(server, package, tmp_path):
    """With alternatives (the web page always asks for 3), Argos searches with alternatives + 1
    beams whatever ARGOS_BEAM_SIZE says: the answer is CTranslate2's best of 4 beams."""
    import ctranslate2
    import sentencepiece as spm
    url, _, _ = server
    with zipfile.ZipFile(package) as z:
        z.extractall(tmp_path)
    folder = tmp_path / argos.FOLDER
    sp = spm.SentencePieceProcessor(model_file=str(folder / "sentencepiece.model"))
    translator = ctranslate2.Translator(str(folder / "model"), intra_threads=1)
    pieces = sp.encode(SENTENCES[:2], out_type=str)
    best = [sp.decode(r.hypotheses[0]) for r in translator.translate_batch(
        pieces, beam_size=4, num_hypotheses=4, length_penalty=0.2, replace_unknowns=True)]
    for sentence, beam in zip(SENTENCES[:2], best):
        status, answer = post(url + "/translate",
                              {"q": sentence, "source": "en", "target": "fr", "alternatives": 3})
        assert (status, answer["translatedText"]) == (200, tidied(sentence, beam))
        assert len(answer["alternatives"]) <= 3


BAD = [({"q": "", "source": "en", "target": "fr"}, "Invalid request: missing q parameter"),
       ({"source": "en", "target": "fr"}, "Invalid request: missing q parameter"),
       ({"q": "Hi.", "target": "fr"}, "Invalid request: missing source parameter"),
       ({"q": "Hi.", "source": "en"}, "Invalid request: missing target parameter"),
       ({"q": "Hi.", "source": "xx", "target": "fr"}, "xx is not supported"),
       ({"q": "Hi.", "source": "en", "target": "de"}, "de is not supported"),
       ({"q": "In the beginning. " * 5556, "source": "en", "target": "fr"},
        "Invalid request: request (100008) exceeds text limit (5000)")]


def test_libretranslate_refuses_bad_requests(server):
    "Bad requests get 400 and a message that names the problem; the server stays up."
    url, proc, _ = server
    for body, message in BAD:
        assert post(url + "/translate", body) == (400, {"error": message}), body
    assert post(url + "/translate", b"{not json") == (400, {"error": (
        "The browser (or proxy) sent a request that this server could not understand.")})
    # one sentence of more pieces than our position table has rows: CTranslate2 refuses it
    # inside Argos, LibreTranslate answers 500 and goes on
    long = " ".join(["and the king said to the people"] * 60)
    assert post(url + "/translate", {"q": long, "source": "en", "target": "fr"})[0] == 500
    assert post(url + "/translate", {"q": "Jesus wept.", "source": "en", "target": "fr"}) == (
        200, {"translatedText": "Jésus pleura."})
    assert proc.poll() is None


@pytest.mark.browser
def test_libretranslate_web_page(server, shipped):
    """The web page: type English on the left, read French on the right: what the API answers
    to the page's request (3 alternatives, so 4 beams; for this sentence, our greedy French)."""
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("Chromium is missing; install it with: apt-get update && apt-get install -y chromium")
    from playwright.sync_api import sync_playwright
    url, _, _ = server
    _, _, ours = shipped
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url, wait_until="networkidle")
            page.fill("#textarea1", SENTENCES[1])
            page.wait_for_function("() => document.querySelector('#textarea2').value !== ''",
                                   timeout=30_000)
            shown = page.input_value("#textarea2")
            asked = {"q": SENTENCES[1], "source": "en", "target": "fr", "alternatives": 3}
            assert shown == post(url + "/translate", asked)[1]["translatedText"]
            assert shown == tidied(SENTENCES[1], ours[1])
            assert not errors, errors
            if os.environ.get("TRANSFORMER_LIT_SCREENSHOTS") != "0":   # make test: checks only
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / "libretranslate.png"))
        finally:
            browser.close()


# --- from the hostile-input rounds (issues 32, 39, 47, 50) --------------------


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


@pytest.mark.usefixtures("one_thread")
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
