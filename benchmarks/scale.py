"""The Ray deployment: sessions sustained against replica count, and what Ray adds to one
session's latency.

For each replica count R (``--replicas 1,2``): ``visionstream serve --ray --replicas R`` on a
local Ray (this machine's cores), then N realtime 640x480 sessions at 30 fps (our client, one
asyncio loop; ``--workflow blur|detect``) for N = 1, 2, 3, ... until the slowest session falls
below 28 fps or the worst p95 passes 150 ms: the largest N that held, and the server's CPU ms
per delivered frame there. Scaling efficiency = sessions at R / (R x sessions at 1).

Then one session, side by side: the embedded server against ``--ray --replicas 1``, the
difference of the glass-to-glass p50 being what Ray adds (Serve's proxy is on the signaling
path only; media goes straight to the replica).

``--models``: where the detection model runs, side by side at the same load (``--replicas``'
largest count, one session per replica, the detection workflow): loaded in every replica
(``VISIONSTREAM_RAY_MODELS=replica``) against one Serve model deployment batching for all
(``deployment``): each session's fps and latency, and the server's CPU ms per frame.

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks scale'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from benchmarks.common import write_result
from benchmarks.concurrency import sessions
from streaming import StreamConfig
from streaming.protocol.workflows import image_blur, object_detection
from streaming.rtc.ice import restrict_host_addresses
from tests.support.server import ServerProcess

FPS, HELD_FPS, P95_MS = 30.0, 28.0, 150.0
START_S = 300
IMAGE_OUTPUTS = ("output_image", "annotated")  # the library's blur and detection workflows


def ray_server(replicas: int, **settings: str) -> ServerProcess:
    command = ["-m", "streaming.cli", "serve", "--ray", "--replicas", str(replicas)]
    server = ServerProcess(serve=command, ray_proxy_location="HeadOnly", max_sessions="64",
                           max_sessions_per_address="0", **settings)  # fmt: skip
    server.wait_for_output("Ray Serve replicas", timeout=START_S)
    server.wait_workers_ready(replicas, START_S)
    return server


def measure(server: ServerProcess, count: int, workflow: dict, seconds: float) -> dict:
    # The workflow's image output back as video; no data back (the video carries the stamps).
    image = next(o["name"] for o in workflow["outputs"] if o["name"] in IMAGE_OUTPUTS)
    config = StreamConfig(stream_output=[image], data_output=[])
    result = asyncio.run(sessions(server.url, count, FPS, seconds, server.process.pid,
                                  workflow, config))  # fmt: skip
    slowest = min(s["fps"] for s in result["per_session"])
    frames = sum(s["fps"] for s in result["per_session"])
    result["held"] = slowest >= HELD_FPS and result["latency_ms_p95_worst"] <= P95_MS
    result["server_cpu_ms_per_frame"] = round(10 * result["server_cpu_percent"] / frames, 2)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks scale", description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", default="1,2")
    parser.add_argument("--workflow", choices=["blur", "detect"], default="blur")
    parser.add_argument("--max-sessions", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--models", action="store_true", help="only the model placement runs")
    args = parser.parse_args(argv)
    restrict_host_addresses(["127.0.0.1"])
    if args.models:
        compare_models(max(int(r) for r in args.replicas.split(",")), args.seconds)
        return
    workflow = image_blur() if args.workflow == "blur" else object_detection()
    scaling = []
    for replicas in (int(r) for r in args.replicas.split(",")):
        server = ray_server(replicas)
        steps = []
        try:
            for count in range(1, args.max_sessions + 1):
                step = measure(server, count, workflow, args.seconds)
                steps.append(step)
                shown = {k: v for k, v in step.items() if k != "per_session"}
                print(json.dumps({"replicas": replicas, **shown}), flush=True)
                if not step["held"]:
                    break
        finally:
            server.stop()
        held = [s for s in steps if s["held"]]
        scaling.append({
            "replicas": replicas,
            "sessions_held": held[-1]["sessions"] if held else 0,
            "server_cpu_ms_per_frame": held[-1]["server_cpu_ms_per_frame"] if held else None,
            "steps": steps,
        })  # fmt: skip
    base = scaling[0]["sessions_held"] or 1
    for row in scaling:
        row["efficiency"] = round(row["sessions_held"] / (row["replicas"] * base), 2)
    overhead = []
    for name in ("embedded", "ray"):
        server = ray_server(1) if name == "ray" else ServerProcess()
        try:
            if name == "embedded":
                server.wait_ready()
            step = measure(server, 1, workflow, args.seconds)
        finally:
            server.stop()
        overhead.append({"server": name, "p50_ms": step["per_session"][0]["latency_ms"]["p50"],
                         "fps": step["per_session"][0]["fps"]})  # fmt: skip
        print(json.dumps(overhead[-1]), flush=True)
    added = round(overhead[1]["p50_ms"] - overhead[0]["p50_ms"], 1)
    print(f"sessions held by replica count: "
          f"{[(r['replicas'], r['sessions_held'], r['efficiency']) for r in scaling]}; "
          f"Ray adds {added} ms to one session's p50")  # fmt: skip
    write_result(f"scale-{args.workflow}", {
        "size": [640, 480], "fps_each": FPS, "held_fps": HELD_FPS, "p95_ms": P95_MS,
        "workflow": args.workflow, "scaling": scaling, "one_session": overhead,
        "ray_adds_p50_ms": added,
    })  # fmt: skip


def compare_models(replicas: int, seconds: float) -> None:
    rows = []
    for placement in ("replica", "deployment"):
        # The deployment takes no CPU of Ray's: the replicas keep one each, as in "replica".
        server = ray_server(replicas, ray_models=placement, ray_model_resources='{"CPU": 0}')
        try:
            step = measure(server, replicas, object_detection(), seconds)
        finally:
            server.stop()
        row = {
            "models": placement,
            "sessions": replicas,
            "fps_min": min(s["fps"] for s in step["per_session"]),
            "p50_ms_max": max(s["latency_ms"]["p50"] for s in step["per_session"]),
            "p95_ms_worst": step["latency_ms_p95_worst"],
            "server_cpu_ms_per_frame": step["server_cpu_ms_per_frame"],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_result("scale-models", {"size": [640, 480], "fps_each": FPS, "replicas": replicas,
                                  "placements": rows})  # fmt: skip


if __name__ == "__main__":
    main()
