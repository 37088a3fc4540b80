"""The committed benchmark results that the book reads, against the code: a preset, a budget
or a goal that drifted away from the settings that were measured would make the book describe
a run that never happened. Each test here fails on a change of the code; the shape of the files
themselves is checked in test_results_files.py.
"""
import json
import math
import sys
from pathlib import Path

import pytest
import torch

from transformer_lit.recipe import (
    BOOK_CPU_STEPS,
    BOOK_GPU_STEPS,
    book_run,
    preset_config,
    preset_settings,
)

RESULTS = Path(__file__).resolve().parents[1] / "transformer_lit" / "results"


def load(name: str) -> dict:
    path = RESULTS / name
    if not path.exists():
        pytest.skip(f"{name} has not been measured")
    return json.loads(path.read_text())


def test_gpu_translation_run_is_the_base_preset():
    run = load("translation_cuda.json")
    assert run["device_type"] == "cuda" and run["device"] == run["run"]["device"].split(" (CUDA")[0]
    settings, config = run["run"]["settings"], run["run"]["config"]
    preset = preset_settings("base", max_steps=1)
    for key in ("max_tokens", "warmup", "lr_factor", "label_smoothing", "eps", "clip_norm", "eval_every",
                "average_every", "average_last"):
        assert settings[key] == getattr(preset, key), key
    assert tuple(settings["betas"]) == preset.betas
    expected = preset_config("base", config["src_vocab_size"])
    assert all(config[k] == getattr(expected, k) for k in config), "the base preset's model changed since the run"


def test_book_run_gpu_settings_are_the_grids_choice():
    """book_run's GPU run is the configuration of reader_budget_cuda.json chosen on the validation
    books: its preset and settings, and BOOK_GPU_STEPS where its validation BLEU was highest."""
    grid = load("reader_budget_cuda.json")
    chosen = grid["small-all"]
    preset, settings = book_run(torch.device("cuda"))
    assert chosen["settings"] == {"preset": preset, "max_tokens": settings.max_tokens,
                                  "warmup": settings.warmup}
    assert chosen["vocab"] == 8000 and chosen["max_words"] == 0   # chapter 19's GPU vocabulary, every verse
    points = chosen["curve"][1:]
    assert max(points, key=lambda p: p["bleu"])["steps"] == settings.max_steps == BOOK_GPU_STEPS
    others = [run["curve"][-1] for name, run in grid.items() if name not in ("how", "small-all")]
    assert all(p.get("bleu", 0) < max(q["bleu"] for q in points) for p in others)


def test_book_run_cpu_budget_is_the_measured_choice():
    """book_run's CPU run is the candidate of the CPU budget files that chapter 19 chose on the
    validation books: the cpu preset's settings, measured at BOOK_CPU_STEPS on every WEB -> LSG
    verse, above copying the source on the short verses and on all of them, where training on
    the short verses alone falls below it."""
    short, whole = load("reader_budget_cpu.json"), load("reader_budget_cpu_every_valid_verse.json")
    preset, settings = book_run(torch.device("cpu"))
    assert preset == "cpu" and settings.max_steps == BOOK_CPU_STEPS
    for runs, name in ((short, "B-weblsg-every-verse"), (whole, "B-every-verse")):
        chosen = runs[name]
        assert chosen["settings"] == {"preset": "cpu"} and chosen["vocab"] == 4000
        assert chosen["train_pairs"] == 30225   # every WEB -> LSG training verse
        copy, *points = chosen["curve"]
        at_budget = {p["steps"]: p["chrf"] for p in points}[BOOK_CPU_STEPS]
        assert copy["what"] == "copy the source" and at_budget > copy["chrf"]
    short_only = whole["A-short-verses-only"]["curve"]
    assert short_only[-1]["steps"] == BOOK_CPU_STEPS and short_only[-1]["chrf"] < short_only[0]["chrf"]


def bench_decode_goal() -> dict:
    "benchmarks/bench_decode.py's GOAL: the cached loop's speed-up it claims, and where."
    folder = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, folder)   # the benchmarks import each other as top-level modules
    try:
        import bench_decode
    finally:
        sys.path.remove(folder)
    return bench_decode.GOAL


def test_cpu_decode_benchmark_meets_its_goal():
    "The committed CPU run was measured against the benchmark's present goal, and meets it."
    run, goal = load("decode_cpu.json"), bench_decode_goal()
    assert {k: v for k, v in run["goal"].items() if k != "met"} == goal
    row = next(r for r in run["results"]
               if (r["batch"], r["new_tokens"]) == (goal["batch"], goal["new_tokens"]))
    assert row["speedup"] >= goal["min_speedup"] and run["goal"]["met"] is True


@pytest.mark.parametrize("name", ["train_real_cpu.json"] + sorted(
    p.name for p in RESULTS.glob("train_real_cpu_*.json")))
def test_real_batch_training_benchmark_is_consistent(name):
    run = load(name)
    assert {r["preset"] for r in run["presets"]} == {"cpu", "small"}
    for r in run["presets"]:
        assert r["max_tokens"] == preset_settings(r["preset"], max_steps=1).max_tokens
        rate = r["target_tokens_per_second"]
        assert math.isclose(r["speedup_onednn"], rate["onednn"] / rate["f_linear"], rel_tol=1e-9)
        assert r["target_tokens"] > 0 and r["batches"] > 0
        if "plain" in rate:   # runs since the plain step was timed beside the fast one
            assert r["fast_products"] == ("onednn" if run["chosen_by_use_onednn_products"] else "f_linear")
            fast = rate[r["fast_products"]]
            assert math.isclose(r["speedup_fast"], fast / rate["plain"], rel_tol=1e-9)
