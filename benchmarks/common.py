"""What every benchmark shares: the machine description, percentiles, process memory and CPU,
glass-to-glass stamps, and writing results."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/ab.py points this elsewhere: its runs must not replace the published results.
RESULTS = Path(os.environ.get("VISIONSTREAM_BENCH_RESULTS", ROOT / "benchmarks" / "results"))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def machine() -> dict:
    """The machine and the versions that shape the figures."""
    versions = {}
    for package in ("visionstream", "aiortc", "av", "openvino", "onnxruntime-gpu", "numpy",
                    "inference-sdk"):  # fmt: skip
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            continue
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "versions": versions,
        "date": datetime.now().isoformat(timespec="seconds"),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def percentiles(values, points=(50, 95, 99), digits: int = 1) -> dict:
    if len(values) == 0:
        return {f"p{p}": None for p in points}
    array = np.asarray(values, dtype=float)
    return {f"p{p}": round(float(np.percentile(array, p)), digits) for p in points}


def _tree_sum(pid: int, measure: Callable[[psutil.Process], float]) -> float:
    """``measure`` summed over a process and its children (the reference spawns one per
    session); processes that exit meanwhile count as nothing."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += measure(process)
    return total


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and its children, in MiB."""
    return round(_tree_sum(pid, lambda p: p.memory_info().rss) / 2**20, 1)


class CpuMeter:
    """CPU seconds a process tree (or with ``children=False`` the process alone) used between
    ``start()`` and ``stop()``, as % of one core."""

    def __init__(self, pid: int, children: bool = True) -> None:
        self.pid = pid
        self.children = children
        self._start = 0.0
        self._wall = 0.0

    def _cpu_seconds(self) -> float:
        def used(p: psutil.Process) -> float:
            return sum(p.cpu_times()[:2])  # user + system

        return _tree_sum(self.pid, used) if self.children else used(psutil.Process(self.pid))

    def start(self) -> None:
        self._start, self._wall = self._cpu_seconds(), time.perf_counter()

    def stop(self) -> float:
        used = self._cpu_seconds() - self._start
        return round(100 * used / max(1e-9, time.perf_counter() - self._wall), 1)


def stop_all(processes: list, timeout: float = 10.0) -> None:
    """Every process asked to end, then waited for (all asked first: they end together)."""
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait(timeout)


def write_result(name: str, report: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({**machine(), **report}, indent=2) + "\n")
    return path
