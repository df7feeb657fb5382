"""A/B: this checkout's server against an earlier commit's, alternated on the same machine.

Each round runs both servers (the order swapped every round) through the same measures, with
this checkout's clients and harnesses, so only the server differs:

- ``setup_ms_p50``: POST to first annotated frame (``session-cost --setups 10 --sessions 2``);
- ``blur_latency_ms``: live 640x480 at 30 fps through the blur workflow (``latency``);
- ``server_cpu_ms_per_frame``: two detection sessions at 15 fps for 20 s (``concurrency``);
- ``pipeline_fps``: a monitoring pipeline running the default detector on a GStreamer RTSP
  camera (640x480 H.264 at 30 fps), frames processed a second over 20 s, with its server CPU;
- ``http_run_ms``: ``POST /workflows/run`` of the detection workflow on one 640x480 image,
  and on four in one request, p50 of 30 each (``http_run``, also ``--only http``);
- ``stream_help_s``: ``visionstream stream --help`` from that checkout, the median of 5;
- ``client_import_s``: ``import streaming.client.command`` from that checkout, the median of
  5 (what the client command loads before it streams: ``--help`` exits before that).

The earlier commit is checked out in a temporary git worktree (removed at the end). Results:
``results/<out>.json``.

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks ab --before REV'``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, CpuMeter, write_result

_MEASURE_S = 20.0


def _run(name: str, args: list[str], server_root: Path, results: Path) -> list[dict[str, Any]]:
    """``python -m benchmarks NAME ARGS`` with the server from ``server_root``; its JSON
    lines."""
    env = {
        **os.environ,
        "VISIONSTREAM_BENCH_SERVER_ROOT": str(server_root),
        "VISIONSTREAM_BENCH_RESULTS": str(results),
    }
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", name, *args],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=900,
    )  # fmt: skip
    lines = []
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def pipeline_fps(server_root: Path) -> dict[str, float]:
    """Frames a second a pipeline processes from a live RTSP camera, and its server's CPU."""
    from streaming.protocol.workflows import object_detection
    from streaming.rtc.ice import restrict_host_addresses
    from tests.support.camera import RTSPCamera
    from tests.support.server import ServerProcess

    restrict_host_addresses(["127.0.0.1"])
    os.environ["VISIONSTREAM_BENCH_SERVER_ROOT"] = str(server_root)
    camera = RTSPCamera(640, 480, fps=30)
    server = ServerProcess()
    try:
        server.wait_ready()
        started = server.start_pipeline(camera.url, object_detection())
        pipeline_id = started.json()["context"]["pipeline_id"]
        server.wait_for_output(f"pipeline {pipeline_id[:8]} source 0: processing", timeout=60)

        def processed() -> int:
            report = server.get(f"/inference_pipelines/{pipeline_id}/status").json()["report"]
            return int(report["sources_metadata"][0]["frames_processed"])

        time.sleep(3.0)  # warm-up: the first frames include the model's first runs
        meter = CpuMeter(server.process.pid)
        before, start = processed(), time.perf_counter()
        meter.start()
        time.sleep(_MEASURE_S)  # the measuring window itself
        frames, elapsed = processed() - before, time.perf_counter() - start
        cpu = meter.stop()
        server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    finally:
        server.stop()
        camera.close()
        os.environ.pop("VISIONSTREAM_BENCH_SERVER_ROOT", None)
    fps = frames / elapsed
    return {
        "pipeline_fps": round(fps, 2),
        "pipeline_server_cpu_percent": cpu,
        "pipeline_cpu_ms_per_frame": round(cpu * 10 / max(fps, 1e-9), 1),
    }


def http_run(server_root: Path, requests: int = 30) -> dict[str, float]:
    """p50 ms of ``POST /workflows/run`` (the detection workflow) on one image and on four."""
    import base64

    import cv2
    import numpy as np

    from streaming.protocol.workflows import object_detection
    from tests.support.server import ServerProcess

    os.environ["VISIONSTREAM_BENCH_SERVER_ROOT"] = str(server_root)
    frame = np.random.default_rng(0).integers(0, 255, (480, 640, 3), dtype=np.uint8)
    image = {"type": "base64", "value": base64.b64encode(cv2.imencode(".jpg", frame)[1]).decode()}
    server = ServerProcess()
    figures: dict[str, float] = {}
    try:
        server.wait_ready()
        for label, images in (("http_run_1_ms", image), ("http_run_4_ms", [image] * 4)):
            body = {"specification": object_detection(), "inputs": {"image": images}}
            times = []
            for _ in range(requests + 2):  # the first two warm up
                started = time.perf_counter()
                answer = server.post("/workflows/run", json=body)
                times.append((time.perf_counter() - started) * 1000)
                answer.raise_for_status()
            figures[label] = round(statistics.median(times[2:]), 1)
    finally:
        server.stop()
        os.environ.pop("VISIONSTREAM_BENCH_SERVER_ROOT", None)
    return figures


def _start_s(server_root: Path, args: list[str], runs: int = 5) -> float:
    """Median seconds of ``python ARGS`` run in ``server_root`` (``-m`` and ``-c`` import
    from the working directory first: that checkout's code)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, *args], cwd=server_root, capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3)


def measure(server_root: Path, results: Path) -> dict[str, Any]:
    pipeline = pipeline_fps(server_root)
    cost = _run("session-cost", ["--setups", "10", "--sessions", "2"], server_root, results)
    _run("latency", ["--workflow", "blur", "--frames", "600", "--out", "ab-latency"],
         server_root, results)  # fmt: skip
    blur = json.loads((results / "ab-latency.json").read_text())["runs"]["blur"]
    (two,) = _run("concurrency", ["--sessions", "2", "--seconds", str(_MEASURE_S)],
                  server_root, results)  # fmt: skip
    concurrency = json.loads((results / "concurrency.json").read_text())["steps"][0]
    fps_total = sum(s["fps"] for s in concurrency["per_session"])
    return {
        "setup_ms_p50": cost[-1]["setup_ms"]["p50"],
        "setup_ms_p95": cost[-1]["setup_ms"]["p95"],
        "blur_latency_ms": blur["latency_ms"],
        "detection_2_sessions_fps_total": round(fps_total, 1),
        "server_cpu_percent": two["server_cpu_percent"],
        "server_cpu_ms_per_frame": round(two["server_cpu_percent"] * 10 / max(fps_total, 1e-9), 1),
        **pipeline,
        **http_run(server_root),
        "stream_help_s": _start_s(server_root, ["-m", "streaming.cli", "stream", "--help"]),
        "client_import_s": _start_s(server_root, ["-c", "import streaming.client.command"]),
    }


def alternated(
    before: str, rounds: int, measure: Callable[[Path], dict[str, Any]]
) -> list[dict[str, Any]]:
    """``measure(server_root)`` for the commit ``before`` (a temporary worktree) and for this
    checkout, the order swapped every round; each round's figures, printed as they come."""
    figures: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="visionstream-ab-") as scratch:
        earlier = Path(scratch) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(earlier), before],
                       cwd=ROOT, check=True, capture_output=True)  # fmt: skip
        try:
            for number in range(1, rounds + 1):
                order = [("before", earlier), ("after", ROOT)]
                if number % 2 == 0:
                    order.reverse()
                for code, root in order:
                    figures.append({"round": number, "code": code, **measure(root)})
                    print(json.dumps(figures[-1]), flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(earlier)], cwd=ROOT,
                           check=False, capture_output=True)  # fmt: skip
    return figures


def head() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks ab", description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the earlier commit")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default="refactor-ab")
    parser.add_argument("--only", choices=["http"], help="only the HTTP workflow runs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="visionstream-ab-results-") as scratch:
        results = Path(scratch)
        chosen = http_run if args.only == "http" else (lambda root: measure(root, results))
        rounds = alternated(args.before, args.rounds, chosen)
    path = write_result(args.out, {
        "what": f"server at {args.before} (before) vs {head()} (after), alternated",
        "rounds": rounds,
    })  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
