"""Chapter 35's machine module (issue 56): the rule that says where oneDNN's products are
faster agrees with every host the package's records were measured on, and attention_policy,
entered and left by two threads in any order, leaves cuDNN's attention flag as it found it."""
from __future__ import annotations

import json
import threading
from importlib import resources

import pytest
import torch

from transformer_lit import machine
from transformer_lit.machine import attention_policy, cpu_details, onednn_faster

RESULTS = resources.files("transformer_lit") / "results"


def recorded(name: str) -> dict[str, str]:
    "The processor a results file was measured on (cpu_details' fields)."
    return json.loads((RESULTS / name).read_text())["cpu"]


def test_the_rule_agrees_with_the_records():
    """Where a record measured oneDNN faster, the rule says oneDNN; where it measured it no
    faster, the rule says no (peers_*: decoding; train_real_*: training)."""
    for name in ("peers_cpu.json", "peers_cpu_amd_epyc.json", "peers_cpu_amd_epyc_zen4.json"):
        run = json.loads((RESULTS / name).read_text())
        cpu = run["cpu"]
        for case in run["cases"]:
            if case["kind"] == "train":
                continue  # ours_onednn was measured by training's products
            if case["batch"] * case["beam"] >= 4:  # where the decoder asks at all
                assert onednn_faster("decode", cpu) is case["ours_onednn"], (name, case)
                assert onednn_faster("logits", cpu) is case["ours_onednn_logits"], (name, case)
        train = [c["ours_onednn"] for c in run["cases"] if c["kind"] == "train"]
        assert {onednn_faster("train", cpu)} == set(train), name
    for name in ("train_real_cpu.json", "train_real_cpu_amd_epyc.json"):
        run = json.loads((RESULTS / name).read_text())
        assert onednn_faster("train", run["cpu"]) is run["chosen_by_use_onednn_products"]


def test_the_rule_reads_vendor_family_and_capability():
    zen5 = {"vendor": "AuthenticAMD", "family": "26", "capability": "AVX512"}
    assert all(onednn_faster(kind, zen5) for kind in ("train", "decode", "logits"))
    intel = {**zen5, "vendor": "GenuineIntel", "family": "6"}
    assert not any(onednn_faster(kind, intel) for kind in ("train", "decode", "logits"))
    for missing in ("vendor", "family", "capability"):  # not Linux: no vendor or family
        partial = {k: v for k, v in zen5.items() if k != missing}
        assert not onednn_faster("logits", partial)
    assert not onednn_faster("logits", {**zen5, "family": "twenty"})
    with pytest.raises(KeyError):  # the fast modules check the kind they are given
        onednn_faster("other")


def test_the_rule_reads_this_processor_by_default(monkeypatch):
    here = cpu_details()
    assert onednn_faster("train") is onednn_faster("train", here)
    zen4 = recorded("peers_cpu_amd_epyc_zen4.json")
    monkeypatch.setattr(machine, "cpu_details", lambda: zen4)
    assert onednn_faster("decode") and not onednn_faster("train")


def test_the_rule_says_no_on_an_intel_processor():
    "This project's usual machine (an Intel Xeon with AVX-512): MKL's products stay."
    here = cpu_details()
    if here.get("vendor") != "GenuineIntel":
        pytest.skip(f"not an Intel processor: {here.get('vendor')}")
    assert not any(onednn_faster(kind) for kind in ("train", "decode", "logits"))


@pytest.fixture
def flag(monkeypatch):
    "cuDNN's attention flag, as a plain value the test can read (no GPU needed)."
    state = {"on": True, "sets": 0}

    def enable(on: bool) -> None:
        state["on"], state["sets"] = on, state["sets"] + 1

    monkeypatch.setattr(torch.backends.cuda, "enable_cudnn_sdp", enable)
    monkeypatch.setattr(torch.backends.cuda, "cudnn_sdp_enabled", lambda: state["on"])
    return state


def in_order(steps: list[str]) -> list[bool]:
    """Run two threads, A and B, each inside attention_policy('cuda'), entering and leaving in
    the order steps gives ('A in', 'B in', 'A out', ...): the flag seen after each step."""
    go = {s: threading.Event() for s in steps}
    done = {s: threading.Event() for s in steps}
    seen: list[bool] = []

    def worker(name: str) -> None:
        go[f"{name} in"].wait()
        with attention_policy("cuda"):
            done[f"{name} in"].set()
            go[f"{name} out"].wait()
        done[f"{name} out"].set()

    threads = [threading.Thread(target=worker, args=(n,)) for n in "AB"]
    for t in threads:
        t.start()
    for s in steps:
        go[s].set()
        assert done[s].wait(10), s
        seen.append(torch.backends.cuda.cudnn_sdp_enabled())
    for t in threads:
        t.join(10)
    return seen


@pytest.mark.parametrize("steps", [["A in", "B in", "A out", "B out"],
                                   ["A in", "B in", "B out", "A out"],
                                   ["A in", "A out", "B in", "B out"]])
def test_two_threads_leave_the_flag_as_they_found_it(flag, steps):
    seen = in_order(steps)
    # off while either thread is inside, and back on once both have left
    inside = []
    for s in steps:
        inside = inside + [s[0]] if s.endswith("in") else [n for n in inside if n != s[0]]
        assert seen.pop(0) == (not inside), (steps, s)
    assert flag["on"]


def test_a_flag_the_caller_turned_off_stays_off(flag):
    flag["on"] = False
    assert in_order(["A in", "B in", "A out", "B out"]) == [False] * 4
    with attention_policy("cuda"):
        pass
    assert flag["on"] is False


def test_on_a_cpu_the_policy_changes_nothing(flag):
    with attention_policy("cpu"):
        assert flag["on"] and flag["sets"] == 0
