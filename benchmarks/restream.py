"""What a restream costs, and how late its picture is, per protocol.

**CPU per restreamed source.** N cameras (the cameras-per-box clip: H.264 1280x720, 15 fps,
sent as MPEG-TS over UDP by processes whose CPU is not the server's), one pipeline each at
``max_fps`` 10 whose workflow's image output is the frame itself. Side by side, alternated:
the pipelines alone, then each source with one RTSP player (``ffmpeg -c copy``: the player's
own CPU is its process's, not the server's), for N = 1, 4 and 16. The difference is the
restream: one 1280x720 H.264 encoder a source at 10 fps (libx264, ``ultrafast``,
``zerolatency``, 2 Mbps).

**Glass to glass.** One stamped 1280x720 10 fps camera (the tests' GStreamer RTSP camera:
each frame carries its send time in its pixels), one pipeline; each protocol played for
``--seconds`` by a PyAV (RTSP, HLS) or HTTP (MJPEG) reader decoding every frame and reading
its stamp: camera to picture, per frame. Beside them, the camera played directly, the floor
every restream sits on (the camera's own encoder and one RTSP hop).

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks restream'``.
Results: ``results/restream.json``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import av
import cv2
import httpx
import numpy as np

from benchmarks.cameras_per_box import _senders, make_clip
from benchmarks.common import CpuMeter, percentiles, stop_all, write_result

RESTREAM = {
    "restream_fps": "10",
    "restream_max_width": "1280",
    "restream_max_height": "720",
    "restream_keyframe_s": "1",
}
_IDENTITY = {
    "version": "1.0",
    "inputs": [{"type": "InferenceImage", "name": "image"}],
    "steps": [],
    "outputs": [{"type": "JsonField", "name": "shown", "selector": "$inputs.image"}],
}
_WARM_S = 6.0


def _pipeline(server: Any, url: str) -> str:
    body = {
        "video_configuration": {
            "type": "VideoConfiguration",
            "video_reference": url,
            "max_fps": 10,
        },
        "processing_configuration": {
            "type": "WorkflowConfiguration",
            "workflow_specification": _IDENTITY,
        },
    }
    answer = server.post("/inference_pipelines/initialise", json=body)
    answer.raise_for_status()
    return str(answer.json()["context"]["pipeline_id"])


def _listing(server: Any, pipeline_id: str) -> dict:
    answer = server.get(f"/inference_pipelines/{pipeline_id}/restream").json()
    return answer["sources"]["0"]


def _window(server: Any, meter: CpuMeter, ids: list[str], seconds: float) -> dict[str, float]:
    """The server's CPU over ``seconds``, and the restreams' encoded frames a second."""
    before = [_listing(server, i)["restream"]["encoded"] for i in ids]
    meter.start()
    time.sleep(seconds)  # the measuring window
    cpu = meter.stop()
    after = [_listing(server, i)["restream"]["encoded"] for i in ids]
    rates = [(a - b) / seconds for a, b in zip(after, before, strict=True)]
    return {"cpu": cpu, "slowest_fps": min(rates)}


def _player(url: str) -> subprocess.Popen[bytes]:
    """An RTSP player that receives every packet and decodes none (its CPU is its own)."""
    command = ["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i", url]
    command += ["-c", "copy", "-f", "null", "-"]
    return subprocess.Popen(command, stdin=subprocess.DEVNULL)


def cpu_per_source(count: int, clip: Path, rounds: int, seconds: float) -> dict[str, Any]:
    from tests.support.server import ServerProcess, free_port

    senders, urls = _senders(clip, count)
    server = ServerProcess(max_pipelines="64", restream_rtsp_port=str(free_port()), **RESTREAM)
    alone: list[float] = []
    played: list[float] = []
    fps: list[float] = []
    try:
        server.wait_ready()
        ids = [_pipeline(server, url) for url in urls]
        players_urls = [_listing(server, i)["urls"]["rtsp"] for i in ids]
        meter = CpuMeter(server.process.pid)
        time.sleep(_WARM_S)  # the readers' first GOPs
        for _ in range(rounds):
            alone.append(_window(server, meter, ids, seconds)["cpu"])
            players = [_player(url) for url in players_urls]
            try:
                time.sleep(_WARM_S)  # every player playing
                window = _window(server, meter, ids, seconds)
                played.append(window["cpu"])
                fps.append(window["slowest_fps"])
            finally:
                stop_all(players, 30)
            time.sleep(2.0)  # the encoders stopped with their last players
    finally:
        server.stop()
        stop_all(senders)
    extra = statistics.median(played) - statistics.median(alone)
    return {
        "sources": count,
        "pipelines_alone_cpu_percent": statistics.median(alone),
        "with_restreams_cpu_percent": statistics.median(played),
        "restream_cpu_percent_per_source": round(extra / count, 1),
        "slowest_restream_fps": round(min(fps), 2),
        "rounds": {"alone": alone, "with_restreams": played},
    }


_SETTLE_S = 3.0
"""A reader's first seconds are left out: FFmpeg's probing holds the first frames back, and
the reader then decodes them at once, late."""


def _ages_av(url: str, seconds: float, options: dict[str, str]) -> list[float]:
    from sources.synthetic import decode_stamp

    ages: list[float] = []
    deadline = time.monotonic() + seconds + _SETTLE_S + 30
    with av.open(url, options=options, timeout=30) as container:
        started = None
        for frame in container.decode(video=0):
            stamp = decode_stamp(frame.to_ndarray(format="bgr24"))
            now = time.monotonic()
            started = started or now
            if stamp is not None and now - started > _SETTLE_S:
                ages.append(stamp.age_ms())
            if now - started > seconds + _SETTLE_S or now > deadline:
                break
    return ages


def _ages_mjpeg(url: str, seconds: float) -> list[float]:
    from sources.synthetic import decode_stamp

    ages: list[float] = []
    buffer = b""
    with httpx.stream("GET", url, timeout=30) as response:
        started = time.monotonic() + _SETTLE_S
        for chunk in response.iter_bytes():
            buffer += chunk
            while (end := buffer.find(b"\xff\xd9")) >= 0:
                start = buffer.find(b"\xff\xd8")
                picture, buffer = buffer[max(start, 0) : end + 2], buffer[end + 2 :]
                image = cv2.imdecode(np.frombuffer(picture, np.uint8), cv2.IMREAD_COLOR)
                stamp = decode_stamp(image) if image is not None else None
                if stamp is not None and time.monotonic() > started:
                    ages.append(stamp.age_ms())
            if time.monotonic() - started > seconds:
                break
    return ages


def glass_to_glass(seconds: float) -> dict[str, Any]:
    from tests.support.camera import RTSPCamera
    from tests.support.server import ServerProcess, free_port

    figures: dict[str, Any] = {}
    with RTSPCamera(1280, 720, fps=10) as camera, tempfile.TemporaryDirectory():
        server = ServerProcess(restream_rtsp_port=str(free_port()), **RESTREAM)
        try:
            server.wait_ready()
            pipeline_id = _pipeline(server, camera.url)
            urls = _listing(server, pipeline_id)["urls"]
            time.sleep(_WARM_S)
            tcp = {"rtsp_transport": "tcp"}
            plays = {
                "camera_direct": lambda: _ages_av(camera.url, seconds, tcp),
                "rtsp": lambda: _ages_av(urls["rtsp"], seconds, tcp),
                "hls": lambda: _ages_av(urls["hls"], seconds, {}),
                "mjpeg": lambda: _ages_mjpeg(urls["mjpeg"], seconds),
            }
            for name, play in plays.items():
                ages = play()
                figures[name] = {"frames": len(ages), **percentiles(ages)}
        finally:
            server.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="1,4,16")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        clip = make_clip(Path(scratch) / "clip.ts")
        cpu = [
            cpu_per_source(int(n), clip, args.rounds, args.seconds) for n in args.counts.split(",")
        ]
    report = {"cpu": cpu, "glass_to_glass_ms": glass_to_glass(args.seconds), **RESTREAM}
    path = write_result("restream", report)
    print(path.read_text())
