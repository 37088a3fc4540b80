"""The `transformer-lit` command: in-process through main([...]) and as a subprocess; no network."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from transformer_lit.runs import RUN_MARKER
import torch

import transformer_lit.cli as cli
from transformer_lit.checkpoints import load_checkpoint
from transformer_lit.cli.shared import device_from_args

from synthetic import COMMAND, ENGLISH, assert_one_line_error, env, run, sealed

pytestmark = pytest.mark.usefixtures("one_thread")   # conftest.py


@pytest.fixture
def checkpoint(model_pt) -> Path:
    "conftest.py's tiny model.pt (read only), by the name this file's tests use."
    return model_pt


# --- help -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, words", [(["--help"], ["train", "translate"]),
                                         (["train", "--help"], ["--preset", "--steps", "--minutes", "--out", "--resume"]),
                                         (["translate", "--help"], ["--checkpoint", "SENTENCE", "standard input", "decoding", "--beam",
                                                                        "--no-cache", "--length-penalty"])])
def test_help(argv, words, capsys):
    status, out, _ = run(argv, capsys)
    assert status == 0
    for w in words:
        assert w in out


def test_no_command_is_a_usage_error(capsys):
    status, _, err = run([], capsys)
    assert status == 2 and "COMMAND" in err


# --- translate ------------------------------------------------------------------------------------

def other_errors(err: str) -> list[str]:
    "stderr lines besides the warnings that a translation reached its limit (a tiny model's)."
    cut = re.compile(r"^transformer-lit translate: warning: (SENTENCE|line) \d+: its translation "
                     r"reached the limit of \d+ tokens before the model ended it; it may be "
                     r"incomplete$")
    return [line for line in err.splitlines() if not cut.match(line)]


def test_translate_arguments(checkpoint, capsys):
    status, out, err = run(["translate", "--checkpoint", str(checkpoint), "God said.", "The king said to Daniel."], capsys)
    assert status == 0 and not other_errors(err), err
    assert len(out.splitlines()) == 2


def test_translate_stdin_keeps_blank_lines(checkpoint, capsys, monkeypatch):
    status, out, _ = run(["translate", "--checkpoint", str(checkpoint), "--batch-size", "1"], capsys, "God said.\n\nNaomi said.\n", monkeypatch)
    lines = out.split("\n")
    assert status == 0 and len(lines) == 4 and lines[1] == "" and lines[3] == ""


def test_translate_is_deterministic_and_batch_independent(checkpoint, capsys):
    sentences = ENGLISH[:4]
    _, a, _ = run(["translate", "--checkpoint", str(checkpoint), *sentences], capsys)
    _, b, _ = run(["translate", "--batch-size", "1", "--checkpoint", str(checkpoint), *sentences], capsys)
    assert a == b


def test_translate_missing_checkpoint(tmp_path, capsys):
    assert_one_line_error(*run(["translate", "--checkpoint", str(tmp_path / "nope.pt"), "Hello."], capsys), "no checkpoint", "nope.pt")


def test_translate_not_a_checkpoint(tmp_path, capsys):
    junk = tmp_path / "junk.pt"
    junk.write_text("hello")
    assert_one_line_error(*run(["translate", "--checkpoint", str(junk), "Hello."], capsys), "junk.pt")


def test_translate_incompatible_checkpoints(checkpoint, tmp_path, capsys):
    ckpt = load_checkpoint(checkpoint)
    wrong = {**ckpt, "config": {**ckpt["config"], "d_model": 64}}
    torch.save(sealed(wrong), tmp_path / "wrong.pt")
    assert_one_line_error(*run(["translate", "--checkpoint", str(tmp_path / "wrong.pt"), "Hello."], capsys), "does not fit")
    no_tokenizer = {k: v for k, v in ckpt.items() if k != "tokenizer"}
    torch.save(sealed(no_tokenizer), tmp_path / "bare.pt")
    assert_one_line_error(*run(["translate", "--checkpoint", str(tmp_path / "bare.pt"), "Hello."], capsys), "no tokenizer")
    torch.save({"weights": torch.zeros(3)}, tmp_path / "foreign.pt")
    assert_one_line_error(*run(["translate", "--checkpoint", str(tmp_path / "foreign.pt"), "Hello."], capsys), "foreign.pt")


def test_translate_empty_input(checkpoint, capsys, monkeypatch):
    assert_one_line_error(*run(["translate", "--checkpoint", str(checkpoint), ""], capsys), "empty")
    assert_one_line_error(*run(["translate", "--checkpoint", str(checkpoint), "Hi.", "  "], capsys), "SENTENCE 2")
    assert_one_line_error(*run(["translate", "--checkpoint", str(checkpoint)], capsys, "", monkeypatch), "no input")
    assert_one_line_error(*run(["translate", "--checkpoint", str(checkpoint)], capsys, "\n \n", monkeypatch), "no input")


def test_translate_bad_decoding_options(checkpoint, capsys):
    assert_one_line_error(*run(["translate", "--checkpoint", str(checkpoint), "--batch-size", "0", "Hi."], capsys), "--batch-size")
    assert_one_line_error(*run(["translate", "--checkpoint", str(checkpoint), "--beam", "0", "Hi."], capsys), "--beam")
    assert_one_line_error(*run(["translate", "--checkpoint", str(checkpoint), "--length-penalty", "-1", "Hi."], capsys), "--length-penalty")
    assert_one_line_error(*run(["translate", "--checkpoint", str(checkpoint), "--length-penalty", "nan", "Hi."], capsys), "--length-penalty")


def test_translate_beam_and_no_cache(checkpoint, capsys):
    sentences = ENGLISH[:4]
    outputs = {}
    for options in ([], ["--no-cache"], ["--beam", "3"], ["--beam", "3", "--no-cache"], ["--beam", "1"]):
        status, out, err = run(["translate", "--checkpoint", str(checkpoint), *options, *sentences], capsys)
        assert status == 0 and not other_errors(err) and len(out.splitlines()) == 4, err
        outputs[" ".join(options)] = out
    assert outputs[""] == outputs["--no-cache"] == outputs["--beam 1"]    # the cache changes speed, not output
    assert outputs["--beam 3"] == outputs["--beam 3 --no-cache"]


# --- train (on a small synthetic corpus instead of the download) ----------------------------------

@pytest.fixture
def fake_corpus(cache):
    "conftest.py's cache of synthetic verses in a training, a validation (17) and a test book (8)."
    return cache


def test_train_needs_a_budget(tmp_path, capsys, fake_corpus):
    assert_one_line_error(*run(["train", "--out", str(tmp_path)], capsys), "--steps", "--minutes")
    assert not any(tmp_path.iterdir())


def test_train_bad_setting(tmp_path, capsys, fake_corpus):
    assert_one_line_error(*run(["train", "--out", str(tmp_path), "--steps", "0"], capsys), "--steps")


def test_train_translate_resume(tmp_path, capsys, fake_corpus):
    base = ["train", "--preset", "tiny", "--out", str(tmp_path), "--quiet", "--vocab-size", "90", "--device", "cpu"]
    status, out, err = run(base + ["--steps", "6", "--bleu-sentences", "4"], capsys)
    assert status == 0 and not other_errors(err), err
    assert {p.name for p in tmp_path.iterdir()} == {"checkpoint.pt", "config.json", "model.safetensors",
                                                    "tokenizer.model", "results.json", RUN_MARKER}
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["steps"] == 6 and results["settings"]["max_steps"] == 6 and "device" in results
    assert results["valid_scores"]["sentences"] == 4 and results["config"]["d_model"] == 32 and results["preset"] == "tiny"
    assert "6 steps" in out
    resumable = load_checkpoint(tmp_path / "checkpoint.pt")
    assert resumable["state"]["step"] == 6 and resumable["optimizer"] is not None

    # the run's folder is the model (issue 56): config.json holds its every choice and its record
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["config"]["activation"] == "relu" and config["record"] == results
    status, out, _ = run(["translate", "--checkpoint", str(tmp_path), "God said."], capsys)
    assert status == 0 and len(out.splitlines()) == 1

    resume = ["train", "--out", str(tmp_path), "--quiet", "--device", "cpu", "--resume"]   # preset from the file
    status, out, err = run(resume + ["--steps", "9", "--bleu-sentences", "0"], capsys)
    assert status == 0 and not other_errors(err), err
    assert load_checkpoint(tmp_path / "checkpoint.pt")["state"]["step"] == 9
    assert json.loads((tmp_path / "results.json").read_text())["preset"] == "tiny"
    assert "valid_scores" not in json.loads((tmp_path / "results.json").read_text())


def test_translate_refuses_a_damaged_model_folder_in_one_line(tmp_path, capsys, checkpoint):
    "A model folder whose weights do not match config.json's digest, or whose config.json is not ours."
    from transformer_lit.checkpoints import load_model_folder, save_model
    model, tokenizer, _ = load_model_folder(checkpoint)   # conftest's model.pt of the earlier format
    folder = save_model(tmp_path / "m", model, tokenizer)
    status, out, err = run(["translate", "--checkpoint", str(folder), "--device", "cpu", "God said."], capsys)
    assert status == 0 and len(out.splitlines()) == 1, err
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(data))
    assert_one_line_error(*run(["translate", "--checkpoint", str(folder), "God said."], capsys),
                          "--checkpoint", "model.safetensors is damaged")
    (folder / "config.json").write_text("[]")
    assert_one_line_error(*run(["translate", "--checkpoint", str(folder), "God said."], capsys),
                          "config.json is not a 'transformer-lit model v1' file")
    assert_one_line_error(*run(["translate", "--checkpoint", str(tmp_path), "God said."], capsys),
                          "no model at", "config.json")


def test_resume_without_checkpoint(tmp_path, capsys, fake_corpus):
    assert_one_line_error(*run(["train", "--out", str(tmp_path), "--steps", "3", "--resume"], capsys), "no checkpoint")


def test_resume_a_model_file_is_refused(checkpoint, tmp_path, capsys, fake_corpus):
    from transformer_lit.runs import mark_run_folder
    mark_run_folder(tmp_path)   # a run's folder, whose checkpoint.pt is then a model.pt
    (tmp_path / "checkpoint.pt").write_bytes(checkpoint.read_bytes())   # a model.pt has no optimizer or state
    assert_one_line_error(*run(["train", "--out", str(tmp_path), "--steps", "3", "--resume"], capsys), "cannot resume")


# --- as a real process ----------------------------------------------------------------------------

def test_subprocess_translate_and_errors(checkpoint, tmp_path):
    "The program reads standard input; its errors are those of main (tested in-process above)."
    ok = subprocess.run(COMMAND + ["translate", "--checkpoint", str(checkpoint), "--device", "cpu"],
                        input="God said.\nNaomi said.\n", capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == 2, ok.stderr


def test_installed_console_script():
    script = Path(sys.executable).with_name("transformer-lit")
    assert script.exists(), "the transformer-lit command is missing: run `pip install -e .`"
    done = subprocess.run([str(script), "translate", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "SENTENCE" in done.stdout


# --- threads ----------------------------------------------------------------------------------------

def test_threads_option(checkpoint, capsys):
    before = torch.get_num_threads()
    try:
        status, out, _ = run(["translate", "--checkpoint", str(checkpoint), "--device", "cpu", "--threads", "2", ENGLISH[0]], capsys)
        assert status == 0 and out.count("\n") == 1 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert_one_line_error(*run(["translate", "--checkpoint", str(checkpoint), "--threads", "0", ENGLISH[0]], capsys), "--threads", "0")


def test_threads_default_is_one_on_a_gpu(monkeypatch):
    "No GPU needed: pretend torch sees one, and check what device_from_args does with the threads."
    before = torch.get_num_threads()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    try:
        torch.set_num_threads(2)
        args = cli.parse_args(["translate", "--checkpoint", "m.pt", "--device", "cuda", "Hi."])
        assert device_from_args(args).type == "cuda" and torch.get_num_threads() == 1
        torch.set_num_threads(2)
        args = cli.parse_args(["translate", "--checkpoint", "m.pt", "--device", "cpu", "Hi."])
        assert device_from_args(args).type == "cpu" and torch.get_num_threads() == 2   # a CPU keeps torch's choice
    finally:
        torch.set_num_threads(before)


# --- input and output the user controls -------------------------------------------------------------

def test_translate_names_invalid_utf8_on_stdin(checkpoint):
    done = subprocess.run(COMMAND + ["translate", "--checkpoint", str(checkpoint)], input=b"God said.\n\xff\xfe\n",
                          capture_output=True, timeout=120)
    err = done.stderr.decode()
    assert done.returncode == 2 and done.stdout == b"" and err.count("\n") == 1 and "Traceback" not in err
    assert "line 2 is not valid UTF-8" in err


def test_translate_names_an_argument_that_is_not_utf8(checkpoint, capsys):
    "Python keeps the bytes of an argument that are not UTF-8 as lone surrogates."
    bad = b"God \xff said.".decode("utf-8", "surrogateescape")
    status, out, err = run(["translate", "--checkpoint", str(checkpoint), "Light.", bad], capsys)
    assert_one_line_error(status, out, err, "sentence 2 of the arguments is not valid UTF-8",
                          "character 4")


def test_translate_into_a_closed_pipe_is_quiet(checkpoint):
    lines = "".join(f"{ENGLISH[i % 6]}\n" for i in range(200))
    cmd = " ".join(f"'{c}'" for c in COMMAND) + f" translate --checkpoint '{checkpoint}' --batch-size 4 | head -1"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], input=lines, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.count("\n") == 1 and "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
    assert done.returncode == 0


def test_python_dash_m_runs_main(checkpoint, tmp_path):
    "`python -m transformer_lit.cli` (what torchrun runs) is the same command: cli/__main__.py calls main."
    done = subprocess.run([sys.executable, "-m", "transformer_lit.cli", "translate", "--checkpoint", str(checkpoint),
                           "--device", "cpu", "God said."], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 1, done.stderr   # a warning may come: a random model
    missing = subprocess.run([sys.executable, "-m", "transformer_lit.cli", "export", "ctranslate2", str(tmp_path / "out"),
                              "--checkpoint", ""], capture_output=True, text=True, timeout=120)
    assert_one_line_error(missing.returncode, missing.stdout, missing.stderr, "--checkpoint", "empty")


def test_translate_to_a_full_disk_is_one_line(checkpoint):
    with open("/dev/full", "w") as full:
        done = subprocess.run(COMMAND + ["translate", "--checkpoint", str(checkpoint), "God said."], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    # a random model's warning about its length limit may come first
    errors = [line for line in done.stderr.splitlines() if "warning:" not in line]
    assert done.returncode == 2 and len(errors) == 1 and "cannot write the output" in errors[0]


def test_translate_warns_for_each_cut_line(checkpoint, capsys, monkeypatch):
    long = " ".join(ENGLISH * 6)   # far more tokens than the tiny model's max_len
    status, out, err = run(["translate", "--checkpoint", str(checkpoint), "--batch-size", "2"], capsys,
                           f"God said.\n\n{long}\nNaomi said.\n{long}\n", monkeypatch)
    assert status == 0 and len(out.split("\n")) == 6
    warned = other_errors(err)
    assert len(warned) == 2 and "line 3 has" in warned[0] and "line 5 has" in warned[1], err
    status, _, err = run(["translate", "--checkpoint", str(checkpoint), "Hi.", long], capsys)
    assert status == 0 and "SENTENCE 2 has" in err


def test_translate_batch_by_batch_equals_all_at_once(checkpoint, capsys):
    sentences = ENGLISH * 3
    _, a, _ = run(["translate", "--checkpoint", str(checkpoint), "--beam", "3", *sentences], capsys)
    _, b, _ = run(["translate", "--checkpoint", str(checkpoint), "--beam", "3", "--batch-size", "4", *sentences],
                  capsys)
    assert a == b and len(a.splitlines()) == len(sentences)


def test_translate_beam_larger_than_the_vocabulary(checkpoint, capsys):
    assert_one_line_error(*run(["translate", "--checkpoint", str(checkpoint), "--beam", "100000", "Hi."], capsys),
                          "--beam")


def test_the_subcommands_alone_take_the_plain_routes():
    """Chapters 23 and 24's subcommands on their own train with chapter 13's train_step and
    decode with the plain cached step; main's parser (chapter 32) gives them those of chapters 25 and 26.
    train's hooks travel with its handler, not in the parsed options, and are asked by choose_routes."""
    import argparse

    from transformer_lit.cli.train import TrainRoutes, add_train_command, choose_routes, run_train
    from transformer_lit.cli.translate import add_translate_command
    from transformer_lit.fast import fast_train_step
    from transformer_lit.fast_decoding import fast_decoder, two_pass_argmax
    from transformer_lit.model import Transformer, TransformerConfig
    from transformer_lit.runs import World
    from transformer_lit.training import train_step

    model = Transformer(TransformerConfig(src_vocab_size=40, tgt_vocab_size=40, d_model=16,
                                          n_heads=2, d_ff=32, n_layers=1)).eval()
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command")
    add_train_command(commands)
    add_translate_command(commands)
    train = ["train", "--out", "x", "--steps", "1"]
    job = a_job()
    for parsed, step, decoder, pick in ((parser, train_step, None, None),
                                        (cli.build_parser(), fast_train_step, fast_decoder,
                                         two_pass_argmax)):
        args = parsed.parse_args(train)
        assert args.handler.func is run_train
        assert not {"step_for", "decoder_for", "pick"} & vars(args).keys()
        hooks = args.handler.keywords["hooks"]
        assert choose_routes(hooks, job, World(), model) == TrainRoutes(step, decoder, pick)
        # several processes (DDP) or --compile wrap the model: the plain step, either way
        compiled = replace(job, settings=replace(job.settings, compile=True))
        for wrapped_job, world in ((job, World(size=2)), (compiled, World())):
            assert choose_routes(hooks, wrapped_job, world, model).step is train_step
        translating = parsed.parse_args(["translate", "Hi."])
        assert translating.decoder_for(model) is decoder and translating.pick is pick


def a_job():
    "A TrainJob of the tiny preset, as the options of a fresh run resolve to it."
    from transformer_lit.cli.train import TrainJob
    from transformer_lit.corpus import ENGLISH_VERSIONS, FRENCH_VERSIONS
    from transformer_lit.recipe import preset_settings
    return TrainJob(Path("x"), "tiny", ENGLISH_VERSIONS, FRENCH_VERSIONS, preset_settings("tiny", max_steps=1))


def train_module_functions() -> list[ast.FunctionDef]:
    "Every function (nested ones too) of transformer_lit/cli/train.py."
    import transformer_lit.cli.train as train
    tree = ast.parse(Path(train.__file__).read_text())
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_the_train_command_is_built_of_small_functions():
    "cli/train.py (issue 47): no function over 50 lines or 6 parameters, and none returns a bare tuple."
    functions = train_module_functions()
    assert len(functions) > 10
    lines = {f.name: f.end_lineno - f.lineno + 1 for f in functions}
    assert max(lines.values()) <= 50, {name: n for name, n in lines.items() if n > 50}
    parameters = {f.name: len(f.args.posonlyargs + f.args.args + f.args.kwonlyargs) for f in functions}
    assert max(parameters.values()) <= 6, {name: n for name, n in parameters.items() if n > 6}
    tuples = [f.name for f in functions if f.returns is not None and ast.unparse(f.returns).startswith("tuple")]
    assert not tuples, tuples


def test_the_train_routes_are_chosen_once():
    """The job, the hooks and the routes are frozen, and choose_routes is the one function of
    cli/train.py that asks a hook (step_for, decoder_for) or names the plain step (train_step)."""
    from dataclasses import FrozenInstanceError, fields

    from transformer_lit.cli.train import RouteHooks, TrainRoutes
    for frozen in (a_job(), RouteHooks(), TrainRoutes(None, None, None)):
        name = fields(frozen)[0].name
        with pytest.raises(FrozenInstanceError):
            setattr(frozen, name, getattr(frozen, name))
    askers = {f.name for f in train_module_functions()
              if any(isinstance(n, ast.Attribute) and n.attr in ("step_for", "decoder_for")
                     or isinstance(n, ast.Name) and n.id == "train_step" for n in ast.walk(f))}
    assert askers == {"choose_routes"}, askers


def test_the_command_line_takes_the_fast_routes(tmp_path, capsys, fake_corpus, monkeypatch):
    "train's every step goes through chapter 25's fast loss, translate through chapter 26's fast_step."
    import transformer_lit.fast as fast
    import transformer_lit.fast_decoding as fast_decoding
    calls = {"fast_loss": 0, "fast_step": 0}
    homes = {"fast_loss": fast, "fast_step": fast_decoding}

    def counting(name):
        real = getattr(homes[name], name)

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return wrapper

    for name in calls:
        monkeypatch.setattr(homes[name], name, counting(name))
    picks = []   # translate's choice of token: chapter 26's two-pass argmax, bound by build_parser
    real_pick = cli.two_pass_argmax
    monkeypatch.setattr(cli, "two_pass_argmax", lambda logits: picks.append(1) or real_pick(logits))
    out = tmp_path / "run"
    status, _, err = run(["train", "--preset", "tiny", "--vocab-size", "90", "--steps", "3",
                          "--device", "cpu", "--threads", "1", "--quiet",
                          "--bleu-sentences", "0", "--out", str(out)], capsys)
    assert status == 0, err
    assert calls["fast_loss"] == 3 and calls["fast_step"] == 0
    status, text, err = run(["translate", "--checkpoint", str(out),
                             "God said."], capsys)
    assert status == 0 and text.count("\n") == 1, err
    assert calls["fast_step"] >= 1
    assert len(picks) == calls["fast_step"]   # one choice of token per step


def test_plain_takes_the_plain_routes(tmp_path, capsys, fake_corpus, monkeypatch):
    """train --plain and translate --plain (issue 56): chapter 13's train_step, chapter 16's
    plain cached step and the argmax; nothing of chapters 25 and 26 runs."""
    import transformer_lit.fast as fast
    import transformer_lit.fast_decoding as fast_decoding
    from transformer_lit.cli.train import RouteHooks
    calls = []
    for module, name in ((fast, "fast_loss"), (fast_decoding, "fast_step"),
                         (cli, "two_pass_argmax")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, n=name, r=real, **k: calls.append(n) or r(*a, **k))
    args = cli.parse_args(["train", "--plain", "--out", "x", "--steps", "1"])
    assert args.handler.keywords["hooks"] == RouteHooks()
    args = cli.parse_args(["translate", "--plain", "Hi."])
    assert args.decoder_for(None) is None and args.pick is None
    out = tmp_path / "run"
    status, _, err = run(["train", "--plain", "--preset", "tiny", "--vocab-size", "90", "--steps", "3",
                          "--device", "cpu", "--quiet", "--bleu-sentences", "2", "--out", str(out)], capsys)
    assert status == 0, err
    for options in ([], ["--beam", "4"]):
        status, text, err = run(["translate", "--plain", *options, "--checkpoint", str(out),
                                 "God said.", "The king said."], capsys)
        assert status == 0 and text.count("\n") == 2, err
    assert calls == []
    status, _, err = run(["translate", "--checkpoint", str(out), "God said."], capsys)
    assert status == 0 and "fast_step" in calls, err   # without --plain: the fast routes


# --- names that would command the terminal ---------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["translate", "--checkpoint", "m\x1b]0;owned\x07.pt", "God said."],
    ["export", "ctranslate2", "out\x1b[2J", "--checkpoint", "m\x1b]0;owned\x07.pt"],
    ["train", "--out", "out\x1b[2J", "--resume"],
], ids=["translate", "export", "train"])
def test_a_file_name_with_terminal_escapes_is_shown_escaped(argv, tmp_path, monkeypatch, capsys):
    """Issue 61: `$'m\\e]0;owned\\a.pt'` (sets the terminal's title) and `$'out\\e[2J'` (clears
    the screen) were echoed raw in the one-line errors; they are escaped as translations are."""
    monkeypatch.chdir(tmp_path)
    status, out, err = run(argv, capsys)
    assert status == 2 and out == "" and len(err.splitlines()) == 1, err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b" in err, err


# --- a checkpoint the user may not read -------------------------------------------------------------

FORBID = """
import sys
def forbid(event, args):   # a file system that refuses to open the named file (we run as root)
    if event == "open" and str(args[0]).endswith({name!r}):
        raise PermissionError(13, "Permission denied", str(args[0]))
sys.addaudithook(forbid)
from transformer_lit.cli import main
sys.exit(main({argv!r}))
"""


@pytest.mark.parametrize("forbidden", ["model.pt", "model.safetensors", "config.json"])
def test_a_checkpoint_the_user_may_not_read_is_one_line_naming_it(forbidden, model_pt, tiny_run):
    """Issue 61: an unreadable model.pt said "not a checkpoint that torch.load can read
    (PermissionError)", as if the file were damaged; the system's words and the file now."""
    path = model_pt if forbidden == "model.pt" else tiny_run
    argv = ["translate", "--device", "cpu", "--checkpoint", str(path), "God said."]
    code = FORBID.format(name=forbidden, argv=argv)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=env())
    assert_one_line_error(r.returncode, r.stdout, r.stderr, "Permission denied", forbidden)
    assert "torch.load" not in r.stderr and "damaged" not in r.stderr, r.stderr


def test_the_wrote_lines_show_a_folder_name_escaped(model_pt, tmp_path, monkeypatch, capsys):
    """Issue 61: `export` and `train` echoed --out's terminal escapes raw in their "wrote ..."
    lines too, not only in errors."""
    pytest.importorskip("ctranslate2")
    monkeypatch.chdir(tmp_path)
    status, out, err = run(["export", "ctranslate2", "out\x1b[2J", "--checkpoint", str(model_pt)],
                           capsys)
    assert status == 0 and out.startswith("wrote out\\x1b[2J"), (out, err)
    assert "\x1b" not in out
