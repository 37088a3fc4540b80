"""Errors of one kind for one cause (issue 47, item 3): a caller's mistake is an
ArgumentError wherever the package raises for an argument; what is wrong outside the
arguments (a file, the cache, the corpus, a run folder, the processes of a run) has a
class of its own; every class is listed, with what raises it, in the package's
docstring (`help(transformer_lit)`)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

import transformer_lit
from transformer_lit.validate import ArgumentError

PACKAGE = Path(transformer_lit.__file__).parent
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "_modidx.py")
# a bare ValueError is left only where it is not about an argument: files.read_small_file
# refuses a file that is too large (its callers catch OSError and ValueError alike; a file
# that is not regular is open_regular's OSError); validate's own check raises TypeError to
# reach its except
BARE_ALLOWED = {"files.py": 1, "validate.py": 1}


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")


def defined_errors() -> list[str]:
    "module.Class of every exception or warning class the package defines."
    found = []
    for path in MODULES:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(
                re.search(r"Error|Exception|Warning|Interrupt", ast.unparse(b))
                for b in node.bases
            ):
                found.append(f"{module_of(path)}.{node.name}")
    return found


def test_every_error_class_is_listed_with_what_raises_it():
    errors = defined_errors()
    assert "validate.ArgumentError" in errors and len(errors) >= 10
    section = transformer_lit.__doc__.split("Errors and warnings")[1].split("To translate")[0]
    listed = re.findall(r"^  ([a-z_.]+\.[A-Z]\w+) +(\S.*)$", section, re.M)
    assert sorted(name for name, _ in listed) == sorted(errors)
    assert all(len(said.split()) >= 4 for _, said in listed), listed


def test_no_bare_value_or_type_error_for_an_argument():
    found = {}
    for path in MODULES:
        n = len(re.findall(r"raise (ValueError|TypeError)\b", path.read_text()))
        if n:
            found[path.relative_to(PACKAGE).as_posix()] = n
    assert found == BARE_ALLOWED


def _model():
    from transformer_lit.model import Transformer, TransformerConfig
    return Transformer(TransformerConfig.tiny(20, 20))


def _mistakes():
    "(what, call) for a caller's mistake in each module that used to raise a bare error."
    from transformer_lit import checkpoints, corpus, export, training
    from transformer_lit.recipe import TrainSettings
    model = _model()
    settings = TrainSettings(max_steps=1)
    return [
        ("check_quantization", lambda: export.check_quantization("int4")),
        ("average_state_dicts", lambda: checkpoints.average_state_dicts([])),
        ("save_checkpoint meta", lambda: checkpoints.save_checkpoint(
            "x.pt", model, format="mine")),
        ("check_plain_data", lambda: checkpoints.check_plain_data({"v": object()})),
        ("extract_verses versions", lambda: corpus.extract_verses(Path("no.db"), ("zz",))),
        ("fit without pairs", lambda: training.fit(
            model, training.make_optimizer(model, settings), ([], []), settings)),
        ("memory of another batch", lambda: model.decode(
            torch.ones(1, 3, dtype=torch.long), torch.zeros(1, 4, model.config.d_model),
            torch.ones(1, 5, dtype=torch.long))),
    ]


@pytest.mark.parametrize("index", range(7))
def test_a_callers_mistake_is_an_argument_error(index):
    what, call = _mistakes()[index]
    with pytest.raises(ArgumentError):
        call()


def test_a_damaged_checkpoint_is_a_checkpoint_error(tmp_path):
    from transformer_lit.checkpoints import CheckpointError, load_checkpoint
    (tmp_path / "x.pt").write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match="x.pt"):
        load_checkpoint(tmp_path / "x.pt")
    assert issubclass(CheckpointError, ValueError)   # callers catching ValueError still do
