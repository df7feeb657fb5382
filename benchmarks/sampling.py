"""``max_fps`` as asked: the results a second of pipelines sampling live cameras, this
checkout's server against an earlier commit's, alternated.

Two GStreamer RTSP cameras (640x480 H.264) at 15 and 25 fps, one pipeline each on the same
server, the default detector, ``max_fps`` 5 and 10 (every third frame, and two of five).
Over a 20 s window after a 3 s warm-up: each pipeline's frames processed a second (the rate
asked is what a user expects), and the server's CPU. The earlier commit runs in a temporary
git worktree (``benchmarks ab``'s). Results: ``results/sampling.json``.

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks sampling --before REV'``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from benchmarks.ab import alternated, head
from benchmarks.common import CpuMeter, write_result

_WARM_S = 3.0
_MEASURE_S = 20.0
CASES = ((15, 5.0), (25, 10.0))
"""(camera fps, max_fps)."""


def measure(server_root: Path) -> dict[str, Any]:
    from streaming.protocol.workflows import object_detection
    from streaming.rtc.ice import restrict_host_addresses
    from tests.support.camera import RTSPCamera
    from tests.support.server import ServerProcess

    restrict_host_addresses(["127.0.0.1"])
    os.environ["VISIONSTREAM_BENCH_SERVER_ROOT"] = str(server_root)
    cameras = [RTSPCamera(640, 480, fps=fps) for fps, _ in CASES]
    server = ServerProcess()
    try:
        server.wait_ready()
        ids = []
        for camera, (_, max_fps) in zip(cameras, CASES, strict=True):
            started = server.post("/inference_pipelines/initialise", json={
                "video_configuration": {"type": "VideoConfiguration",
                                        "video_reference": camera.url, "max_fps": max_fps},
                "processing_configuration": {"type": "WorkflowConfiguration",
                                             "workflow_specification": object_detection()},
            })  # fmt: skip
            ids.append(started.json()["context"]["pipeline_id"])
        for pipeline_id in ids:
            server.wait_for_output(f"pipeline {pipeline_id[:8]} source 0: processing", timeout=60)

        def processed() -> list[int]:
            counts = []
            for pipeline_id in ids:
                report = server.get(f"/inference_pipelines/{pipeline_id}/status").json()
                counts.append(int(report["report"]["sources_metadata"][0]["frames_processed"]))
            return counts

        time.sleep(_WARM_S)  # warm-up: the first frames include the model's first runs
        meter = CpuMeter(server.process.pid)
        before, start = processed(), time.perf_counter()
        meter.start()
        time.sleep(_MEASURE_S)  # the measuring window itself
        after, elapsed = processed(), time.perf_counter() - start
        cpu = meter.stop()
        for pipeline_id in ids:
            server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    finally:
        server.stop()
        for camera in cameras:
            camera.close()
        os.environ.pop("VISIONSTREAM_BENCH_SERVER_ROOT", None)
    rates = {
        f"{fps}fps_max{max_fps:g}": round((a - b) / elapsed, 2)
        for (fps, max_fps), a, b in zip(CASES, after, before, strict=True)
    }
    return {**rates, "server_cpu_percent": cpu}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks sampling",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--before", required=True, help="the earlier commit")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    rounds = alternated(args.before, args.rounds, measure)
    path = write_result("sampling", {
        "what": f"server at {args.before} (before) vs {head()} (after), alternated",
        "cases": [{"camera_fps": fps, "max_fps": max_fps} for fps, max_fps in CASES],
        "rounds": rounds,
    })  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
