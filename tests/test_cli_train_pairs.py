"""`transformer-lit train --pairs FILE --languages SRC-TGT` (chapter 23, with chapter 43's
reading and split; issue 59): the reader's own pairs, in any script, train, translate and
are scored with the target's word splitting; every fault of the file or of the options
is one line, exit status 2, and nothing written."""
from __future__ import annotations

import json

import pytest
from synthetic import assert_one_line_error, run

import transformer_lit.cli.train as cli_train
from transformer_lit.checkpoints import load_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py

TINY = ["--preset", "tiny", "--vocab-size", "120", "--device", "cpu", "--threads", "1",
        "--quiet", "--max-tokens", "400"]
DIGITS = "零一二三四五六七八九"


def chinese(n: int) -> str:
    return "".join(DIGITS[int(d)] for d in str(n))


def pairs(n: int = 160) -> list[str]:
    "n English-Chinese pairs, each source distinct (so none is a near-duplicate)."
    return [f"I have {i} books and {i % 7} pens.\t我有{chinese(i)}本书和{chinese(i % 7)}支笔。"
            for i in range(n)]


def write(path, lines, end="\n", encoding="utf-8"):
    path.write_bytes(end.join(lines).encode(encoding) + end.encode())
    return path


@pytest.fixture
def own(tmp_path):
    return write(tmp_path / "en-zh.tsv", pairs())


def test_chinese_pairs_train_two_steps_translate_and_are_scored_by_characters(
        own, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    argv = ["train", *TINY, "--steps", "2", "--bleu-sentences", "5", "--pairs", str(own),
            "--languages", "en-zh", "--out", str(out)]
    status, printed, err = run(argv, capsys)
    assert status == 0, err
    assert "160 pairs (0 repeats dropped): 144 to train on, 8 to validate, 8 held out" in printed
    results = json.loads((out / "results.json").read_text())
    assert results["languages"] == {"source": "en", "target": "zh"}
    assert results["corpus"]["pairs"] == [str(own)] and len(results["corpus"]["sha256"][0]) == 64
    scores = results["valid_scores"]
    assert scores["sentences"] == 5
    for row in ("averaged model", "copy the source"):
        assert "tok:zh" in scores[row]["bleu_signature"], scores[row]
        assert "chrf" in scores[row]
    status, printed, err = run(["translate", "--checkpoint", str(out), "--device", "cpu",
                                "--threads", "1"], capsys, "I have 3 books.\n", monkeypatch)
    assert status == 0 and printed.count("\n") == 1, err
    # the tokenizer kept every Chinese character the file holds (a rare one is not <unk>)
    from transformer_lit.checkpoints import load_model_folder
    from transformer_lit.data import SubwordTokenizer, UNK_ID
    tokenizer = SubwordTokenizer(load_model_folder(out)[1])
    assert UNK_ID not in tokenizer.encode("我有一二三四五六七八九零本书和支笔。")


def test_two_aligned_files_are_pairs_too(tmp_path, capsys):
    sources = write(tmp_path / "src.txt", [p.split("\t")[0] for p in pairs()])
    targets = write(tmp_path / "tgt.txt", [p.split("\t")[1] for p in pairs()])
    argv = ["train", *TINY, "--steps", "1", "--bleu-sentences", "0", "--pairs", str(sources),
            str(targets), "--languages", "en-zh", "--out", str(tmp_path / "run")]
    status, printed, err = run(argv, capsys)
    assert status == 0 and "144 to train on" in printed, err


def test_a_bom_and_mixed_line_ends_are_read_and_said(tmp_path, capsys):
    lines = pairs()
    f = tmp_path / "mixed.tsv"
    f.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines[:80]).encode() + b"\n"
                  + "\n".join(lines[80:]).encode() + b"\n")
    argv = ["train", *TINY, "--steps", "1", "--bleu-sentences", "0", "--pairs", str(f),
            "--languages", "en-zh", "--out", str(tmp_path / "run")]
    status, printed, err = run(argv, capsys)
    assert status == 0, err
    assert "byte-order mark at the start, skipped" in printed
    assert "lines end in more than one way (80 LF, 79 CRLF)" in printed or \
        "lines end in more than one way" in printed


BAD_FILES = {
    "not UTF-8": (lambda p: write(p, ["Café.\tCafé."] * 120, encoding="latin-1"),
                  ["not UTF-8", ":1:"]),
    "one column": (lambda p: write(p, pairs()[:50] + ["only a source"] + pairs()[50:]),
                   [":51:", "1 column", "expected 2"]),
    "three columns": (lambda p: write(p, pairs()[:9] + ["a\tb\tc"] + pairs()[9:]),
                      [":10:", "3 columns"]),
    "empty target": (lambda p: write(p, ["A source.\t "] + pairs()), [":1:", "empty target"]),
    "empty source": (lambda p: write(p, pairs() + ["\tUne cible."]), [":161:", "empty source"]),
    "too few pairs": (lambda p: write(p, pairs(40)), ["40 pairs", "at least 100"]),
    "UTF-16": (lambda p: write(p, pairs(), encoding="utf-16"), ["UTF-16", "expected UTF-8"]),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_a_bad_file_is_one_line_and_nothing_is_written(tmp_path, capsys, monkeypatch, case):
    monkeypatch.setattr(cli_train, "load_verses", lambda: pytest.fail("the corpus was read"))
    make, words = BAD_FILES[case]
    f = make(tmp_path / "pairs.tsv")
    out = tmp_path / "run"
    argv = ["train", *TINY, "--steps", "1", "--pairs", str(f), "--languages", "en-fr",
            "--out", str(out)]
    assert_one_line_error(*run(argv, capsys), "--pairs", str(f), *words)
    assert not out.exists()


@pytest.mark.parametrize("options, words", [
    (["--pairs", "x.tsv"], ["--pairs needs --languages"]),
    (["--languages", "en-zh"], ["--languages names the languages of --pairs"]),
    (["--pairs", "a", "b", "c", "--languages", "en-zh"], ["one file", "got 3 files"]),
    (["--pairs", "x.tsv", "--languages", "english-chinese"], ["--languages must be", "en-zh"]),
    (["--pairs", "x.tsv", "--languages", "en-zh", "--english", "k"], ["--english", "--pairs"]),
    (["--pairs", "missing.tsv", "--languages", "en-zh"], ["missing.tsv", "cannot be read"]),
])
def test_option_mistakes_are_one_line(tmp_path, capsys, monkeypatch, options, words):
    monkeypatch.setattr(cli_train, "load_verses", lambda: pytest.fail("the corpus was read"))
    monkeypatch.chdir(tmp_path)
    argv = ["train", *TINY, "--steps", "1", "--out", str(tmp_path / "run"), *options]
    assert_one_line_error(*run(argv, capsys), *words)
    assert not (tmp_path / "run").exists()


def test_a_pair_longer_than_the_model_reads_is_counted_and_said(tmp_path, capsys):
    long = " ".join(f"w{i}" for i in range(400))
    f = write(tmp_path / "long.tsv", [f"{long}\t长。"] + pairs())
    argv = ["train", *TINY, "--steps", "1", "--bleu-sentences", "0", "--pairs", str(f),
            "--languages", "en-zh", "--out", str(tmp_path / "run")]
    status, printed, err = run(argv, capsys)
    assert status == 0, err
    assert "left out " in printed and "a side is longer than the model's" in printed, printed


def test_resume_needs_the_same_pairs(own, tmp_path, capsys):
    out = tmp_path / "run"
    first = ["train", *TINY, "--steps", "1", "--bleu-sentences", "0", "--pairs", str(own),
             "--languages", "en-zh", "--out", str(out)]
    assert run(first, capsys)[0] == 0
    assert load_checkpoint(out / "checkpoint.pt")["corpus"]["languages"] == ["en", "zh"]
    again = ["train", "--resume", "--steps", "2", "--quiet", "--bleu-sentences", "0",
             "--device", "cpu", "--threads", "1", "--out", str(out)]
    status, printed, err = run(again, capsys)
    assert status == 0, err
    assert load_checkpoint(out / "checkpoint.pt")["state"]["step"] == 2
    assert_one_line_error(*run([*again, "--pairs", str(own)], capsys),
                          "--pairs", "cannot change when a run is resumed")
    write(own, pairs(170))
    assert_one_line_error(*run([*again[:2], "--steps", "3", *again[4:]], capsys),
                          "changed since the run began")


@pytest.fixture(scope="module")
def zh_run(tmp_path_factory):
    "A two-step English-Chinese run of train --pairs: its folder; read only."
    import contextlib
    import io

    from transformer_lit.cli import main
    base = tmp_path_factory.mktemp("zh")
    own = write(base / "en-zh.tsv", pairs())
    out = base / "run"
    argv = ["train", *TINY, "--steps", "2", "--bleu-sentences", "0", "--pairs", str(own),
            "--languages", "en-zh", "--out", str(out)]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    return out


def test_the_exports_carry_the_languages(zh_run, tmp_path, capsys):
    "web.json, the Argos package's folder and metadata name en-zh; onnxruntime translates as we do."
    pytest.importorskip("onnxruntime")
    import zipfile

    from transformer_lit import argos
    from transformer_lit.checkpoints import load_model_folder
    from transformer_lit.data import SubwordTokenizer
    from transformer_lit.inference import OutputTruncatedWarning, translate
    from transformer_lit.onnx_export import OnnxTranslator
    status, _, err = run(["export", "onnx", str(tmp_path / "web"), "--checkpoint", str(zh_run)],
                         capsys)
    assert status == 0, err
    web = json.loads((tmp_path / "web" / "web.json").read_text())
    assert (web["source_language"], web["target_language"]) == ("en", "zh")
    assert (tmp_path / "web" / "README.md").read_text().startswith("# English to Chinese")
    model, raw, _ = load_model_folder(zh_run)
    model, tokenizer = model.eval(), SubwordTokenizer(raw)
    sentence = "I have 12 books and 5 pens."
    got = OnnxTranslator(tmp_path / "web", threads=1).translate(sentence)
    with pytest.warns(OutputTruncatedWarning):   # two steps of training: no </s> yet
        assert got == translate(model, tokenizer, [sentence])[0]
    package = tmp_path / "zh.argosmodel"
    status, _, err = run(["export", "argos", str(package), "--checkpoint", str(zh_run)], capsys)
    assert status == 0, err
    with zipfile.ZipFile(package) as z:
        assert {n.split("/")[0] for n in z.namelist()} == {"translate-en_zh-transformer_lit"}
    metadata = argos._checked_metadata(package)
    assert (metadata["from_code"], metadata["to_code"], metadata["to_name"]) == (
        "en", "zh", "Chinese")
    assert argos.check_package_path(package, True) == package   # --force knows it as ours
    status, _, err = run(["export", "argos", str(package), "--checkpoint", str(zh_run),
                          "--force"], capsys)
    assert status == 0, err


def test_exporters_refuse_a_malformed_pair(zh_run, tmp_path):
    from transformer_lit.argos import to_argos
    from transformer_lit.checkpoints import load_model_folder
    from transformer_lit.data import SubwordTokenizer
    from transformer_lit.onnx_export import export_onnx
    from transformer_lit.validate import ArgumentError
    model, raw, _ = load_model_folder(zh_run)
    model, tokenizer = model.eval(), SubwordTokenizer(raw)
    for bad in ("en-zh", ("en",), ("en", "Chinese"), ("en", "../x")):
        with pytest.raises(ArgumentError, match="languages must be"):
            export_onnx(model, tokenizer, tmp_path / "o", languages=bad)
        with pytest.raises(ArgumentError, match="languages must be"):
            to_argos(model, tokenizer, tmp_path / "a.argosmodel", languages=bad)
    assert not (tmp_path / "o").exists() and not (tmp_path / "a.argosmodel").exists()


def test_translate_refuses_another_pair_only_when_one_is_named(zh_run, capsys, monkeypatch):
    monkeypatch.setattr(cli_train, "load_verses", lambda: pytest.fail("the corpus was read"))
    ours = ["translate", "--checkpoint", str(zh_run), "--device", "cpu", "--threads", "1",
            "I have 3 books."]
    for languages in ([], ["--languages", "en-zh"]):
        status, printed, err = run([*ours, *languages], capsys)
        assert status == 0 and printed.count("\n") == 1, err
    assert_one_line_error(*run([*ours, "--languages", "en-fr"], capsys),
                          "--languages en-fr", "the model translates en-zh")
    assert_one_line_error(*run([*ours, "--languages", "english"], capsys),
                          "--languages must be", "en-zh")
    shipped = ["translate", "--languages", "en-fr", "--threads", "1", "Light."]
    assert run(shipped, capsys)[0] == 0   # the shipped model is English-French


def test_the_ctranslate2_and_hugging_face_exports_name_the_languages(zh_run, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    pytest.importorskip("transformers")
    for engine, title in (("ctranslate2", "# English to Chinese: a Transformer for CTranslate2"),
                          ("huggingface", "# English to Chinese: a Transformer exported")):
        out = tmp_path / engine
        status, _, err = run(["export", engine, str(out), "--checkpoint", str(zh_run)], capsys)
        assert status == 0, err
        assert title in (out / "README.md").read_text(encoding="utf-8")
    header = (tmp_path / "huggingface" / "README.md").read_text().split("---")[1]
    assert "language:\n- en\n- zh\n" in header   # the Hub's metadata
