"""The shape of the committed results files the chapters print and plot (the book is built on
a CPU and reads them instead of measuring again): every field there, its numbers consistent
with each other (a ratio with its two times, a floor with its bytes and bandwidth), one file per
host. These read data, not code: they catch a file edited by hand or written by an older
benchmark, and no change of the package can make them fail (test_results.py holds the files
against the code).
"""
import math

import pytest

from test_results import RESULTS, load


def test_gpu_translation_run_numbers_are_complete():
    run = load("translation_cuda.json")
    steps = [s for s, _ in run["valid_log"]]
    assert steps == sorted(steps) and steps[-1] == run["run"]["steps"]
    assert all(math.isfinite(v) for _, v in run["valid_log"])
    best_step = min(run["valid_log"], key=lambda sv: sv[1])[0]
    assert best_step < steps[-1]   # validation stopped improving before the end (chapter 19)
    assert run["test_sentences"] == 547   # all the test pairs (Ruth, Daniel, 1 John)
    names = {"copy the source"} | {f"{w}, {s}" for w in ("averaged", "last")
                                   for s in ("greedy, no cache", "greedy, cached", "beam search (4), cached")}
    assert set(run["bleu"]) == names and all(0 <= v <= 100 for v in run["bleu"].values())
    assert set(run["decode_seconds"]) == names - {"copy the source"}
    assert len(run["samples"]) >= 5 and all({"english", "french", "greedy", "beam"} <= s.keys() for s in run["samples"])


def test_gpu_decode_benchmark_is_complete():
    run = load("decode_cuda.json")
    assert run["device_type"] == "cuda" and run["dtype"] == "bfloat16"
    grid = {(r["batch"], r["new_tokens"]) for r in run["results"]}
    assert grid == {(b, n) for b in (1, 32) for n in (32, 64, 128, 256, 512)}
    assert all(r["speedup"] is not None and r["speedup"] > 0 for r in run["results"])
    lat = run["cuda_batch1_latency"]
    assert set(lat["per_length"]) == {"32", "64", "128", "256", "512"}
    for r in lat["per_length"].values():
        assert r["graph_tokens_equal_eager"]
        assert 0 < r["floor_ms_per_token"] < r["graph_ms_per_token"] < r["eager_ms_per_token"]
        # the floor is bytes over bandwidth: recompute it from its parts
        assert math.isclose(r["floor_ms_per_token"], 1e3 * r["bytes_per_step"] / (lat["bandwidth_gb_per_s"] * 1e9),
                            rel_tol=1e-6)


@pytest.mark.parametrize(
    "name", ["peers_cpu.json"] + sorted(p.name for p in RESULTS.glob("peers_cpu_*.json")))
def test_peers_benchmark_records_what_ran_and_where(name):
    """Every case of each peers run (the latest, and those kept from other hosts) says which
    products ours used and the host's processor."""
    run = load(name)
    assert {"vendor", "family", "model", "capability", "L2", "L3"} <= set(run["cpu"])
    for case in run["cases"]:
        assert isinstance(case["ours_onednn"], bool)
        if case["kind"] != "train":   # the output projection's own measurement
            assert isinstance(case["ours_onednn_logits"], bool)
        ratio = case["median_seconds"]["ours"] / case["median_seconds"]["marian"]
        assert math.isclose(ratio, case["ratio_ours_to_marian"], rel_tol=1e-9)
    trains = [c for c in run["cases"] if c["kind"] == "train"]
    assert {c["padded"] for c in trains} == {True, False}
    # OneDNNLinear's products are what the profile of ours shows when they ran
    for case in trains:
        top = [name for name, _, _ in case["profile"]["ours"]["top"]]
        assert ("mkldnn::_linear_pointwise" in top) == case["ours_onednn"]


def test_real_batch_runs_kept_beside_the_latest_come_from_other_hosts():
    names = ["train_real_cpu.json"] + sorted(p.name for p in RESULTS.glob("train_real_cpu_*.json"))
    hosts = [tuple(load(n)["cpu"][k] for k in ("vendor", "family", "model")) for n in names]
    assert len(set(hosts)) == len(hosts), dict(zip(names, hosts))


def test_peers_runs_kept_beside_the_latest_come_from_other_hosts():
    "A file kept as peers_cpu_<host>.json is another processor's run, not an older one's."
    names = ["peers_cpu.json"] + sorted(p.name for p in RESULTS.glob("peers_cpu_*.json"))
    hosts = [tuple(load(n)["cpu"][k] for k in ("vendor", "family", "model")) for n in names]
    assert len(set(hosts)) == len(hosts), dict(zip(names, hosts))
