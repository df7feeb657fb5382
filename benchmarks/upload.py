"""Uploaded-file throughput: the whole upload path vs. decode + inference alone, same run.

A 300-frame 640x480 H.264 clip (Debian's darknet photos, slowly panned; a synthetic pattern
when they are missing) goes through `visionstream serve` with the default detection workflow
in non-realtime mode, and the same clip is decoded (PyAV) and run through the same compiled
workflow in this process, one frame after the other, with no WebRTC. Upload-path fps counts
from the session's start (signaling, upload included) to its completion message. Baseline and
upload runs alternate, --rounds times, and each ratio uses the baseline measured next to it.

Run: ``python benchmarks/upload.py [--frames 300] [--rounds 2]``; the server is started twice,
with the default ACK window and with ``VISIONSTREAM_ACK_WINDOW=1``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inference_sdk import InferenceHTTPClient  # noqa: E402
from inference_sdk.webrtc import StreamConfig as SdkStreamConfig  # noqa: E402
from inference_sdk.webrtc import VideoFileSource as SdkVideoFileSource  # noqa: E402

from sources import FileSource, SyntheticSource  # noqa: E402
from streaming import Client, StreamConfig  # noqa: E402
from streaming.client import FrameSourceStream, VideoFileSource  # noqa: E402
from streaming.config import Settings  # noqa: E402
from streaming.inference.registry import ModelRegistry  # noqa: E402
from streaming.protocol.workflows import object_detection  # noqa: E402
from streaming.rtc.ice import restrict_host_addresses  # noqa: E402
from streaming.workflows import compile_workflow, parse_spec  # noqa: E402
from streaming.workflows.blocks.base import BuildContext, FrameState  # noqa: E402
from tests.conftest import PHOTO_DIRS  # noqa: E402
from tests.support.media import write_clip  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402

SIZE = (640, 480)
PHOTOS = ("person.jpg", "dog.jpg", "horses.jpg", "eagle.jpg", "giraffe.jpg", "kite.jpg")


def _panned_photos(frames: int) -> Iterator[np.ndarray] | None:
    folder = next((Path(d) for d in PHOTO_DIRS if d and (Path(d) / PHOTOS[0]).is_file()), None)
    if folder is None:
        return None
    width, height = SIZE
    scenes = [cv2.resize(cv2.imread(str(folder / n)), (width + 60, height + 45)) for n in PHOTOS]
    per_scene = max(1, frames // len(scenes))

    def frames_of() -> Iterator[np.ndarray]:
        for i in range(frames):
            scene = scenes[min(i // per_scene, len(scenes) - 1)]
            step = i % per_scene * 60 // per_scene
            yield scene[step * 3 // 4 : step * 3 // 4 + height, step : step + width]

    return frames_of()


def make_clip(path: Path, frames: int) -> tuple[Path, str]:
    images = _panned_photos(frames)
    if images is not None:
        return write_clip(path, images), "darknet photos, panned"
    synthetic = SyntheticSource(*SIZE, frames=frames, realtime=False)
    return write_clip(path, (f.image for f in synthetic)), "synthetic pattern"


def baseline(clip: Path, workflow) -> float:
    """Decode + workflow on one thread, no WebRTC: frames per second."""
    started = time.perf_counter()
    frames = 0
    with FileSource(clip) as source:
        for frame in source:
            workflow.run(frame.image, {}, FrameState())
            frames += 1
    return frames / (time.perf_counter() - started)


def _timed(run: Callable[[], int]) -> dict:
    started = time.perf_counter()
    frames = run()
    seconds = time.perf_counter() - started
    return {"frames": frames, "seconds": round(seconds, 3), "fps": round(frames / seconds, 2)}


def _count_results(url: str, source, config: StreamConfig) -> dict:
    """One session of our client, timed from its start to its completion message."""

    def run() -> int:
        session = Client(url).webrtc.stream(source(), workflow=object_detection(), config=config)
        count = 0
        with session:
            for _ in session.results():
                count += 1
        return count

    return _timed(run)


def ours(url: str, clip: Path, images_in_results: bool) -> dict:
    outputs = ["annotated"] if images_in_results else []
    config = StreamConfig(stream_output=outputs, data_output=["predictions"])
    return _count_results(url, lambda: VideoFileSource(clip), config)


def ours_track(url: str, clip: Path) -> dict:
    """The same frames as a client video track (VP8 over RTP), every frame processed: the
    client reads the file as fast as the server's ACKs let it."""
    config = StreamConfig(stream_output=[], data_output=["predictions"], realtime_processing=False)
    return _count_results(
        url, lambda: FrameSourceStream(lambda: FileSource(clip, realtime=False)), config
    )


def sdk(url: str, clip: Path) -> dict:
    """inference-sdk's VideoFileSource with its default StreamConfig: no ACKs."""

    def run() -> int:
        client = InferenceHTTPClient(api_url=url, api_key=None)
        config = SdkStreamConfig(data_output=["predictions"])
        session = client.webrtc.stream(
            source=SdkVideoFileSource(str(clip)), workflow=object_detection(), config=config
        )
        count = 0

        @session.on_data()
        def on_data(data, metadata):
            nonlocal count
            count += 1

        with session:
            session.wait()
        return count

    return _timed(run)


PATHS: dict[str, Callable[[str, Path], dict]] = {
    "ours, predictions only": lambda url, clip: ours(url, clip, False),
    "ours, annotated JPEG in every result": lambda url, clip: ours(url, clip, True),
    "inference-sdk VideoFileSource, no ACKs": sdk,
    "ours, client track, every frame": ours_track,
}


def measure(server_settings: dict[str, str], paths: list[str], clip: Path, workflow, rounds: int):
    server = ServerProcess(**server_settings)
    runs: dict[str, list[dict]] = {name: [] for name in paths}
    try:
        server.wait_ready()
        for _ in range(rounds):
            for name in paths:
                base = baseline(clip, workflow)
                result = PATHS[name](server.url, clip)
                result["baseline_fps"] = round(base, 2)
                result["ratio"] = round(result["fps"] / base, 3)
                runs[name].append(result)
                print(f"{name:40s} {result['fps']:6.2f} fps, baseline {base:6.2f}: "
                      f"ratio {result['ratio']:.3f}", flush=True)  # fmt: skip
    finally:
        server.stop()
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/upload.json"))
    args = parser.parse_args()
    restrict_host_addresses(["127.0.0.1"])
    settings = Settings()
    workflow = compile_workflow(
        parse_spec(object_detection()), BuildContext(ModelRegistry(settings))
    )
    with tempfile.TemporaryDirectory() as folder:
        clip, content = make_clip(Path(folder) / "clip.mp4", args.frames)
        baseline(clip, workflow)  # warm-up: model, page cache
        report = {
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}",
            "clip": {
                "frames": args.frames,
                "size": SIZE,
                "fps": 30,
                "content": content,
                "bytes": clip.stat().st_size,
            },
            "ack_window": {
                str(settings.ack_window): measure({}, list(PATHS), clip, workflow, args.rounds),
                "1": measure(
                    {"ack_window": "1"}, ["ours, predictions only"], clip, workflow, args.rounds
                ),
            },
        }
    summary = {}
    for window, runs in report["ack_window"].items():
        for name, results in runs.items():
            summary[f"{name} (window {window})"] = round(
                float(np.median([r["ratio"] for r in results])), 3
            )
    report["median_ratio"] = summary
    print(json.dumps(summary, indent=2))
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
