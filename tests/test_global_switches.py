"""PyTorch's global switches in the chapters (issue 31): a reader copies a cell into their own
program, so a chapter that turns a process-wide setting on or off (thread count, deterministic
algorithms, nn.MultiheadAttention's fast path) puts the old value back later in the same
chapter. A call with a literal argument sets; a later call with a name restores."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWITCHES = {"set_num_threads", "use_deterministic_algorithms", "set_fastpath_enabled"}
CHAPTERS = sorted((ROOT / "nbs").glob("*.ipynb"))


def switch_calls(source: str) -> list[tuple[str, bool]]:
    """(switch, restores) for each top-level call in a cell, in order: calls inside a
    function body belong to that function (its own try/finally), not to the chapter."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell with IPython magics: not Python
        return []
    found = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and child.func.attr in SWITCHES and child.args):
                found.append((child.func.attr, not isinstance(child.args[0], ast.Constant)))
            visit(child)

    visit(tree)
    return found


def chapter_calls(path: Path) -> list[tuple[str, bool]]:
    cells = json.loads(path.read_text())["cells"]
    return [call for c in cells if c["cell_type"] == "code"
            for call in switch_calls("".join(c["source"]))]


def test_the_rule_sees_a_setting_left_on_and_one_put_back():
    left = "import torch\ntorch.set_num_threads(1)\n"
    back = left + "n = torch.get_num_threads()\ntorch.set_num_threads(n)\n"
    inside = "def f():\n    torch.set_num_threads(1)\n"
    assert switch_calls(left) == [("set_num_threads", False)]
    assert switch_calls(back)[-1] == ("set_num_threads", True)
    assert switch_calls(inside) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_global_switch_a_chapter_sets_is_put_back(path):
    left = {}
    for switch, restores in chapter_calls(path):
        if restores:
            left.pop(switch, None)
        else:
            left.setdefault(switch, True)
    assert not left, f"{path.name} sets {sorted(left)} and never puts the old value back"


# --- the library's calls (issue 56): no process-wide side effect ---------------------------------

@pytest.fixture
def watched(tmp_path, monkeypatch):
    """A fresh, empty cache folder, and a record of every change of torch's thread count or
    cuDNN's attention flag made while the test runs."""
    import torch
    from transformer_lit.files import CACHE_ENV
    folder = tmp_path / "cache"
    folder.mkdir()
    monkeypatch.setenv(CACHE_ENV, str(folder))
    changes = []
    for module, name in ((torch, "set_num_threads"), (torch, "set_num_interop_threads"),
                         (torch, "set_flush_denormal")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, n=name, r=real: changes.append(n) or r(*a))
    return folder, changes


def test_translate_and_fit_on_the_fast_routes_change_nothing_outside(watched):
    """translate with chapter 26's decoder (beam search: 4 rows a step, where oneDNN may be
    chosen) and fit with chapter 25's step write nothing into a fresh cache folder, time
    nothing and leave torch's thread count as they found it."""
    import warnings

    import torch
    from transformer_lit.data import EncodedPair, train_tokenizer
    from transformer_lit.fast import fast_train_step
    from transformer_lit.fast_decoding import fast_decoder, two_pass_argmax
    from transformer_lit.inference import translate
    from transformer_lit.model import Transformer, TransformerConfig
    from transformer_lit.recipe import TrainSettings
    from transformer_lit.training import FitOptions, fit, make_optimizer
    folder, changes = watched
    threads = torch.get_num_threads()
    english = ["In the beginning God created the heavens and the earth.", "And God said."]
    tokenizer = train_tokenizer(english + ["Au commencement, Dieu créa les cieux."],
                                vocab_size=70)
    torch.manual_seed(0)
    V = tokenizer.vocab_size
    model = Transformer(TransformerConfig.tiny(V, V, share_embeddings=True)).eval()
    for one_thread in (False, True):  # the fast step asks about oneDNN on one thread only
        if one_thread:
            torch.set_num_threads(1)
            changes.clear()  # the test's own change
        found = torch.get_num_threads()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a random model's outputs are cut
            translate(model, tokenizer, english, beam_size=4, decoder=fast_decoder,
                      pick=two_pass_argmax)
            translate(model, tokenizer, english * 4, decoder=fast_decoder,
                      pick=two_pass_argmax)
        pairs = [EncodedPair(i, [3 + i % 7, 4, 5], [6, 7 + i % 5]) for i in range(16)]
        settings = TrainSettings(max_steps=2, max_tokens=64, eval_every=1000)
        fit(model, make_optimizer(model, settings), (pairs, pairs), settings,
            options=FitOptions(progress=False, log=None, step=fast_train_step))
        model.eval()  # fit leaves it training; decoding asks for evaluation mode
        assert list(folder.iterdir()) == [] and changes == []
        assert torch.get_num_threads() == found
    torch.set_num_threads(threads)
