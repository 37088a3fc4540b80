"""Page 42's module, failures.py: the failure counters, which chapter 20 once exported, now in
the Reference part. They stand on the Reference utilities alone, and chapter 20's module
passes them on under their old import path."""
from __future__ import annotations

import ast
from pathlib import Path

from transformer_lit import analysis, failures

ROOT = Path(__file__).resolve().parents[1]


def test_the_counters_keep_their_old_import_path():
    assert failures.__all__
    for name in failures.__all__:
        assert getattr(analysis, name) is getattr(failures, name), name


def test_failures_imports_only_the_reference_utilities():
    tree = ast.parse((ROOT / "transformer_lit" / "failures.py").read_text())
    local = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level}
    absolute = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                and not n.level and n.module.startswith("transformer_lit")}
    assert local | {m.removeprefix("transformer_lit.") for m in absolute} <= {
        "validate", "files", "machine"}


def test_the_counters_on_a_made_up_translation():
    ref = "Nous l'aimons, parce qu'il nous a aimés le premier."
    hyp = "Nous aimons Him, parce que, parce que il nous a aimés."
    src = "We love Him, because he first loved us."
    french = failures.vocabulary([ref])
    english = failures.vocabulary(["we love him because he first loved us"],
                                  lower_case_only=True)
    out = failures.failure_modes([hyp], [src], [ref], french, english, {})
    assert out["untranslated"] == 1.0 and out["sentences"] == 1
    assert failures.repeated_ngrams(hyp, [ref]) == [(",", "parce"), ("parce", "que")]
    assert out["loop"] == 1.0
