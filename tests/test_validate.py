"""transformer_lit.validate: one rule per kind of value, one error class, one line naming the
argument; and the package writes no argument check by hand beside it."""
from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from transformer_lit.validate import (
    ArgumentError,
    check_bool,
    check_choice,
    check_path,
    check_int,
    check_number,
    check_positive_int,
    check_probability,
    check_texts,
    check_token_ids,
)

PACKAGE = Path(__file__).resolve().parents[1] / "transformer_lit"


def test_a_wrong_value_is_a_value_error_and_only_a_wrong_type_a_type_error():
    """Issue 56: ArgumentError was a ValueError and a TypeError at once, so `except
    TypeError` caught a range error too; a wrong type is ArgumentTypeError, a kind of
    ArgumentError (so `except ArgumentError` and `except ValueError` catch both)."""
    from transformer_lit import validate
    wrong_values = [lambda: check_int("n", 0, low=1), lambda: check_number("p", 2.0, 0, 1),
                    lambda: check_choice("c", "x", ["a"]), lambda: check_number("p", math.nan),
                    lambda: check_token_ids("t", torch.tensor([[9]]), 5),
                    lambda: check_texts("t", ["\ud800"])]
    wrong_types = [lambda: check_int("n", "1"), lambda: check_int("n", True),
                   lambda: check_number("p", "0.5"), lambda: check_bool("b", 1),
                   lambda: check_choice("c", 3, ["a"]), lambda: check_path("p", 3),
                   lambda: check_texts("t", "one"), lambda: check_texts("t", [3]),
                   lambda: check_token_ids("t", [[1]], 5),
                   lambda: check_token_ids("t", torch.zeros(1, 2), 5)]
    for call in wrong_values:
        with pytest.raises(ArgumentError) as caught:
            call()
        assert isinstance(caught.value, ValueError) and not isinstance(caught.value, TypeError)
    for call in wrong_types:
        with pytest.raises(validate.ArgumentTypeError) as caught:
            call()
        assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize("value", [1, 7, 10**30, np.int64(5), torch.tensor(4)])
def test_whole_numbers_are_accepted_and_returned_as_int(value):
    out = check_positive_int("n", value)
    assert type(out) is int and out == int(value)


@pytest.mark.parametrize("value", [0, -1, True, False, 1.0, "3", None, [1],
                                   torch.tensor([1, 2]), torch.tensor(1.0)])
def test_anything_else_is_refused_naming_the_argument(value):
    with pytest.raises(ArgumentError, match=r"^n must be a positive int, got "):
        check_positive_int("n", value)


@pytest.mark.parametrize("low,high,words", [
    (None, None, "an int"), (0, None, "an int >= 0"), (None, 5, "an int <= 5"),
    (2, 9, r"an int in \[2, 9\]"),
])
def test_int_ranges_are_said_in_words(low, high, words):
    with pytest.raises(ArgumentError, match=f"^k must be {words}, got 'x'$"):
        check_int("k", "x", low, high)


@pytest.mark.parametrize("value,low,high", [(-1, 0, None), (6, None, 5), (1, 2, 9),
                                            (10, 2, 9)])
def test_ints_out_of_range_are_refused(value, low, high):
    with pytest.raises(ArgumentError, match=f"got {value}$"):
        check_int("k", value, low, high)
    assert check_int("k", low if low is not None else high, low, high) in (low, high)


def test_a_huge_value_is_shortened_in_the_message():
    with pytest.raises(ArgumentError) as caught:
        check_positive_int("n", "x" * 10**6)
    assert len(str(caught.value)) < 120


@pytest.mark.parametrize("value", [0, 0.0, 0.5, 0.999])
def test_probabilities(value):
    assert check_probability("p", value) == float(value)


@pytest.mark.parametrize("value", [1, 1.0, -1e-9, math.nan, math.inf, True, "0.1", None])
def test_not_probabilities(value):
    with pytest.raises(ArgumentError, match=r"^p must be a number in \[0.0, 1.0\)"):
        check_probability("p", value)


def test_open_and_closed_ends():
    assert check_number("x", 0.0, 0.0, 1.0) == 0.0
    with pytest.raises(ArgumentError, match=r"\(0.0, 1.0\]"):
        check_number("x", 0.0, 0.0, 1.0, low_open=True)
    for bad in (0.0, math.inf, -1):
        with pytest.raises(ArgumentError, match="^x must be a finite number > 0, got"):
            check_number("x", bad, 0.0, math.inf, low_open=True, high_open=True)
    with pytest.raises(ArgumentError, match="^x must be a finite number, got nan"):
        check_number("x", math.nan, high_open=True)


def test_flags_and_choices():
    assert check_bool("f", True) is True
    for bad in (1, 0, "True", None):
        with pytest.raises(ArgumentError, match="^f must be True or False"):
            check_bool("f", bad)
    assert check_choice("c", "relu", ("relu", "gelu")) == "relu"
    with pytest.raises(ArgumentError, match="^c must be one of gelu, relu, got 'tanh'"):
        check_choice("c", "tanh", ("relu", "gelu"))


def test_token_ids():
    ok = torch.tensor([[1, 2], [3, 0]])
    assert check_token_ids("src", ok, 4, max_len=2) is ok
    assert check_token_ids("src", torch.zeros(0, 3, dtype=torch.long), 4) is not None
    for bad, words in [
        (torch.tensor([[1, 4]]), r"ids in \[0, 4\), got 1..4"),
        (torch.tensor([[-1, 0]]), r"got -1..0"),
        (torch.ones(1, 2), "integer token ids"),
        (torch.ones(1, 2, dtype=torch.bool), "integer token ids"),
        (torch.tensor([1, 2]), r"shape \(B, L\)"),
        (torch.zeros(1, 3, dtype=torch.long), "3 positions, more than max_len = 2"),
        ([[1, 2]], "a tensor of integer token ids"),
    ]:
        with pytest.raises(ArgumentError, match=f"^src .*{words}"):
            check_token_ids("src", bad, 4, max_len=2)


def test_texts_are_returned_as_a_list():
    assert check_texts("lines", ("a", "", "é")) == ["a", "", "é"]
    assert check_texts("lines", iter(["a"])) == ["a"]


@pytest.mark.parametrize("bad, words", [("a line", "lines must be a list of str, not a str"),
                                        (b"bytes", "lines must be a list of str, not a bytes"), (5, "lines must be a list of str, got 5"),
                                        (["a", 5], "lines[1] must be a str, got 5"),
                                        ([None], "lines[0] must be a str, got None"),
                                        (["a", "b\udcff"], "lines[1] is not text: a lone surrogate at character 1")])
def test_what_is_not_a_list_of_texts_is_refused_naming_the_item(bad, words):
    with pytest.raises(ArgumentError, match="^" + re.escape(words)):
        check_texts("lines", bad)


def _hand_written_int_checks(tree: ast.AST) -> list[int]:
    "Lines of `isinstance(v, bool) or not isinstance(v, int)`: the rule check_int owns."
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            text = ast.unparse(node)
            if "isinstance(" in text and ", bool)" in text and "not isinstance(" in text:
                found.append(node.lineno)
    return found


@pytest.mark.parametrize("path", sorted(p for p in PACKAGE.rglob("*.py")
                                        if p.name != "validate.py"), ids=lambda p: p.stem)
def test_no_module_checks_ints_by_hand(path):
    lines = _hand_written_int_checks(ast.parse(path.read_text()))
    assert not lines, f"{path.name}: hand-written int checks at lines {lines}: use validate"


def test_check_path_takes_str_and_paths_and_names_anything_else(tmp_path):
    assert check_path("out", str(tmp_path)) == tmp_path == check_path("out", tmp_path)
    for bad in (5, None, b"bytes", ["a"]):
        with pytest.raises(ArgumentError, match="^out must be a path \\(str or Path\\), got "):
            check_path("out", bad)


# ------------------------------------------------------------------ decoding's arguments
def test_decoding_checks_name_the_field_and_read_only_attributes():
    "check_decode_args, check_beam_args, check_evaluating, replace_fields (chapter 16's)."
    import dataclasses
    from types import SimpleNamespace

    from transformer_lit.validate import (MAX_LENGTH_PENALTY, check_beam_args, check_decode_args,
                                          check_evaluating, replace_fields)

    config = SimpleNamespace(max_new_tokens=10, bos_id=1, eos_id=2, beam_size=1, length_penalty=0.6)
    check_decode_args(config, rows=3, vocab_size=12, max_len=32)
    bad = {"beam_size": 13, "max_new_tokens": 40, "eos_id": 12}
    for field, value in bad.items():
        with pytest.raises(ArgumentError, match=field):
            check_decode_args(SimpleNamespace(**{**vars(config), field: value}), 3, 12, 32)
    with pytest.raises(ArgumentError, match=r"\(3,\) counts"):
        check_decode_args(SimpleNamespace(**{**vars(config), "max_new_tokens": torch.tensor([3, 4])}),
                          3, 12, 32)
    with pytest.raises(ArgumentError, match="eos_id must be a token id"):
        check_decode_args(SimpleNamespace(**{**vars(config), "eos_id": None, "beam_size": 2}), 3, 12, 32)
    for alpha in (float("nan"), float("inf"), -0.5, MAX_LENGTH_PENALTY + 1):
        with pytest.raises(ArgumentError, match="length_penalty"):
            check_beam_args(12, 4, alpha)
    check_evaluating(SimpleNamespace(training=False))
    with pytest.raises(ArgumentError, match=r"model\.eval\(\)"):
        check_evaluating(SimpleNamespace(training=True))

    @dataclasses.dataclass(frozen=True)
    class Config:
        beam_size: int = 1

    assert replace_fields(Config(), {"beam_size": 4}, Config) == Config(4)
    with pytest.raises(ArgumentError, match="beams is not a Config field"):
        replace_fields(Config(), {"beams": 4}, Config)
    with pytest.raises(TypeError, match="config must be a Config"):
        replace_fields(config, {}, Config)
