"""Shared helpers for the benchmarks: device description, interleaved timing, result files."""
from __future__ import annotations

import contextlib
import json
import statistics
import time
from pathlib import Path
from typing import Callable

import torch

from transformer_lit.machine import attention_policy
from transformer_lit.machine import cpu_details as package_cpu_details

RESULTS = Path(__file__).resolve().parents[1] / "transformer_lit" / "results"   # package data: the book shows them


def device_name(device: torch.device) -> str:
    "A human-readable name of the device the numbers were measured on."
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_details()['name']} ({torch.get_num_threads()} threads)"


def cpu_details() -> dict[str, str]:
    """What tells two CPU hosts of the same name apart: the package's cpu_details (vendor,
    family/model/stepping, vector instructions) and the cache sizes from Linux's sysfs."""
    details = package_cpu_details()
    try:
        for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            if kind != "Instruction":
                details[f"L{level}"] = (index / "size").read_text().strip()
    except OSError:
        pass
    return details


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device) -> tuple[object, float]:
    "fn's result and its wall time in seconds, with the device's queue drained before and after."
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - start


_HELD = contextlib.ExitStack()   # policies held until the benchmark's process ends


def disable_cudnn_attention(device: torch.device) -> None:
    """The package's one cuDNN-attention policy (chapter 35's attention_policy, which fit and
    translate hold while they run), held for the rest of this benchmark's process."""
    _HELD.enter_context(attention_policy(device))


def interleaved_medians(fns: dict[str, Callable[[], object]], device: torch.device,
                        repeats: int = 20, warmup: int = 3) -> dict[str, float]:
    "Median seconds per call of each fn, timed in alternation so that drifts hit all of them alike."
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(timed(fn, device)[1])
    return {k: statistics.median(v) for k, v in times.items()}


def write_result(name: str, device: torch.device, payload: dict) -> Path:
    "Write transformer_lit/results/<name>_<cpu|cuda>.json with the device, versions and the numbers."
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}_{device.type}.json"
    record = {"device": device_name(device), "torch": torch.__version__, **payload}
    if device.type == "cpu":
        record = {"device": record["device"], "cpu": cpu_details(), **record}
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path
