"""Cameras: camera -> annotated-frame latency, and how soon a restarted camera is processed again.

A GStreamer RTSP camera (tests/support/camera.py) serves 640x480 H.264 at 30 fps; every frame
carries its send time in its pixels. A viewer (our client, RTSPSource) watches it through
`visionstream serve` with the default detection workflow; the age of each returned annotated
frame on this machine's clock is its camera -> viewer latency. Then a monitoring pipeline on
the same camera: after 10.5 s of uptime the camera is killed (-9) and restarted, --restarts
times, and the time from the restart to the pipeline's next processed frame is read from the
server's log timestamps.

Stream kinds: the same stamped 640x480 30 fps frames from RTSP (GStreamer), RTMP (nginx's RTMP
module), HLS (1 s segments over HTTP), MPEG-TS over UDP and SRT (srt-live-transmit listening,
the reader calling it through its own relay), each read by LiveSource (the server's reader)
--opens times: open time (reader created -> first decoded frame, the stream already live) and
sender -> decoded latency over --frames frames. ``--streams-only`` stops there.

Run: ``unshare --net sh -c 'ip link set lo up && python benchmarks/cameras.py'``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sources import decode_stamp  # noqa: E402
from sources.live import LiveSource  # noqa: E402
from streaming import Client, RTSPSource, StreamConfig  # noqa: E402
from streaming.protocol.workflows import object_detection  # noqa: E402
from streaming.rtc.ice import restrict_host_addresses  # noqa: E402
from tests.support.camera import RTSPCamera  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402
from tests.support.streams import PublishedStream  # noqa: E402

STREAM_KINDS = ("rtsp", "rtmp", "hls", "udp", "srt")


def latency(server: ServerProcess, camera: RTSPCamera, frames: int) -> dict:
    config = StreamConfig(stream_output=["annotated"], data_output=["predictions"])
    session = Client(server.url).webrtc.stream(
        RTSPSource(camera.url), workflow=object_detection(), config=config
    )
    ages = []
    with session:
        for frame, _ in session.video():
            if (stamp := decode_stamp(frame)) is not None:
                ages.append(stamp.age_ms())
            if len(ages) >= frames:
                break
    ages = ages[30:]  # the first second includes connection set-up
    return {
        "frames": len(ages),
        "latency_ms_p50": round(float(np.percentile(ages, 50)), 1),
        "latency_ms_p95": round(float(np.percentile(ages, 95)), 1),
    }


def _read_stream(url: str, frames: int) -> tuple[float, list[float]]:
    """(seconds to the first frame, ages in ms of the next ``frames`` stamped frames)."""
    started = time.monotonic()
    source = LiveSource(url)
    opened, ages = None, []
    try:
        while len(ages) < frames and (frame := source.read()) is not None:
            opened = time.monotonic() - started if opened is None else opened
            if (stamp := decode_stamp(frame.image)) is not None:
                ages.append(stamp.age_ms())
    finally:
        source.close()
    assert opened is not None
    return opened, ages


def stream_kinds(frames: int, opens: int) -> dict:
    report = {}
    for kind in STREAM_KINDS:
        stream = (
            RTSPCamera(640, 480, fps=30) if kind == "rtsp" else PublishedStream(kind, 640, 480, 30)
        )
        open_s, ages = [], []
        try:
            for _ in range(opens):
                opened, read = _read_stream(stream.url, frames)
                open_s.append(round(opened, 3))
                ages += read[30:]  # the first second after opening catches up
        finally:
            stream.close()
        report[kind] = {
            "open_s": open_s,
            "open_s_p50": round(float(np.median(open_s)), 3),
            "latency_ms_p50": round(float(np.percentile(ages, 50)), 1),
            "latency_ms_p95": round(float(np.percentile(ages, 95)), 1),
        }
        print(kind, report[kind], flush=True)
    return report


HEALTHY_S = 10.5


def _logged_at(line: str) -> float:
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def restarts(server: ServerProcess, camera: RTSPCamera, count: int) -> list[float]:
    started = server.start_pipeline(camera.url, object_detection())
    pipeline_id = started.json()["context"]["pipeline_id"]
    tag = f"pipeline {pipeline_id[:8]} source 0"
    seconds = []
    try:
        server.wait_for_output(f"{tag}: processing")
        for _ in range(count):
            # A camera that has run for a while: a reconnect after a good period starts from
            # the shortest backoff (LiveSource.healthy_after, 10 s), as after a real reboot.
            time.sleep(HEALTHY_S)  # camera uptime, not a wait for an event
            mark = len(server.lines)
            camera.kill()
            server.wait_for_output(f"{tag}: RESTARTING", mark)
            mark = len(server.lines)
            camera.start()
            restarted = time.time()
            line = server.lines[server.wait_for_output(f"{tag}: processing", mark, timeout=30)]
            seconds.append(round(_logged_at(line) - restarted, 3))
    finally:
        server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--opens", type=int, default=3, help="opens per stream kind")
    parser.add_argument("--streams-only", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/cameras.json"))
    args = parser.parse_args()
    streams = stream_kinds(args.frames, args.opens)
    if args.streams_only:
        print(json.dumps(streams, indent=2))
        Path(args.out).with_name("stream_kinds.json").write_text(
            json.dumps(streams, indent=2) + "\n"
        )
        return
    restrict_host_addresses(["127.0.0.1"])
    camera = RTSPCamera(640, 480, fps=30)
    server = ServerProcess()
    try:
        server.wait_ready()
        viewer = latency(server, camera, args.frames)
        back = restarts(server, camera, args.restarts)
    finally:
        server.stop()
        camera.close()
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}",
        "camera": "GStreamer RTSP, 640x480 H.264, 30 fps",
        "viewer": viewer,
        "restart_to_processed_s": back,
        "restart_to_processed_s_p50": round(float(np.median(back)), 3),
        "restart_to_processed_s_max": max(back),
        "stream_kinds": streams,
    }
    print(json.dumps(report, indent=2))
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
