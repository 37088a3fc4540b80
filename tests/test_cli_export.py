"""transformer_lit.cli.export (chapter 31): `transformer-lit export` writes each engine's folder, refuses a bad OUT by name, and leaves nothing behind when stopped."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from synthetic import assert_one_line_error, run

import transformer_lit.export as export

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


# --- from the hostile-input rounds (issues 32, 39, 47, 50) --------------------


@pytest.mark.parametrize("engine, out, files", [
    ("huggingface", "hf", {"config.json", "model.safetensors", "tokenizer.json", "README.md"}),
    ("argos", "model.argosmodel", None),
    ("onnx", "onnx", {"encoder.onnx", "decoder.onnx", "weights.bin", "tokenizer.json", "web.json",
                      "README.md"}),
])
def test_the_export_command_writes_each_engine_and_refuses_in_one_line(model_pt, tmp_path, capsys, engine, out,
                                                                        files):
    pytest.importorskip({"huggingface": "transformers", "onnx": "onnx"}.get(engine, "argostranslate"))
    argv = ["export", engine, str(tmp_path / out), "--checkpoint", str(model_pt)]
    status, printed, err = run(argv, capsys)
    assert status == 0 and printed.startswith(f"wrote {tmp_path / out} ("), err
    if files:
        assert files <= {p.name for p in (tmp_path / out).iterdir()}
    else:
        assert (tmp_path / out).is_file()
    assert_one_line_error(*run(argv, capsys), "exists", "--force")
    assert run([*argv, "--force"], capsys)[0] == 0
    if engine == "argos":
        assert_one_line_error(*run(["export", "argos", str(tmp_path / "x.zip"), "--checkpoint", str(model_pt)],
                                   capsys), "OUT", ".argosmodel")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_an_export_leaves_nothing_behind(tmp_path, sig):
    pytest.importorskip("ctranslate2")
    out = tmp_path / "out"
    # the tokenizer's bytes, written last into the temporary folder, take a minute: the signal
    # lands while the export is being written, however busy the machine
    slow = ("import sys, time; from transformer_lit.data import SubwordTokenizer as S; "
            "b = S.to_bytes; S.to_bytes = lambda self: (time.sleep(60), b(self))[1]; "
            "from transformer_lit.cli import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.Popen([sys.executable, "-c", slow, "export", "ctranslate2", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + 120
    while (not list(tmp_path.glob(f"{export.EXPORT_MARKER}.*/model.bin")) and proc.poll() is None
           and time.time() < deadline):   # the weights written: it sleeps in the tokenizer's bytes
        time.sleep(0.01)
    assert proc.poll() is None, proc.communicate()   # caught while it writes the folder
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    # 128 + the signal's number, as train reports it and a shell would (issue 50: it was 130)
    assert proc.returncode == 128 + sig and f"interrupted by {sig.name}" in err, err
    assert list(tmp_path.iterdir()) == []   # no hidden folder, no OUT


@pytest.mark.parametrize("engine", ["ctranslate2", "huggingface", "argos", "onnx"])
def test_an_empty_export_folder_is_refused_by_name(engine, capsys):
    "export ctranslate2 '' was taken as the current folder, where train --out '' is refused."
    assert_one_line_error(*run(["export", engine, ""], capsys), "OUT must name a folder")


# --- the onnx target (chapter 30, issue 58) ---------------------------------------------


def test_export_onnx_writes_the_shipped_model_for_onnxruntime(tmp_path, capsys):
    "No --checkpoint: the shipped model, whose folder onnxruntime translates with as translate does."
    pytest.importorskip("onnxruntime")
    from transformer_lit.inference import translate
    from transformer_lit.onnx_export import OnnxTranslator
    from transformer_lit.pretrained import load_pretrained
    out = tmp_path / "web"
    status, printed, err = run(["export", "onnx", str(out)], capsys)
    assert status == 0 and printed.startswith(f"wrote {out} (weights.bin ") and "README.md" in printed, err
    assert not err   # no exporter notes, no onnxruntime warnings
    sentence = "The Lord is my shepherd."
    assert OnnxTranslator(out, threads=1).translate(sentence) == translate(*load_pretrained(), [sentence])[0]


def test_export_onnx_refuses_in_one_line(tmp_path, capsys, model_pt, monkeypatch):
    pytest.importorskip("onnx")
    ckpt = ["--checkpoint", str(model_pt)]
    (tmp_path / "file").write_text("x")
    assert_one_line_error(*run(["export", "onnx", str(tmp_path / "file"), *ckpt], capsys), "not a folder")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    assert_one_line_error(*run(["export", "onnx", str(tmp_path / "mine"), *ckpt, "--force"], capsys),
                          "--force replaces only an earlier export")
    assert_one_line_error(*run(["export", "onnx", str(tmp_path / "x"), "--checkpoint", str(tmp_path / "no.pt")],
                               capsys), "no.pt")
    monkeypatch.setitem(sys.modules, "onnx", None)   # the extra not installed
    assert_one_line_error(*run(["export", "onnx", str(tmp_path / "y"), *ckpt], capsys), "transformer-lit[onnx]")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
