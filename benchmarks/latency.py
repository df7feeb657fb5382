"""Glass-to-glass latency: a live synthetic 640x480 feed at 30 fps through the server, realtime.

Every frame carries its send time and index in pixel blocks that survive VP8; the client
(ours, in this process) reads them back from the returned annotated frame, so the latency is
on one clock. Reported per workflow: p50/p95/p99 over --frames frames (after --warmup), the
drop rate (frames sent that never came back), and drift (p50 of the last 100 frames minus p50
of the first 100). Workflows: the default detection model, and the model-free blur (which
isolates what streaming itself costs). The server's own inference time per frame comes from
each result's ``video_metadata.inference_ms``.

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks latency'``
(``--frames 9000`` for the 5-minute drift run). ``--sessions N`` runs N such sessions at once
for a soak (``--sessions 4 --frames 108000 --workflow blur`` is the hour): each reports its
own drift and the median of every minute instead of every sample.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from benchmarks.common import percentiles, write_result
from sources import SyntheticSource, decode_stamp
from streaming import Client, StreamConfig
from streaming.client import FrameSourceStream
from streaming.peer.ice import restrict_host_addresses
from streaming.workflows.library import image_blur, object_detection
from tests.support.server import ServerProcess

WORKFLOWS = {
    "detection": (
        object_detection(),
        StreamConfig(stream_output=["annotated"], data_output=["predictions"]),
    ),
    "blur": (image_blur(), StreamConfig(stream_output=["output_image"], data_output=[])),
}


def measure(url: str, workflow: str, frames: int, fps: float, warmup: int) -> dict:
    spec, config = WORKFLOWS[workflow]
    source = FrameSourceStream(lambda: SyntheticSource(640, 480, fps=fps, frames=warmup + frames))
    ages: dict[int, float] = {}
    inference: list[float] = []
    with Client(url).webrtc.stream(source, workflow=spec, config=config) as session:
        for frame, metadata in session.video():
            stamp = decode_stamp(frame)
            if stamp is None or stamp.index < warmup:
                continue
            ages.setdefault(stamp.index, stamp.age_ms())
            if metadata.inference_ms:
                inference.append(metadata.inference_ms)
    ordered = [ages[i] for i in sorted(ages)]
    head, tail = ordered[:100], ordered[-100:]
    drift = float(np.median(tail) - np.median(head)) if len(ordered) >= 200 else None
    minute = int(60 * fps)
    long_run = len(ordered) > 3 * minute
    samples = (
        {
            "minute_medians_ms": [
                round(float(np.median(ordered[i : i + minute])), 1)
                for i in range(0, len(ordered), minute)
            ]
        }
        if long_run
        else {"samples_ms": [round(a, 1) for a in ordered]}
    )
    return {
        "workflow": workflow,
        "frames_sent": frames,
        "frames_back": len(ages),
        "delivered_fps": round(fps * len(ages) / frames, 1),
        "drop_rate": round(1 - len(ages) / frames, 4),
        "latency_ms": percentiles(ordered),
        "drift_ms": None if drift is None else round(drift, 1),
        "server_inference_ms_p50": round(float(np.median(inference)), 2) if inference else None,
        **samples,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks latency", description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=60)
    parser.add_argument("--fps", type=float, default=30)
    parser.add_argument("--workflow", choices=[*WORKFLOWS, "both"], default="both")
    parser.add_argument("--sessions", type=int, default=1, help="concurrent sessions")
    parser.add_argument("--out", default="latency", help="results/<out>.json")
    args = parser.parse_args(argv)
    restrict_host_addresses(["127.0.0.1"])
    names = list(WORKFLOWS) if args.workflow == "both" else [args.workflow]
    server = ServerProcess()
    runs = {}
    try:
        server.wait_ready()
        for name in names:
            with ThreadPoolExecutor(args.sessions) as pool:
                futures = [
                    pool.submit(measure, server.url, name, args.frames, args.fps, args.warmup)
                    for _ in range(args.sessions)
                ]
                results = [f.result() for f in futures]
            runs[name] = results[0] if args.sessions == 1 else {"sessions": results}
            for result in results:
                shown = {
                    k: v for k, v in result.items() if not k.endswith("_ms") or k == "drift_ms"
                }
                print(json.dumps(shown), flush=True)
        device = server.get("/readyz").json()["models"]
    finally:
        server.stop()
    path = write_result(args.out, {"fps": args.fps, "size": [640, 480], "models": device,
                                   "runs": runs})  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
