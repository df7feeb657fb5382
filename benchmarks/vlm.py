"""A slow vision-language model costs a live stream nothing: the same server, the same
camera and the same live session, with and without a VLM step whose provider takes 3 s an
answer, alternated in one run.

- ``pipeline_fps``: a monitoring pipeline running the default detector on a GStreamer RTSP
  camera (640x480 H.264 at 30 fps), frames processed a second over 20 s after a 3 s warm-up;
- ``session_fps``: the published ``inference-sdk`` streaming 640x480 frames at 15 fps through
  the same workflow, annotated frames back a second over 15 s.

The VLM step is ``anthropic_claude@v3`` (caption) on the provider played by
``tests/support/vlm_provider.py`` on loopback, answering every question after ``--delay``
seconds; the server asks in the background and each frame carries the last answer.
Results: ``results/vlm.json`` (each round, and after/before ratios of the medians).

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks vlm'``.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import threading
import time
from typing import Any

from benchmarks.common import write_result

_WARM_S = 3.0
_PIPELINE_S = 20.0
_SESSION_S = 15.0


def _workflow(with_vlm: bool) -> dict[str, Any]:
    from streaming.protocol.workflows import object_detection

    spec = copy.deepcopy(object_detection())
    if with_vlm:
        spec["steps"].append(
            {
                "type": "roboflow_core/anthropic_claude@v3",
                "name": "vlm",
                "images": "$inputs.image",
                "task_type": "caption",
            }
        )
        spec["outputs"].append({"type": "JsonField", "name": "vlm", "selector": "$steps.vlm.*"})
    return spec


def _pipeline_fps(server: Any, camera_url: str, spec: dict[str, Any]) -> float:
    started = server.start_pipeline(camera_url, spec)
    pipeline_id = started.json()["context"]["pipeline_id"]
    server.wait_for_output(f"pipeline {pipeline_id[:8]} source 0: processing", timeout=60)

    def processed() -> int:
        report = server.get(f"/inference_pipelines/{pipeline_id}/status").json()["report"]
        return int(report["sources_metadata"][0]["frames_processed"])

    time.sleep(_WARM_S)  # warm-up: the first frames include the model's first runs
    before, start = processed(), time.perf_counter()
    time.sleep(_PIPELINE_S)  # the measuring window itself
    frames, elapsed = processed() - before, time.perf_counter() - start
    server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    return frames / elapsed


def _session_fps(url: str, spec: dict[str, Any]) -> float:
    from tests.support.sdk import SdkSession

    session = SdkSession(url, spec, fps=15)
    try:
        session.wait_streaming(10)
        with session.changed:
            before, start = session.frames, time.perf_counter()
        time.sleep(_SESSION_S)  # the measuring window itself
        with session.changed:
            frames = session.frames - before
        return frames / (time.perf_counter() - start)
    finally:
        session.close()


def run(rounds: int, delay: float) -> dict[str, Any]:
    from streaming.config import Settings
    from streaming.inference.decoders import DecodeOptions
    from streaming.inference.registry import ModelRegistry
    from streaming.rtc.ice import restrict_host_addresses
    from tests.support.camera import RTSPCamera
    from tests.support.server import ServerProcess
    from tests.support.vlm_provider import VlmProvider

    restrict_host_addresses(["127.0.0.1"])
    registry = ModelRegistry(Settings())
    model = registry.get("yolov3-tiny-416")
    lock = threading.Lock()

    def detect(image: Any) -> Any:
        with lock:
            return model.detect(image, DecodeOptions(confidence=0.3))

    camera = RTSPCamera(640, 480, fps=30)
    figures: list[dict[str, Any]] = []
    with VlmProvider(detect) as provider:
        provider.delay_s = delay
        anthropic = {"api": "anthropic", "base_url": provider.anthropic_url, "model": "describe"}
        server = ServerProcess(vlm_providers=json.dumps({"anthropic": anthropic}))
        try:
            server.wait_ready()
            for number in range(1, rounds + 1):
                order = [False, True] if number % 2 else [True, False]
                for with_vlm in order:
                    spec = _workflow(with_vlm)
                    asked = len(provider.calls)
                    row = {
                        "round": number,
                        "vlm": with_vlm,
                        "pipeline_fps": round(_pipeline_fps(server, camera.url, spec), 2),
                        "session_fps": round(_session_fps(server.url, spec), 2),
                        "questions": len(provider.calls) - asked,
                    }
                    figures.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            server.stop()
            camera.close()
            registry.close()
    return _report(figures, delay)


def _report(figures: list[dict[str, Any]], delay: float) -> dict[str, Any]:
    def median(with_vlm: bool, key: str) -> float:
        return statistics.median(f[key] for f in figures if f["vlm"] is with_vlm)

    ratios = {
        f"{key}_ratio": round(median(True, key) / max(median(False, key), 1e-9), 3)
        for key in ("pipeline_fps", "session_fps")
    }
    return {
        "provider_delay_s": delay,
        "median_without_vlm": {k: median(False, k) for k in ("pipeline_fps", "session_fps")},
        "median_with_vlm": {k: median(True, k) for k in ("pipeline_fps", "session_fps")},
        **ratios,
        "rounds": figures,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks vlm", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay", type=float, default=3.0, help="seconds per answer")
    args = parser.parse_args(argv)
    report = run(args.rounds, args.delay)
    path = write_result("vlm", report)
    print(json.dumps({k: v for k, v in report.items() if k != "rounds"}))
    print(f"written to {path}")
