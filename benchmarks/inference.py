"""The default model on every backend this machine has: latency at batch 1, and throughput by
batch size and by concurrent callers (what the runtime itself can do, with no server around).

Backends measured: ONNX Runtime on CPU; OpenVINO on CPU at the device's default precision
(bf16 where the CPU has it) and at f32, each with the LATENCY hint (one caller) and the
THROUGHPUT hint (parallel requests); and, where an NVIDIA GPU is present, ONNX Runtime with
CUDA (fp32) and TensorRT (fp32 and fp16). Rounds alternate the backends so that noise on a
shared machine spreads evenly; figures are medians over rounds.

Run: ``python benchmarks/inference.py [--rounds 3]``; results go to results/inference.json
(results/inference-<machine>.json with --tag).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streaming.config import Settings  # noqa: E402
from streaming.inference.onnx_session import OnnxOptions, OnnxRuntimeSession  # noqa: E402
from streaming.inference.openvino_session import OpenVINOOptions, OpenVINOSession  # noqa: E402
from streaming.inference.session import nvidia_driver_present  # noqa: E402

MODEL = Settings().models_dir / "yolov3-tiny-416" / "model.onnx"


def backends(trt_cache: Path) -> dict:
    found = {
        "onnxruntime-cpu": lambda: OnnxRuntimeSession(
            MODEL, OnnxOptions(providers=["CPUExecutionProvider"])
        ),
        "openvino-cpu-default": lambda: OpenVINOSession(MODEL, OpenVINOOptions(device="CPU")),
        "openvino-cpu-f32": lambda: OpenVINOSession(
            MODEL, OpenVINOOptions(device="CPU", precision="f32")
        ),
        "openvino-cpu-default-throughput": lambda: OpenVINOSession(
            MODEL, OpenVINOOptions(device="CPU", performance_hint="THROUGHPUT")
        ),
    }
    if nvidia_driver_present():
        cuda = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        trt = ["TensorrtExecutionProvider", *cuda]
        found |= {
            "onnxruntime-cuda-fp32": lambda: OnnxRuntimeSession(MODEL, OnnxOptions(providers=cuda)),
            "onnxruntime-tensorrt-fp32": lambda: OnnxRuntimeSession(
                MODEL, OnnxOptions(providers=trt, trt_fp16=False, trt_cache_dir=trt_cache / "32")
            ),
            "onnxruntime-tensorrt-fp16": lambda: OnnxRuntimeSession(
                MODEL, OnnxOptions(providers=trt, trt_fp16=True, trt_cache_dir=trt_cache / "16")
            ),
        }
    return found


def timed_runs(session, batch: np.ndarray, runs: int) -> list[float]:
    for _ in range(3):
        session.run(batch)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        session.run(batch)
        times.append((time.perf_counter() - started) * 1000)
    return times


def concurrent_fps(session, callers: int, seconds: float) -> float:
    """Images per second with ``callers`` threads each running batch 1 back to back."""
    image = np.random.default_rng(0).random((1, 3, 416, 416), dtype=np.float32)
    stop = time.perf_counter() + seconds
    counts = [0] * callers

    def call(index: int) -> None:
        while time.perf_counter() < stop:
            session.run(image)
            counts[index] += 1

    threads = [threading.Thread(target=call, args=(i,)) for i in range(callers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - started)


def measure(session, batch_sizes: list[int], callers: list[int]) -> dict:
    single = np.random.default_rng(0).random((1, 3, 416, 416), dtype=np.float32)
    latency = timed_runs(session, single, 40)
    by_batch = {}
    for size in batch_sizes:
        batch = np.random.default_rng(size).random((size, 3, 416, 416), dtype=np.float32)
        per_batch = statistics.median(timed_runs(session, batch, max(5, 40 // size)))
        by_batch[size] = round(size * 1000 / per_batch, 1)
    by_callers = {n: round(concurrent_fps(session, n, 3.0), 1) for n in callers}
    return {
        "latency_ms_p50": round(float(np.percentile(latency, 50)), 2),
        "latency_ms_p95": round(float(np.percentile(latency, 95)), 2),
        "fps_by_batch": by_batch,
        "fps_by_concurrent_callers": by_callers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tag", default="", help="suffix of the results file (machine name)")
    args = parser.parse_args()
    gpu = nvidia_driver_present()
    batch_sizes = [1, 2, 4, 8, 16, 32] if gpu else [1, 2, 4, 8]
    callers = [1, 2, 4]
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as trt_cache:
        sessions = {name: make() for name, make in backends(Path(trt_cache)).items()}
        for round_index in range(args.rounds):
            for name, session in sessions.items():
                runs.setdefault(name, []).append(measure(session, batch_sizes, callers))
                print(f"round {round_index + 1} {name}: {json.dumps(runs[name][-1])}", flush=True)
        devices = {name: session.device for name, session in sessions.items()}
        for session in sessions.values():
            session.close()

    summary = {}
    for name, rounds in runs.items():
        fps_batch = {
            s: statistics.median(r["fps_by_batch"][s] for r in rounds) for s in batch_sizes
        }
        fps_callers = {n: statistics.median(r["fps_by_concurrent_callers"][n] for r in rounds)
                       for n in callers}  # fmt: skip
        best = max([*fps_batch.values(), *fps_callers.values()])
        summary[name] = {
            "device": devices[name],
            "latency_ms_p50": statistics.median(r["latency_ms_p50"] for r in rounds),
            "latency_ms_p95": statistics.median(r["latency_ms_p95"] for r in rounds),
            "fps_by_batch": fps_batch,
            "fps_by_concurrent_callers": fps_callers,
            "best_batch": max(fps_batch, key=fps_batch.get),
            "best_fps": best,
        }
        print(f"{name}: {json.dumps(summary[name])}")
    report = {
        "machine": f"{platform.node() if args.tag else ''} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}".strip(),
        "date": datetime.now().date().isoformat(),
        "model": "yolov3-tiny-416 (416x416, FP32 ONNX)",
        "median_of_rounds": summary,
        "rounds": runs,
    }
    name = f"inference-{args.tag}.json" if args.tag else "inference.json"
    (ROOT / "benchmarks/results" / name).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
