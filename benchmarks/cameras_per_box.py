"""How many cameras one box watches: N cameras, one monitoring pipeline each, this checkout's
server (motion gating off, then on) against an earlier commit's, alternated.

The camera: a pre-encoded clip, H.264 1280x720 at 15 fps, 1 s GOP, no B-frames (as IP
cameras send), 20 s long. A person (cut
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

With ``--sub-streams COUNTS`` (this checkout only): each camera sends a 1920x1080 15 fps
main stream, recorded and never decoded, and a 640x360 5 fps sub-stream of the same scene,
decoded and detected on (``sub_streams``); results ``results/cameras_per_box_substreams.json``.

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks cameras-per-box
--before REV'`` (and ``--sub-streams 16,32,40``).
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import av
import cv2
import numpy as np

from benchmarks.ab import alternated, head
from benchmarks.common import ROOT, CpuMeter, stop_all, write_result

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


def make_clip(path: Path, size: tuple[int, int] = SIZE, fps: int = FPS) -> Path:
    """The camera's clip (see the module's text), as MPEG-TS, of ``size`` (rows, columns) at
    ``fps`` (a divisor of 15): the same scene at any size, the person as large in it."""
    from tests.conftest import PHOTO_DIRS

    photos = next(Path(p) for p in PHOTO_DIRS if p and (Path(p) / "horses.jpg").is_file())
    background = cv2.resize(cv2.imread(str(photos / "horses.jpg")), SIZE[::-1])
    person = _person()
    rng = np.random.default_rng(40)
    height, width = person.shape[:2]
    top = SIZE[0] - height - 40
    walk = WALK_S * FPS
    with av.open(str(path), "w", format="mpegts") as container:
        # No B-frames, as IP cameras send: a frame a packet, in display order.
        options = {"preset": "veryfast", "x264-params": "bframes=0"}
        stream = container.add_stream("libx264", rate=fps, options=options)
        stream.width, stream.height, stream.pix_fmt = size[1], size[0], "yuv420p"
        stream.codec_context.gop_size = fps
        stream.bit_rate = round(2_000_000 * size[0] * size[1] / (SIZE[0] * SIZE[1]))
        for index in range(0, (WALK_S + STILL_S) * FPS, FPS // fps):
            frame = background.copy()
            if index < walk:
                left = round((SIZE[1] - width) * index / (walk - 1))
                frame[top : top + height, left : left + width] = person
            noise = rng.normal(0, 2.0, frame.shape)
            frame = np.clip(frame + noise, 0, 255).astype(np.uint8)
            if size != SIZE:
                frame = cv2.resize(frame, size[::-1], interpolation=cv2.INTER_AREA)
            video = av.VideoFrame.from_ndarray(frame, format="bgr24")
            for packet in stream.encode(video):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


_HANDED_OUT: set[int] = set()
"""Ports given to cameras in this process: a later call never gives one again."""


def _free_ports(count: int) -> list[int]:
    """``count`` free UDP ports below the kernel's ephemeral range: a port the kernel hands
    out (a sender's own socket binds one) could otherwise be a camera's port by the time
    the server listens on it ("Address already in use")."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports: list[int] = []
    candidate = random.randrange(10_000, low - 2 * count - 1000)
    while len(ports) < count:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.bind(("127.0.0.1", candidate))
                if candidate not in _HANDED_OUT:
                    ports.append(candidate)
            except OSError:
                pass
        candidate += 1
    _HANDED_OUT.update(ports)
    return ports


def send(clip: Path, urls: list[str], phases: list[float] | None = None) -> None:
    """Cameras: ``clip``'s packets, never decoded, sent to each of ``urls`` as MPEG-TS in
    real time, looped with their timestamps going on (``ffmpeg -re -stream_loop -1 -c copy``
    per camera: the machines here have PyAV's FFmpeg, not its command). Camera ``i`` starts
    ``phases[i]`` of the way into the clip (0 to 1; at the keyframe before it): independent
    cameras do not all see the same thing at the same moment."""
    with av.open(str(clip)) as source:
        stream = source.streams.video[0]
        packets = [p for p in source.demux(stream) if p.pts is not None]
        outputs = [av.open(f"{url}?pkt_size=1316", "w", format="mpegts",
                           options={"flush_packets": "1"}) for url in urls]  # fmt: skip
        sent = [output.add_stream_from_template(stream) for output in outputs]
        time_base = stream.time_base
    # Paced by decode order, as a camera sends (the clip has no B-frames anyway).
    stamps = [p.dts if p.dts is not None else p.pts for p in packets]
    pts = [p.pts for p in packets]  # the packets' own, as each send rewrites them
    first = min(stamps)
    span = max(p.pts + (p.duration or 0) for p in packets) - first
    period = float(span * time_base)
    keys = [i for i, p in enumerate(packets) if p.is_keyframe] or [0]
    starts = [max((k for k in keys if float((stamps[k] - first) * time_base) <= f * period),
                  default=0) for f in (phases or [0.0] * len(urls))]  # fmt: skip
    began = time.perf_counter()
    # (due, camera, how many packets it has sent): the cameras' packets in time order.
    queue = [(0.0, camera, 0) for camera in range(len(urls))]
    while True:
        due, camera, count = heapq.heappop(queue)
        if (wait := began + due - time.perf_counter()) > 0:
            time.sleep(wait)  # pacing a camera in real time
        loops, index = divmod(starts[camera] + count, len(packets))
        packet = packets[index]
        # The camera's own timestamps: from 0 at its start, going on across loops.
        shift = loops * span - stamps[starts[camera]]
        packet.pts, packet.dts = pts[index] + shift, stamps[index] + shift
        packet.stream = sent[camera]
        outputs[camera].mux(packet)
        following = starts[camera] + count + 1
        next_loops, next_index = divmod(following, len(packets))
        next_due = (next_loops * period + float((stamps[next_index] - stamps[starts[camera]])
                                                * time_base))  # fmt: skip
        heapq.heappush(queue, (next_due, camera, count + 1))


def _senders(
    clip: Path, count: int, per_process: int = 1, stagger: bool = False
) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    """``count`` cameras sending ``clip``, ``per_process`` of them from each process; with
    ``stagger``, camera ``i`` starts ``i / count`` of the way into the clip, so that the
    person walks past a different camera at each moment (else all see it at once)."""
    urls = [f"udp://127.0.0.1:{port}" for port in _free_ports(count)]
    phases = [i / count if stagger else 0.0 for i in range(count)]
    code = "import json, sys; from pathlib import Path; "
    code += "from benchmarks.cameras_per_box import send; "
    code += "send(Path(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]))"
    senders = []
    for i in range(0, count, per_process):
        group = slice(i, i + per_process)
        command = [sys.executable, "-c", code, str(clip), json.dumps(urls[group]),
                   json.dumps(phases[group])]  # fmt: skip
        senders.append(subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL))
    return senders, urls


def _workflow(detect_only: bool = False) -> dict[str, Any]:
    """The default detector workflow (detections, boxes and labels drawn); ``detect_only``:
    its detections alone, nothing drawn (a headless monitor that stores events)."""
    from streaming.protocol.workflows import object_detection

    spec = object_detection()
    if detect_only:
        spec["steps"], spec["outputs"] = spec["steps"][:1], spec["outputs"][:1]
    return spec


def _body(
    url: str, gating: bool | None, sub: str | None, detect_only: bool = False
) -> dict[str, Any]:
    """The SDK's ``initialise`` body, with our fields: gating set, a sub-stream recorded."""
    video: dict[str, Any] = {"type": "VideoConfiguration", "video_reference": url,
                             "max_fps": MAX_FPS}  # fmt: skip
    body: dict[str, Any] = {
        "video_configuration": video,
        "processing_configuration": {"type": "WorkflowConfiguration",
                                     "workflow_specification": _workflow(detect_only)},
    }  # fmt: skip
    if gating is not None:
        body["motion_gating"] = {"enabled": gating}
    if sub is not None:
        video["sub_streams"] = {url: sub}
        record = {"mode": "continuous", "segment_seconds": 60}
        body["sink_configuration"] = {"type": "MemorySinkConfiguration", "record": record}
    return body


def _start(
    server: Any, url: str, gating: bool | None, sub: str | None = None, detect_only: bool = False
) -> str:
    """A pipeline on ``url``: through the SDK (the server's defaults), or the SDK's body
    with our fields."""
    if gating is None and sub is None and not detect_only:
        from inference_sdk import InferenceHTTPClient

        client = InferenceHTTPClient(api_url=server.url, api_key=None)
        started = client.start_inference_pipeline_with_workflow(
            video_reference=url, workflow_specification=_workflow(), max_fps=MAX_FPS
        )
        return str(started["context"]["pipeline_id"])
    answer = server.post(
        "/inference_pipelines/initialise", json=_body(url, gating, sub, detect_only)
    )
    answer.raise_for_status()
    return str(answer.json()["context"]["pipeline_id"])


def run_cameras(
    server_root: Path,
    clip: Path,
    count: int,
    gating: bool | None,
    sub_clip: Path | None = None,
    stagger: bool = False,
    detect_only: bool = False,
) -> dict:
    """``count`` cameras and pipelines on a fresh server from ``server_root``; with
    ``sub_clip``, each camera also sends that as its sub-stream, detected on, while ``clip``
    (the main stream) is recorded."""
    from tests.support.server import ServerProcess

    os.environ["VISIONSTREAM_BENCH_SERVER_ROOT"] = str(server_root)
    per_process = 1 if sub_clip is None else 8  # 2 x 32 sender processes would crowd 2 cores
    senders, urls = _senders(clip, count, per_process, stagger)
    subs: list[str | None] = [None] * count
    if sub_clip is not None:
        more, sub_urls = _senders(sub_clip, count, per_process, stagger)
        senders, subs = senders + more, list(sub_urls)
    sinks = tempfile.TemporaryDirectory(prefix="visionstream-bench-sinks-")
    server = ServerProcess(max_pipelines="64", sink_dir=sinks.name)
    try:
        server.wait_ready()
        ids = [_start(server, url, gating, sub, detect_only)
               for url, sub in zip(urls, subs, strict=True)]  # fmt: skip
        for pipeline_id in ids:
            server.wait_for_output(f"pipeline {pipeline_id[:8]} source 0: processing", timeout=90)

        def sources() -> list[dict]:
            """Each pipeline's source status, stamped with when it was read: 32 reads take
            a while on a loaded box, and each pipeline's rate is over its own window (one
            window for all would read a pipeline read early in one round and late in the
            other as a few percent slow or fast)."""
            read = []
            for i in ids:
                asked = time.perf_counter()
                report = server.get(f"/inference_pipelines/{i}/status").json()["report"]
                at = (asked + time.perf_counter()) / 2
                read.append({**report["sources_metadata"][0], "read_at": at})
            return read

        time.sleep(_WARM_S)  # warm-up: the models' first runs, the readers' first GOPs
        meter = CpuMeter(server.process.pid)
        cameras = [CpuMeter(sender.pid, children=False) for sender in senders]
        before = sources()
        meter.start()
        for camera in cameras:
            camera.start()
        time.sleep(_MEASURE_S)  # the measuring window: one loop of the clip
        after = sources()
        cpu = meter.stop()
        senders_cpu = sum(camera.stop() for camera in cameras)
        for pipeline_id in ids:
            server.post(f"/inference_pipelines/{pipeline_id}/terminate")
        recorded = sum(f.stat().st_size for f in Path(sinks.name).rglob("*.mp4"))
    finally:
        server.stop()
        stop_all(senders)
        sinks.cleanup()
        os.environ.pop("VISIONSTREAM_BENCH_SERVER_ROOT", None)
    return {**_figures(count, before, after, cpu, recorded),
            "senders_cpu_percent": round(senders_cpu, 1)}  # fmt: skip


def _figures(count: int, before: list[dict], after: list[dict], cpu: float,
             recorded: int) -> dict[str, Any]:  # fmt: skip
    rates = [(a["frames_processed"] - b["frames_processed"]) / (a["read_at"] - b["read_at"])
             for a, b in zip(after, before, strict=True)]  # fmt: skip
    figures: dict[str, Any] = {
        "cameras": count,
        "slowest_fps": round(min(rates), 2),
        "mean_fps": round(sum(rates) / len(rates), 2),
        "server_cpu_percent": cpu,
        "cpu_per_camera_percent": round(cpu / count, 1),
    }
    motion: list[dict[str, Any]] = [m for a in after if (m := a.get("motion"))]
    if motion and len(motion) == len(after):
        detected = sum(m["frames_detected"] for m in motion)
        gated = sum(m["frames_gated"] for m in motion)
        figures["gated_share"] = round(gated / max(1, detected + gated), 3)
    if recorded:
        figures["recorded_mb"] = round(recorded / 1e6, 1)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks cameras-per-box",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--before", required=True, help="main as it was before issue 40")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cameras", default="4,8,16", help="camera counts, comma-separated")
    parser.add_argument("--more", default="24,32", help="counts tried with gating only")
    parser.add_argument("--clip", type=Path, default=Path("/tmp/visionstream-camera-720p.ts"))
    parser.add_argument("--stagger", action="store_true",
                        help="camera i starts i/N of the way into the clip (independent "
                             "cameras), not all in step (the worst case)")  # fmt: skip
    parser.add_argument(
        "--detect-only",
        action="store_true",
        help="with --sub-streams: the detector alone, nothing drawn",
    )
    parser.add_argument("--variants", default="",
                        help="with --sub-streams: the server's environment per variant, "
                             "alternated, e.g. 'VISIONSTREAM_WORKFLOW_THREADS=4;"
                             "VISIONSTREAM_WORKFLOW_THREADS=16'")  # fmt: skip
    parser.add_argument(
        "--tag", default="", help="with --sub-streams: appended to the results' file name"
    )
    parser.add_argument("--against", default=None,
                        help="with --sub-streams: a commit whose server takes turns with this "
                             "checkout's")  # fmt: skip
    parser.add_argument("--sub-streams", default="",
                        help="instead: this checkout only, 1080p main streams recorded and "
                             "640x360 5 fps sub-streams detected on, for these counts")  # fmt: skip
    args = parser.parse_args(argv)
    from streaming.rtc.ice import restrict_host_addresses

    restrict_host_addresses(["127.0.0.1"])
    if args.sub_streams:
        variants = [dict(pair.split("=", 1) for pair in v.split(",") if pair)
                    for v in args.variants.split(";") if v] or None  # fmt: skip
        counts = [int(c) for c in args.sub_streams.split(",") if c]
        sub_streams(counts, args.stagger, variants, args.rounds, args.detect_only, args.tag,
                    args.against)  # fmt: skip
        return
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
            runs[name] = [run_cameras(root, clip, n, gating, None, args.stagger) for n in sizes]
        return runs

    rounds = alternated(args.before, args.rounds, measure)
    path = write_result("cameras_per_box" + ("_staggered" if args.stagger else ""), {
        "what": f"server at {args.before} (before) vs {head()} (after: motion gating off, "
                "then on), alternated",
        "clip": {"size": f"{SIZE[1]}x{SIZE[0]}", "fps": FPS, "walk_s": WALK_S,
                 "still_s": STILL_S, "max_fps": MAX_FPS},
        "rounds": rounds,
    })  # fmt: skip
    print(f"wrote {path}")


def sub_streams(
    counts: list[int], stagger: bool = False, variants: list[dict[str, str]] | None = None,
    rounds: int = 1,
    detect_only: bool = False,
    tag: str = "",
    against: str | None = None,
) -> None:  # fmt: skip
    """Cameras with a sub-stream: the main stream 1920x1080 at 15 fps, recorded (never
    decoded); the sub-stream 640x360 at 5 fps, decoded, gated and detected on. With
    ``variants`` (the server's environment, e.g. ``VISIONSTREAM_WORKFLOW_THREADS``), each count
    is run once per variant, alternated, ``rounds`` times: side by side on one machine.
    With ``against`` (a commit), its server and this checkout's take turns the same way."""
    clips = {}
    for name, size, fps in (("1080p", (1080, 1920), FPS), ("360p5", (360, 640), 5)):
        path = Path(f"/tmp/visionstream-camera-{name}.ts")
        clips[name] = path if path.is_file() else make_clip(path, size, fps)

    def measure(root: Path) -> list[dict[str, Any]]:
        runs = []
        for count in counts:
            for variant in variants or [{}]:
                with mock.patch.dict(os.environ, variant):  # the server process inherits it
                    run = run_cameras(root, clips["1080p"], count, None, clips["360p5"],
                                      stagger, detect_only)  # fmt: skip
                runs.append({**({"env": variant} if variant else {}), **run})
                print(json.dumps(runs[-1]), flush=True)
        return runs

    if against:  # this checkout and ``against``'s server, alternated
        runs: list[dict[str, Any]] = alternated(against, rounds, lambda r: {"runs": measure(r)})
    else:
        runs = [run for _ in range(rounds) for run in measure(ROOT)]
    name = "cameras_per_box_substreams" + ("_staggered" if stagger else "")
    name += "_detect_only" if detect_only else ""
    name += "_variants" if variants else ""
    name += f"_{tag}" if tag else ""
    path = write_result(name, {
        "what": f"{head()}: 1080p 15 fps main streams recorded, 640x360 5 fps sub-streams "
                "detected on (motion gating on); cameras "
                + ("staggered: camera i starts i/N into the clip" if stagger else "in step")
                + ("; the detector alone, nothing drawn" if detect_only else ""),
        "runs": runs,
    })  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
