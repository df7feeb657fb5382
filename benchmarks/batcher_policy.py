"""The batcher's policy, A/B: this checkout's ``DynamicBatcher`` against an earlier commit's,
in front of an emulated GPU, alternated in one run.

The device: one run at a time, each taking 0.45 + 0.18 ms per image (a sleep, so it holds no
CPU), the default model's frame path on the H100 (CUDA graphs, fp16: 0.60 ms at batch 1,
3.34 ms at 16, 6.33 ms at 32; ``results/gpu-h100-probe-rerun.json``). It is what a lent GPU
machine measures for real (``benchmarks/gpu/serving.py``); this isolates the policy itself,
here, between lent sessions. The batcher: the server's GPU default, batches of up to 16,
2 ms delay, 2 workers.

The load: N sessions at 30 fps, each a thread sending its next frame on its next tick if
its last one is back (a realtime session drops the frames it cannot take), for 1 to 64
sessions; then 64 callers back to back (saturation). Per load: frames/s, the latency of a
call (p50, p95) and the mean batch.

Run: ``python -m benchmarks batcher-policy --before REV``; results
``results/batcher-policy.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import ROOT, write_result
from streaming.inference.session import InferenceSession, TensorSpec

FIXED_MS, PER_IMAGE_MS = 0.45, 0.18
FPS = 30.0
SESSIONS = (1, 4, 16, 32, 64)
SETTING = (16, 2.0, 2)  # max batch, delay (ms), workers: the server's GPU default


class EmulatedGpu(InferenceSession):
    """One run at a time, its time a sleep (the host thread waits on the device)."""

    backend = "emulated"
    inputs = [TensorSpec("x", "FP32", (-1, 1))]
    outputs = [TensorSpec("y", "FP32", (-1, 1))]

    def __init__(self) -> None:
        self._device = threading.Lock()

    @property
    def providers(self) -> list[str]:
        return ["emulated-gpu"]

    def run(self, batch: np.ndarray) -> list[np.ndarray]:
        with self._device:
            time.sleep((FIXED_MS + PER_IMAGE_MS * len(batch)) / 1000)
        return [batch.copy()]


def batcher_class(rev: str | None, scratch: Path) -> type:
    """``DynamicBatcher`` of this checkout, or of ``rev`` (its file, loaded beside ours so
    its relative imports resolve)."""
    if rev is None:
        from streaming.inference.batcher import DynamicBatcher

        return DynamicBatcher
    source = subprocess.run(["git", "show", f"{rev}:streaming/inference/batcher.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    path = scratch / "batcher_before.py"
    path.write_text(source)
    name = "streaming.inference._batcher_before"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.DynamicBatcher


def load(
    batcher: Any, sessions: int, seconds: float, paced: bool, sample: np.ndarray | None = None
) -> dict[str, Any]:
    """``sessions`` threads for ``seconds``, each calling ``batcher.infer`` with one frame
    (its own copy of ``sample``, else a 1x1 blob holding its index): paced at ``FPS`` (a
    frame per tick when the last is back) or back to back (``gpu/serving.py``'s load)."""
    latencies: list[list[float]] = [[] for _ in range(sessions)]
    batches: list[int] = []
    begin = time.perf_counter() + 0.05
    end = begin + seconds
    stop = threading.Event()

    def session(index: int, mine: list[float]) -> None:
        blob = sample.copy() if sample is not None else np.full((1, 1), index, np.float32)
        tick = begin + index / (FPS * sessions)  # sessions' frames spread over a tick
        while not stop.is_set():
            if paced:
                stop.wait(max(0.0, tick - time.perf_counter()))
                tick += 1 / FPS
                if tick < time.perf_counter():  # a missed tick is a dropped frame
                    tick += (time.perf_counter() - tick) // (1 / FPS) * (1 / FPS) + 1 / FPS
            started = time.perf_counter()
            if started >= end:
                return
            _, stats = batcher.infer(blob)
            mine.append((time.perf_counter() - started) * 1000)
            batches.append(stats.batch_size)

    threads = [threading.Thread(target=session, args=(i, m)) for i, m in enumerate(latencies)]
    for thread in threads:
        thread.start()
    stop.wait(max(0.0, end - time.perf_counter()))
    stop.set()
    for thread in threads:
        thread.join(10)
    every = sorted(v for mine in latencies for v in mine)
    return {
        "sessions": sessions,
        "paced": paced,
        "frames_per_s": round(len(every) / seconds, 1),
        "p50_ms": round(statistics.median(every), 2) if every else None,
        "p95_ms": round(every[int(0.95 * (len(every) - 1))], 2) if every else None,
        "mean_batch": round(statistics.fmean(batches), 2) if batches else None,
    }


def measure(batcher_type: type, seconds: float) -> list[dict[str, Any]]:
    batcher = batcher_type(EmulatedGpu(), SETTING[0], SETTING[1], workers=SETTING[2])
    try:
        runs = [load(batcher, n, seconds, paced=True) for n in SESSIONS]
        runs.append(load(batcher, 64, seconds, paced=False))
    finally:
        batcher.close()
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks batcher-policy", description=__doc__)
    parser.add_argument("--before", required=True, help="the earlier commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        variants = {"before": batcher_class(args.before, Path(scratch)),
                    "after": batcher_class(None, Path(scratch))}  # fmt: skip
        runs: dict[str, list[list[dict[str, Any]]]] = {name: [] for name in variants}
        for round_ in range(args.rounds):
            order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
            for name in order:
                runs[name].append(measure(variants[name], args.seconds))
                print(name, [(r["sessions"], r["p95_ms"], r["frames_per_s"]) for r in
                             runs[name][-1]], flush=True)  # fmt: skip
    summary = []
    for index, first in enumerate(runs["after"][0]):
        row: dict[str, Any] = {"sessions": first["sessions"], "paced": first["paced"]}
        for name in variants:
            for key in ("frames_per_s", "p50_ms", "p95_ms", "mean_batch"):
                row[f"{name}_{key}"] = statistics.median(r[index][key] for r in runs[name])
        summary.append(row)
        print(row)
    write_result("batcher-policy", {
        "before": args.before, "device": {"fixed_ms": FIXED_MS, "per_image_ms": PER_IMAGE_MS},
        "setting": {"max_batch": SETTING[0], "delay_ms": SETTING[1], "workers": SETTING[2]},
        "fps_each": FPS, "summary": summary, "runs": runs,
    })  # fmt: skip


if __name__ == "__main__":
    main()
