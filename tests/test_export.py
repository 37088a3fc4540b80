"""transformer_lit.export: a tiny model written for CTranslate2 and read back by CTranslate2 itself (scores and
greedy tokens against ours), the quantization choices, the refusals, the `export ctranslate2` command
(transformer_lit.cli.export, through transformer_lit.cli.main), and the message when ctranslate2 is missing."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import tempfile
import sys
import threading
from pathlib import Path

import pytest
import torch

import transformer_lit.cli as cli
import transformer_lit.export as export
from transformer_lit.checkpoints import save_checkpoint, save_model
from transformer_lit.data import BOS_ID, EOS_ID, PAD_ID, train_tokenizer
from transformer_lit.inference import greedy_decode
from transformer_lit.model import Transformer, TransformerConfig

ctranslate2 = pytest.importorskip("ctranslate2", reason="pip install -e '.[deploy]' installs ctranslate2")

ENGLISH = ["In the beginning God created the heavens and the earth.", "The earth was formless and empty.",
           "God said, Let there be light, and there was light.", "God saw the light, and saw that it was good.",
           "The king said to Daniel, Your God is the God of gods.", "Naomi said to Ruth, Go, my daughter."]
FRENCH = ["Au commencement, Dieu créa les cieux et la terre.", "La terre était informe et vide.",
          "Dieu dit: Que la lumière soit! Et la lumière fut.", "Dieu vit que la lumière était bonne.",
          "Le roi dit à Daniel: Votre Dieu est le Dieu des dieux.", "Naomi dit à Ruth: Va, ma fille."]
FILES = {"model.bin", "config.json", "shared_vocabulary.json", "sentencepiece.model", "README.md",
         export.EXPORT_MARKER}
N = 12   # new tokens in the greedy comparisons

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(ENGLISH + FRENCH, vocab_size=80)


def tiny(tokenizer, seed: int = 0, **overrides) -> Transformer:
    "A seeded tiny model over the tokenizer's vocabulary, eval mode."
    torch.manual_seed(seed)
    V = tokenizer.vocab_size
    return Transformer(TransformerConfig.tiny(V, V, **overrides)).eval()


def translator(folder: Path, compute_type: str = "default"):
    return ctranslate2.Translator(str(folder), compute_type=compute_type, intra_threads=1)


def ours_greedy(model: Transformer, ids: list[list[int]], n: int) -> list[list[int]]:
    "Our greedy tokens for a padded batch of sources (EOS appended), cut at EOS."
    src = torch.full((len(ids), max(map(len, ids)) + 1), PAD_ID)
    for r, x in enumerate(ids):
        src[r, :len(x) + 1] = torch.tensor(x + [EOS_ID])
    rows = greedy_decode(model, src, n, BOS_ID, EOS_ID)[:, 1:].tolist()
    return [row[:row.index(EOS_ID)] if EOS_ID in row else row for row in rows]


# --- the round trip -------------------------------------------------------------------------------

VARIANTS = [dict(norm_first=nf, share_embeddings=sh) for nf in (False, True) for sh in (False, True)]
# every other choice the config names (issue 56): the export reads them from the config
VARIANTS += [dict(norm_first=True, share_embeddings=True, activation="gelu", positional="learned", norm_eps=1e-6),
             dict(norm_first=False, share_embeddings=False, activation="gelu")]


def variant_id(o: dict) -> str:
    name = f"{'pre' if o['norm_first'] else 'post'}-norm,{'shared' if o['share_embeddings'] else 'separate'}"
    return ",".join([name, *(f"{k}={v}" for k, v in o.items() if k not in ("norm_first", "share_embeddings"))])


@pytest.mark.parametrize("overrides", VARIANTS, ids=variant_id)
def test_ctranslate2_scores_and_greedy_tokens_equal_ours(tmp_path, tokenizer, overrides):
    "CTranslate2 reads the folder and computes our log-probabilities and our greedy tokens (a padded batch)."
    model = tiny(tokenizer, **overrides)
    folder = export.to_ctranslate2(model, tokenizer, tmp_path / "ct2")
    assert {p.name for p in folder.iterdir()} == FILES
    t = translator(folder)
    src_ids, tgt_ids = tokenizer.encode(ENGLISH), tokenizer.encode(FRENCH)
    # scores of given targets: CTranslate2 appends </s> to source and target, as our batches do
    scored = t.score_batch([tokenizer.pieces(x) for x in src_ids], [tokenizer.pieces(y) for y in tgt_ids])
    for x, y, s in zip(src_ids, tgt_ids, scored):
        logp = model(torch.tensor([x + [EOS_ID]]), torch.tensor([[BOS_ID] + y]))[0].log_softmax(-1)
        ours = logp.gather(1, torch.tensor(y + [EOS_ID])[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(s.log_probs), ours.detach(), atol=1e-4, rtol=0)
    # greedy: pieces in, pieces out; min_decoding_length=0 lets a random model end at once, as ours may
    results = t.translate_batch([tokenizer.pieces(x) for x in src_ids], beam_size=1,
                                max_decoding_length=N, min_decoding_length=0)
    theirs = [[tokenizer.sp.piece_to_id(p) for p in r.hypotheses[0]] for r in results]
    assert theirs == ours_greedy(model, src_ids, N)


def test_shared_matrix_is_stored_once(tmp_path, tokenizer):
    "Source, target and output share one matrix: CTranslate2 stores it once, so the file is smaller."
    sizes = {}
    for share in (False, True):
        folder = export.to_ctranslate2(tiny(tokenizer, share_embeddings=share), tokenizer, tmp_path / str(share))
        sizes[share] = (folder / "model.bin").stat().st_size
    V, D = tokenizer.vocab_size, 32
    # the separate model stores one more (V, D) float32 matrix (the source embedding); the shared one
    # stores instead a name that points to the matrix (an alias record: a few dozen bytes)
    assert 4 * V * D - 256 < sizes[False] - sizes[True] < 4 * V * D


def test_folder_holds_tokenizer_vocabulary_and_config(tmp_path, tokenizer):
    "The sentencepiece model is ours, the vocabulary lists our pieces in id order, the config our conventions."
    import sentencepiece as spm
    model = tiny(tokenizer, norm_first=True)
    folder = export.to_ctranslate2(model, tokenizer, tmp_path / "ct2")
    sp = spm.SentencePieceProcessor(model_file=str(folder / "sentencepiece.model"))
    assert sp.encode(ENGLISH) == tokenizer.encode(ENGLISH)
    vocab = json.loads((folder / "shared_vocabulary.json").read_text())
    assert vocab == [tokenizer.sp.id_to_piece(i) for i in range(tokenizer.vocab_size)]
    config = json.loads((folder / "config.json").read_text())
    assert (config["bos_token"], config["eos_token"], config["unk_token"]) == ("<s>", "</s>", "<unk>")
    assert config["decoder_start_token"] == "<s>" and config["add_source_eos"] and not config["add_source_bos"]
    assert config["layer_norm_epsilon"] == pytest.approx(1e-5)
    readme = (folder / "README.md").read_text()
    assert "translate_batch" in readme and "beam_size=1" in readme and "pre-norm" in readme


def test_positions_beyond_the_table_are_the_models_limit(tmp_path, tokenizer):
    "The position table CTranslate2 reads is ours (max_len rows): a source of max_len - 1 pieces translates."
    model = tiny(tokenizer, max_len=16)
    folder = export.to_ctranslate2(model, tokenizer, tmp_path / "ct2")
    ids = (tokenizer.encode(ENGLISH[0]) * 4)[:15]
    r = translator(folder).translate_batch([tokenizer.pieces(ids)], beam_size=1, max_decoding_length=8,
                                           min_decoding_length=0)
    assert [tokenizer.sp.piece_to_id(p) for p in r[0].hypotheses[0]] == ours_greedy(model, [ids], 8)[0]


# --- quantization ---------------------------------------------------------------------------------

@pytest.mark.parametrize("quantization", ["int8", "int8_float32", "int16", "float16", "bfloat16"])
def test_every_quantization_loads_and_shrinks_the_file(tmp_path, tokenizer, quantization):
    "Each weight type CTranslate2 accepts is written; the file shrinks by the type's width; it translates."
    model = tiny(tokenizer)
    full = export.to_ctranslate2(model, tokenizer, tmp_path / "float32")
    small = export.to_ctranslate2(model, tokenizer, tmp_path / quantization, quantization)
    ratio = (small / "model.bin").stat().st_size / (full / "model.bin").stat().st_size
    width = 1 if quantization.startswith("int8") else 2
    assert width / 4 < ratio < width / 4 + 0.15, ratio   # + scales, biases and norms kept in float32
    results = translator(small).translate_batch([tokenizer.pieces(tokenizer.encode(ENGLISH[0]))],
                                                beam_size=1, max_decoding_length=N, min_decoding_length=N)
    assert len(results[0].hypotheses[0]) == N


def test_accepted_quantizations_are_ctranslate2s():
    from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES
    assert export.quantizations() == tuple(ACCEPTED_MODEL_TYPES)
    assert {"int8", "int8_float32", "int16", "float16", "float32"} <= set(export.quantizations())
    export.check_quantization(None)


@pytest.mark.parametrize("bad", ["int4", "INT8", "", 8])
def test_unknown_quantization_is_refused_with_the_list(tmp_path, tokenizer, bad):
    with pytest.raises(ValueError, match="quantization must be one of int8, .*float32.*got"):
        export.to_ctranslate2(tiny(tokenizer), tokenizer, tmp_path / "ct2", bad)
    assert not (tmp_path / "ct2").exists()


# --- refusals -------------------------------------------------------------------------------------

def test_existing_folder_needs_force(tmp_path, tokenizer):
    out = tmp_path / "ct2"
    export.to_ctranslate2(tiny(tokenizer), tokenizer, out)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="exists; force=True"):
        export.to_ctranslate2(tiny(tokenizer), tokenizer, out)
    export.to_ctranslate2(tiny(tokenizer), tokenizer, out, force=True)
    assert {p.name for p in out.iterdir()} == FILES | {"notes.txt"}   # the user's file stays
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]   # no temporary folder left
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="not a folder"):
        export.to_ctranslate2(tiny(tokenizer), tokenizer, tmp_path / "file", force=True)
    (tmp_path / "empty").mkdir()   # an empty folder is fine
    export.to_ctranslate2(tiny(tokenizer), tokenizer, tmp_path / "empty", force=True)


def test_force_replaces_only_an_earlier_export(tmp_path, tokenizer, monkeypatch):
    "Before: --force wrote README.md and config.json into any folder, the current one too."
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("my readme")
    (mine / "config.json").write_text("{}")
    monkeypatch.chdir(mine)
    for out in (mine, Path("."), Path("")):
        with pytest.raises(FileExistsError, match="no export wrote"):
            export.to_ctranslate2(tiny(tokenizer), tokenizer, out, force=True)
    assert (mine / "README.md").read_text() == "my readme"
    assert sorted(p.name for p in mine.iterdir()) == ["README.md", "config.json"]


def test_models_that_cannot_be_mapped_are_refused(tmp_path, tokenizer):
    V = tokenizer.vocab_size
    torch.manual_seed(0)
    wrong_vocab = Transformer(TransformerConfig.tiny(V, V + 1)).eval()
    with pytest.raises(ValueError, match="tokenizer's"):
        export.to_ctranslate2(wrong_vocab, tokenizer, tmp_path / "a")
    assert not (tmp_path / "a").exists()


def test_the_export_reads_the_config_not_the_modules(tmp_path, tokenizer):
    "House rule 27: the activation, the positions and the epsilon come from model.config."
    model = tiny(tokenizer, activation="gelu", positional="learned", norm_eps=1e-6)
    folder = export.to_ctranslate2(model, tokenizer, tmp_path / "ct2")
    config = json.loads((folder / "config.json").read_text())
    assert config["layer_norm_epsilon"] == pytest.approx(1e-6)
    spec = export.transformer_spec(model)
    assert spec.encoder.activation == ctranslate2.specs.Activation.GELU
    torch.testing.assert_close(torch.from_numpy(spec.encoder.position_encodings.encodings),
                               model.pos.embedding.weight.detach())


# --- the command ----------------------------------------------------------------------------------

def run(argv: list[str], capsys) -> tuple[int, str, str]:
    "cli.main(argv) in-process: (exit status, stdout, stderr); argparse's own exits count as statuses."
    try:
        status = cli.main(argv)
    except SystemExit as e:
        status = e.code
    out = capsys.readouterr()
    return status, out.out, out.err


def assert_one_line_error(status: int, out: str, err: str, *words: str) -> None:
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("transformer-lit export: error: "), err
    for w in words:
        assert w in err, (w, err)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, tokenizer) -> Path:
    "A tiny post-norm model saved as `train` saves its model: a model folder (chapter 14)."
    return save_model(tmp_path_factory.mktemp("ckpt") / "model", tiny(tokenizer), tokenizer.to_bytes())


def test_help_names_the_options(capsys):
    status, out, _ = run(["export", "ctranslate2", "--help"], capsys)
    assert status == 0
    for word in ("OUT", "--checkpoint", "--quantization", "--force", "int8"):
        assert word in out


def test_command_writes_a_checkpoints_model(tmp_path, capsys, checkpoint, tokenizer):
    status, out, err = run(["export", "ctranslate2", str(tmp_path / "ct2"), "--checkpoint", str(checkpoint),
                            "--quantization", "int8"], capsys)
    assert (status, err) == (0, "") and out.startswith(f"wrote {tmp_path / 'ct2'}") and "int8" in out
    assert {p.name for p in (tmp_path / "ct2").iterdir()} == FILES
    r = translator(tmp_path / "ct2").translate_batch([tokenizer.pieces(tokenizer.encode(ENGLISH[1]))],
                                                     beam_size=1, max_decoding_length=4, min_decoding_length=4)
    assert len(r[0].hypotheses[0]) == 4


def test_command_exports_a_model_pt_of_an_earlier_version(tmp_path, capsys, tokenizer):
    "Before model folders, train wrote model.pt (a checkpoint with its tokenizer): it still exports."
    old = save_checkpoint(tmp_path / "model.pt", tiny(tokenizer), tokenizer=tokenizer.to_bytes())
    status, out, err = run(["export", "ctranslate2", str(tmp_path / "ct2"), "--checkpoint", str(old)], capsys)
    assert (status, err) == (0, "") and {p.name for p in (tmp_path / "ct2").iterdir()} == FILES


def test_command_exports_the_shipped_model_by_default(tmp_path, capsys):
    from transformer_lit.pretrained import load_pretrained
    status, out, err = run(["export", "ctranslate2", str(tmp_path / "ct2")], capsys)
    assert (status, err) == (0, "") and "float32" in out
    model, tokenizer = load_pretrained()
    ids = tokenizer.encode(["And God said, Let there be light."])
    r = translator(tmp_path / "ct2").translate_batch([tokenizer.pieces(ids[0])], beam_size=1)
    assert [tokenizer.sp.piece_to_id(p) for p in r[0].hypotheses[0]] == ours_greedy(model, ids, 64)[0]


def test_command_force_refuses_a_folder_of_other_files(tmp_path, capsys, checkpoint):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "README.md").write_text("my readme")
    argv = ["export", "ctranslate2", str(tmp_path / "mine"), "--checkpoint", str(checkpoint), "--force"]
    assert_one_line_error(*run(argv, capsys), "OUT", "no export wrote", "--force")
    assert (tmp_path / "mine" / "README.md").read_text() == "my readme"


def test_command_refuses_an_existing_folder_without_force(tmp_path, capsys, checkpoint):
    (tmp_path / "ct2").mkdir()
    argv = ["export", "ctranslate2", str(tmp_path / "ct2"), "--checkpoint", str(checkpoint)]
    assert_one_line_error(*run(argv, capsys), "OUT", "exists", "--force")
    assert list((tmp_path / "ct2").iterdir()) == []
    status, out, err = run(argv + ["--force"], capsys)
    assert status == 0 and err == ""


@pytest.mark.parametrize("case, words", [
    ("quantization", ["--quantization", "int8_float32", "'int3'"]),
    ("missing", ["--checkpoint", "no checkpoint at"]),
    ("not a checkpoint", ["--checkpoint", "not a checkpoint"]),
    ("no tokenizer", ["--checkpoint", "holds no tokenizer"]),
    ("damaged tokenizer", ["--checkpoint", "damaged", "'tokenizer'"]),
    ("file as OUT", ["OUT", "not a folder"]),
])
def test_command_errors_are_one_line(tmp_path, capsys, checkpoint, tokenizer, case, words):
    out, ckpt, extra = tmp_path / "ct2", checkpoint, []
    if case == "quantization":
        extra = ["--quantization", "int3"]
    elif case == "missing":
        ckpt = tmp_path / "nothing.pt"
    elif case == "not a checkpoint":
        ckpt = tmp_path / "text.pt"
        ckpt.write_text("not torch")
    elif case == "no tokenizer":
        ckpt = save_checkpoint(tmp_path / "bare.pt", tiny(tokenizer))
    elif case == "damaged tokenizer":   # checked as translate checks it (cli.shared.load_model)
        ckpt = save_checkpoint(tmp_path / "bad.pt", tiny(tokenizer), tokenizer=b"\x00garbage")
    else:
        out.write_text("a file")
    assert_one_line_error(*run(["export", "ctranslate2", str(out), "--checkpoint", str(ckpt), *extra], capsys),
                          *words)
    assert case == "file as OUT" or not out.exists()


def test_usage_errors_exit_2(capsys):
    for argv in (["export"], ["export", "ctranslate2"], ["export", "tensorflow", "out"]):
        status, out, err = run(argv, capsys)
        assert status == 2 and out == "" and "usage:" in err


def test_missing_ctranslate2_names_the_extra(tmp_path, capsys, monkeypatch, checkpoint, tokenizer):
    "Without ctranslate2 the module still imports; the function and the command say which extra to install."
    monkeypatch.setitem(sys.modules, "ctranslate2", None)   # import ctranslate2 now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'transformer-lit\[deploy\]'"):
        export.to_ctranslate2(tiny(tokenizer), tokenizer, tmp_path / "ct2")
    argv = ["export", "ctranslate2", str(tmp_path / "ct2"), "--checkpoint", str(checkpoint)]
    assert_one_line_error(*run(argv, capsys), "ctranslate2", "transformer-lit[deploy]")
    assert not (tmp_path / "ct2").exists()


COMMAND = ("import sys\n"
           "{prelude}"
           "from transformer_lit.cli import main\n"
           "sys.exit(main())\n")


@pytest.mark.parametrize("missing", [False, True], ids=["installed", "ctranslate2 missing"])
def test_command_in_a_fresh_interpreter(tmp_path, checkpoint, missing):
    "The installed command in a real process: exit status, stdout and stderr."
    prelude = "sys.modules['ctranslate2'] = None\n" if missing else ""
    r = subprocess.run([sys.executable, "-c", COMMAND.format(prelude=prelude), "export", "ctranslate2",
                        str(tmp_path / "ct2"), "--checkpoint", str(checkpoint)], capture_output=True, text=True)
    if missing:
        assert_one_line_error(r.returncode, r.stdout, r.stderr, "transformer-lit[deploy]")
    else:
        assert (r.returncode, r.stderr) == (0, "") and r.stdout.startswith("wrote ")
        assert {p.name for p in (tmp_path / "ct2").iterdir()} == FILES


# --- the results file the chapter reads -----------------------------------------------------------

def test_results_file_is_consistent():
    "benchmarks/bench_ctranslate2.py's file: its rates and ratios follow from its own counts and medians."
    from importlib import resources
    path = Path(str(resources.files("transformer_lit") / "results" / "ctranslate2_cpu.json"))
    r = json.loads(path.read_text())
    assert r["threads"] == 1 and r["cpu"]["vendor"] and r["ctranslate2"].startswith("4.8")
    for name, a in r["agreement"].items():
        for key in ("greedy_float32", "greedy_int8", "beam4_lp0_float32", "ours_int8_fast_greedy"):
            part = a[key]
            assert part["verses"] == a["verses"] and part["equal"] == a["verses"] - len(part["differing"])
            assert part["percent"] == round(100 * part["equal"] / part["verses"], 2)
        g = a["greedy_float32"]
        assert len(g["first_difference_logit_margins"]) == len(g["differing"])
        s = a["scores"]
        assert a["chrf_int8_minus_float32"] == round(s["ct2_int8_greedy"]["chrf"] - s["ct2_float32_greedy"]["chrf"], 2)
    for case in r["speed"]["cases"]:
        tokens = case["batch"] * case["new_tokens"]
        for k, seconds in case["median_seconds"].items():
            assert abs(case["tokens_per_second"][k] - tokens / seconds) <= 0.05 + 1e-3 * tokens / seconds
            assert abs(case["time_ratio_to_ct2_float32"][k] - seconds / case["median_seconds"]["ct2_float32"]) < 6e-3
    sizes = r["bytes_on_disk"]
    assert sizes["ct2_int8_model_bin"] < sizes["ct2_float16_model_bin"] < sizes["ct2_float32_model_bin"]


def test_readme_code_translates_without_transformer_lit(tmp_path):
    "The README's Python block, run as written in a fresh interpreter that cannot import transformer_lit."
    from transformer_lit.pretrained import load_pretrained
    model, tokenizer = load_pretrained()
    folder = export.to_ctranslate2(model, tokenizer, tmp_path / "ct2")
    readme = (folder / "README.md").read_text()
    code = readme.split("```python\n")[1].split("```")[0].replace("path/to/this/folder", str(folder))
    r = subprocess.run([sys.executable, "-c", "import sys; sys.modules['transformer_lit'] = None\n" + code],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    sentence = "And God said, Let there be light."
    assert sentence in code
    assert r.stdout == tokenizer.decode(ours_greedy(model, tokenizer.encode([sentence]), 64)[0]) + "\n"


def test_the_export_folder_is_checked_by_validate_rules(tmp_path):
    with pytest.raises(ValueError, match=r"^out must be a path \(str or Path\), got 5$"):
        export.check_export_folder(5, False)   # was a TypeError from pathlib
    with pytest.raises(ValueError, match="^force must be True or False, got 1$"):
        export.check_export_folder(tmp_path / "new", 1)


# --- from the hostile-input rounds (issues 32, 39, 47, 50) --------------------


@pytest.fixture(scope="module")
def small():
    pytest.importorskip("ctranslate2", reason="pip install -e '.[deploy]' installs ctranslate2")
    tokenizer = train_tokenizer(ENGLISH + FRENCH, vocab_size=80)
    torch.manual_seed(0)
    V = tokenizer.vocab_size
    return Transformer(TransformerConfig.tiny(V, V)).eval(), tokenizer


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_the_export_folder_follows_the_umask(small, tmp_path, umask):
    before = os.umask(umask)
    try:
        out = export.to_ctranslate2(*small, tmp_path / "out")
    finally:
        os.umask(before)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask


def test_a_long_out_name_is_written(small, tmp_path):
    out = export.to_ctranslate2(*small, tmp_path / ("x" * 250))   # 255 bytes is the most a name has
    assert (out / "model.bin").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["x" * 250]


def test_a_failed_export_leaves_nothing_behind(small, tmp_path, monkeypatch):
    monkeypatch.setattr(export, "_readme", lambda *args: "\ud800")   # cannot be written as UTF-8
    with pytest.raises(UnicodeEncodeError):
        export.to_ctranslate2(*small, tmp_path / "new" / "deeper" / "out")
    assert list(tmp_path.iterdir()) == []   # no hidden folder, no parent folder made for it


def test_a_failed_write_names_out(small, tmp_path, monkeypatch):
    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device", str(src))
    monkeypatch.setattr(export.os, "replace", full)
    out = tmp_path / "out"
    with pytest.raises(OSError) as caught:
        export.to_ctranslate2(*small, out)
    assert caught.value.filename == str(out) and caught.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


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


def _swapping_save(parent: Path, victim: Path):
    """A save that writes one file, then (as another user who may rename entries in the
    parent folder would) swaps the hidden folder for a link to victim, then writes two more."""
    def save(folder: Path) -> None:
        (folder / "model.bin").write_text("weights")
        (hidden,) = [p for p in parent.iterdir() if p.name.startswith(".transformer-lit-export.")]
        hidden.rename(parent / "moved")
        hidden.symlink_to(victim)
        for name in ("README.md", "config.json"):
            (folder / name).write_text(name)
    return save


def test_a_hidden_folder_swapped_for_a_link_writes_and_changes_nothing_through_it(tmp_path):
    """Issue 61: the hidden folder swapped for a link to V while the export wrote: README.md
    and config.json were written into V, the modes loop made V/secret.txt 644 and V/private
    755, and OUT became the link. The export writes through its open folder, then refuses."""
    from transformer_lit.export import write_export_folder
    victim, parent = tmp_path / "V", tmp_path / "P"
    victim.mkdir()
    parent.mkdir()
    (victim / "secret.txt").write_text("the user's")
    (victim / "secret.txt").chmod(0o600)
    (victim / "private").mkdir(mode=0o700)
    (victim / "private").chmod(0o700)
    out = parent / "out"
    with pytest.raises(OSError, match="changed by another process") as caught:
        write_export_folder(out, _swapping_save(parent, victim))
    assert str(caught.value).startswith(f"{out}: ")
    assert sorted(p.name for p in victim.iterdir()) == ["private", "secret.txt"]
    assert (victim / "secret.txt").stat().st_mode & 0o777 == 0o600
    assert (victim / "private").stat().st_mode & 0o777 == 0o700
    assert not out.exists() and not out.is_symlink()
    assert list((parent / "moved").iterdir()) == []   # our files, written where we opened


def test_an_export_into_a_folder_that_cannot_be_written_names_out(tmp_path, monkeypatch):
    """Round four, back in five: the error named the hidden temporary folder, not OUT."""
    import tempfile
    from transformer_lit.export import write_export_folder

    def refused(dir=None, prefix=None, **kwargs):
        raise PermissionError(13, "Permission denied", f"{dir}/{prefix}abc123")

    monkeypatch.setattr(tempfile, "mkdtemp", refused)
    out = tmp_path / "new" / "out"
    with pytest.raises(OSError) as caught:
        write_export_folder(out, lambda folder: None)
    assert caught.value.filename == str(out) and caught.value.errno == 13
    assert list(tmp_path.iterdir()) == []   # the parent made for it is gone too


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
    models: an export moves its files in only while it holds OUT's lock."""
    import transformer_lit.export as export
    from transformer_lit.files import release_lock, take_lock
    out = tmp_path / "out"
    _export(out, {"model.bin": "first", "vocab.json": "first"})
    other = take_lock(export._lock_path(out), "out")   # another export, moving in
    second = threading.Thread(target=_export, args=(out, {"model.bin": "second"}))
    second.start()
    second.join(0.5)
    try:
        assert second.is_alive() and (out / "model.bin").read_text() == "first"
    finally:
        release_lock(export._lock_path(out), other)   # the other export is done
    second.join(10)
    assert sorted(p.name for p in out.iterdir()) == [".transformer-lit-export", "model.bin"]
    assert (out / "model.bin").read_text() == "second"


def test_an_export_does_not_wait_without_end(tmp_path, monkeypatch):
    "The wait for another export of OUT ends, and names the holder and the wait."
    import transformer_lit.export as export
    from transformer_lit.files import release_lock, take_lock
    monkeypatch.setattr(export, "_LOCK_WAIT_S", 0.2)
    lock = export._lock_path(tmp_path / "out")
    other = take_lock(lock, "out")
    try:
        with pytest.raises(FileExistsError, match=r"out is in use by pid \d+ on .* \(waited "
                           r"0.2 s\); try again when it is done"):
            _export(tmp_path / "out", {"model.bin": "mine"})
    finally:
        release_lock(lock, other)
    assert sorted(p.name for p in tmp_path.iterdir()) == []   # nothing left behind


def test_an_export_done_meanwhile_is_not_replaced_without_force(tmp_path):
    "OUT was new when checked; another export wrote it before this one moved in."
    out = tmp_path / "out"
    done_first = lambda: _export(out, {"model.bin": "first"})
    with pytest.raises(FileExistsError, match="exists; force=True writes into it"):
        _export(out, {"model.bin": "second"}, force=False, meanwhile=done_first)
    assert (out / "model.bin").read_text() == "first"


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
    # argos puts the package together in $TMPDIR first (issue 61: named, not OUT)
    where, then = ((tempfile.gettempdir(), "; the package is put together there first "
                    "(set TMPDIR)") if engine == "argos" else (target, ""))
    assert done.stderr.strip().splitlines() == [
        f"transformer-lit export: error: cannot write {where}: File too large{then}"]
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
