"""How many cameras one box watches: N cameras, one monitoring pipeline each, this checkout's
server (motion gating off, then on) against an earlier commit's, alternated.

The camera: a pre-encoded clip, H.264 1280x720 at 15 fps, 1 s GOP, 20 s long. A person (cut
from the Debian darknet photo along the default model's box) walks across a street photo
for 8 s, then nothing moves for 12 s, as most camera time goes; a little sensor noise on
every frame. Each camera is a process that sends the clip's packets as they are (``ffmpeg
-re -stream_loop -1 -c copy``, through PyAV) to ``udp://127.0.0.1:PORT`` as MPEG-TS, so the
cameras cost almost nothing and nothing of theirs counts as the server's CPU. One pipeline per
camera runs the default detector workflow (detections, boxes and labels drawn) with
``max_fps: 5``, started through the published ``inference-sdk`` (``motion_gating`` is our
field: the gating-off variant posts the SDK's body with it, which the earlier server
ignores). Over one whole loop of the clip (20 s) after a 6 s warm-up: each pipeline's
results a second (the slowest and the mean), and the server's CPU (% of one core), also
per camera. Results: ``results/cameras_per_box.json``; ``python -m benchmarks plots`` draws
it.

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks cameras-per-box
--before REV'``.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np

from benchmarks.ab import alternated, head
from benchmarks.common import ROOT, CpuMeter, write_result

FPS = 15
SIZE = (720, 1280)  # rows, columns
WALK_S, STILL_S = 8, 12
MAX_FPS = 5.0
_WARM_S = 6.0
_MEASURE_S = float(WALK_S + STILL_S)  # one loop of the clip


def _person() -> np.ndarray:
    """The person of person.jpg, cut along the default model's own box (as the tests do)."""
    from streaming.config import Settings
    from streaming.inference.decoders import DecodeOptions
    from streaming.inference.registry import ModelRegistry
    from tests.conftest import INSTALLED_MODELS, PHOTO_DIRS, load_photo

    photos = next(Path(p) for p in PHOTO_DIRS if p and (Path(p) / "person.jpg").is_file())
    registry = ModelRegistry(Settings(models_dir=INSTALLED_MODELS))
    try:
        image = load_photo(photos, "person.jpg")
        found = registry.get("yolov3-tiny-416").detect(image, DecodeOptions(confidence=0.5))
    finally:
        registry.close()
    people = found[found.data["class_name"] == "person"]
    x1, y1, x2, y2 = people.xyxy[int(np.argmax(people.confidence))].astype(int)
    return image[y1:y2, x1:x2].copy()


def make_clip(path: Path) -> Path:
    """The camera's clip (see the module's text), as MPEG-TS."""
    from tests.conftest import PHOTO_DIRS

    photos = next(Path(p) for p in PHOTO_DIRS if p and (Path(p) / "horses.jpg").is_file())
    background = cv2.resize(cv2.imread(str(photos / "horses.jpg")), SIZE[::-1])
    person = _person()
    rng = np.random.default_rng(40)
    height, width = person.shape[:2]
    top = SIZE[0] - height - 40
    walk = WALK_S * FPS
    with av.open(str(path), "w", format="mpegts") as container:
        stream = container.add_stream("libx264", rate=FPS, options={"preset": "veryfast"})
        stream.width, stream.height, stream.pix_fmt = SIZE[1], SIZE[0], "yuv420p"
        stream.codec_context.gop_size = FPS
        stream.bit_rate = 2_000_000
        for index in range((WALK_S + STILL_S) * FPS):
            frame = background.copy()
            if index < walk:
                left = round((SIZE[1] - width) * index / (walk - 1))
                frame[top : top + height, left : left + width] = person
            noise = rng.normal(0, 2.0, frame.shape)
            frame = np.clip(frame + noise, 0, 255).astype(np.uint8)
            video = av.VideoFrame.from_ndarray(frame, format="bgr24")
            for packet in stream.encode(video):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def send(clip: Path, url: str) -> None:
    """A camera: ``clip``'s packets, never decoded, sent to ``url`` as MPEG-TS in real
    time, looped with their timestamps going on (``ffmpeg -re -stream_loop -1 -c copy``:
    the machines here have PyAV's FFmpeg, not its command)."""
    loop_at = time.perf_counter()
    offset = 0
    with av.open(f"{url}?pkt_size=1316", "w", format="mpegts",
                 options={"flush_packets": "1"}) as output:  # fmt: skip
        with av.open(str(clip)) as source:
            stream = source.streams.video[0]
            sent = output.add_stream_from_template(stream)
            span = 0
            while True:
                source.seek(0)
                for packet in source.demux(stream):
                    if packet.pts is None:
                        continue
                    due = loop_at + float((packet.pts - stream.start_time) * stream.time_base)
                    if (wait := due - time.perf_counter()) > 0:
                        time.sleep(wait)  # pacing a camera in real time
                    span = max(span, packet.pts - stream.start_time + (packet.duration or 0))
                    packet.pts += offset
                    packet.dts = None if packet.dts is None else packet.dts + offset
                    packet.stream = sent
                    output.mux(packet)
                offset += span
                loop_at += float(span * stream.time_base)


def _senders(clip: Path, count: int) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    urls = [f"udp://127.0.0.1:{_free_port()}" for _ in range(count)]
    code = "import sys; from pathlib import Path; from benchmarks.cameras_per_box import send; "
    code += "send(Path(sys.argv[1]), sys.argv[2])"
    senders = [
        subprocess.Popen([sys.executable, "-c", code, str(clip), url], cwd=ROOT,
                         stdin=subprocess.DEVNULL)  # fmt: skip
        for url in urls
    ]
    return senders, urls


def _start(server: Any, url: str, gating: bool | None) -> str:
    """A pipeline on ``url``: through the SDK (the server's default gating), or the SDK's
    body with ``motion_gating`` set."""
    from inference_sdk import InferenceHTTPClient

    from streaming.protocol.workflows import object_detection

    if gating is None:
        client = InferenceHTTPClient(api_url=server.url, api_key=None)
        started = client.start_inference_pipeline_with_workflow(
            video_reference=url, workflow_specification=object_detection(), max_fps=MAX_FPS
        )
        return str(started["context"]["pipeline_id"])
    answer = server.post("/inference_pipelines/initialise", json={
        "video_configuration": {"type": "VideoConfiguration", "video_reference": url,
                                "max_fps": MAX_FPS},
        "processing_configuration": {"type": "WorkflowConfiguration",
                                     "workflow_specification": object_detection()},
        "motion_gating": {"enabled": gating},
    })  # fmt: skip
    answer.raise_for_status()
    return str(answer.json()["context"]["pipeline_id"])


def run_cameras(server_root: Path, clip: Path, count: int, gating: bool | None) -> dict:
    """``count`` cameras and pipelines on a fresh server from ``server_root``."""
    from tests.support.server import ServerProcess

    os.environ["VISIONSTREAM_BENCH_SERVER_ROOT"] = str(server_root)
    senders, urls = _senders(clip, count)
    server = ServerProcess(max_pipelines="64")
    try:
        server.wait_ready()
        ids = [_start(server, url, gating) for url in urls]
        for pipeline_id in ids:
            server.wait_for_output(f"pipeline {pipeline_id[:8]} source 0: processing", timeout=90)

        def sources() -> list[dict]:
            return [
                server.get(f"/inference_pipelines/{i}/status").json()["report"][
                    "sources_metadata"][0]
                for i in ids
            ]  # fmt: skip

        time.sleep(_WARM_S)  # warm-up: the models' first runs, the readers' first GOPs
        meter = CpuMeter(server.process.pid)
        before, start = sources(), time.perf_counter()
        meter.start()
        time.sleep(_MEASURE_S)  # the measuring window: one loop of the clip
        after, elapsed = sources(), time.perf_counter() - start
        cpu = meter.stop()
        for pipeline_id in ids:
            server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    finally:
        server.stop()
        for sender in senders:
            sender.terminate()
        for sender in senders:
            sender.wait(10)
        os.environ.pop("VISIONSTREAM_BENCH_SERVER_ROOT", None)
    rates = [(a["frames_processed"] - b["frames_processed"]) / elapsed
             for a, b in zip(after, before, strict=True)]  # fmt: skip
    figures: dict[str, Any] = {
        "cameras": count,
        "slowest_fps": round(min(rates), 2),
        "mean_fps": round(sum(rates) / len(rates), 2),
        "server_cpu_percent": cpu,
        "cpu_per_camera_percent": round(cpu / count, 1),
    }
    motion = [a.get("motion") for a in after]
    if all(motion):
        detected = sum(m["frames_detected"] for m in motion)
        gated = sum(m["frames_gated"] for m in motion)
        figures["gated_share"] = round(gated / max(1, detected + gated), 3)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks cameras-per-box",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--before", required=True, help="main as it was before issue 40")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cameras", default="4,8,16", help="camera counts, comma-separated")
    parser.add_argument("--more", default="24,32", help="counts tried with gating only")
    parser.add_argument("--clip", type=Path, default=Path("/tmp/visionstream-camera-720p.ts"))
    args = parser.parse_args(argv)
    from streaming.rtc.ice import restrict_host_addresses

    restrict_host_addresses(["127.0.0.1"])
    clip = args.clip if args.clip.is_file() else make_clip(args.clip)
    counts = [int(c) for c in args.cameras.split(",") if c]
    more = [int(c) for c in args.more.split(",") if c]

    def measure(root: Path) -> dict[str, Any]:
        earlier = root.resolve() != Path(__file__).resolve().parents[1]
        variants: dict[str, bool | None] = (
            {"before": None} if earlier else {"gating_off": False, "gating_on": None}
        )
        runs: dict[str, Any] = {}
        for name, gating in variants.items():
            sizes = counts + ([] if earlier or gating is False else more)
            runs[name] = [run_cameras(root, clip, n, gating) for n in sizes]
        return runs

    rounds = alternated(args.before, args.rounds, measure)
    path = write_result("cameras_per_box", {
        "what": f"server at {args.before} (before) vs {head()} (after: motion gating off, "
                "then on), alternated",
        "clip": {"size": f"{SIZE[1]}x{SIZE[0]}", "fps": FPS, "walk_s": WALK_S,
                 "still_s": STILL_S, "max_fps": MAX_FPS},
        "rounds": rounds,
    })  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
