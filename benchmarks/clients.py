"""Our client vs. the published inference-sdk client, side by side on one server.

Both stream the same live synthetic feed (640x480 at --fps, frames stamped with their send
time) to one `visionstream serve` with the default detection workflow, realtime processing,
annotated video back. Each returned frame's stamp gives its end-to-end latency on this
machine's clock; frames are counted at the receiving program. The two clients run one after
the other, --rounds times, alternating, so drift on a shared machine hits both.

Run: ``python benchmarks/clients.py [--frames 150] [--fps 30] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inference_sdk import InferenceHTTPClient  # noqa: E402
from inference_sdk.webrtc import ManualSource as SdkManualSource  # noqa: E402
from inference_sdk.webrtc import StreamConfig as SdkStreamConfig  # noqa: E402

from sources import SyntheticSource, decode_stamp  # noqa: E402
from streaming import Client, StreamConfig  # noqa: E402
from streaming.client import FrameSourceStream  # noqa: E402
from streaming.protocol.workflows import object_detection  # noqa: E402
from streaming.rtc.ice import restrict_host_addresses  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402

SIZE = (640, 480)


def _summary(ages: list[float], indices: set[int], frames: int) -> dict:
    array = np.asarray(ages) if ages else np.asarray([np.nan])
    return {
        "frames_back": len(indices),
        "delivered": round(len(indices) / frames, 3),
        "latency_ms_p50": round(float(np.percentile(array, 50)), 1),
        "latency_ms_p95": round(float(np.percentile(array, 95)), 1),
    }


def run_ours(url: str, frames: int, fps: float) -> dict:
    source = FrameSourceStream(lambda: SyntheticSource(*SIZE, fps=fps, frames=frames))
    config = StreamConfig(stream_output=["annotated"], data_output=["predictions"])
    session = Client(url).webrtc.stream(source, workflow=object_detection(), config=config)
    ages, indices = [], set()
    with session:
        for frame, _ in session.video():
            if (stamp := decode_stamp(frame)) is not None:
                ages.append(stamp.age_ms())
                indices.add(stamp.index)
    return _summary(ages, indices, frames)


def run_sdk(url: str, frames: int, fps: float) -> dict:
    source = SdkManualSource()
    config = SdkStreamConfig(stream_output=["annotated"], data_output=["predictions"])
    client = InferenceHTTPClient(api_url=url, api_key=None)
    session = client.webrtc.stream(source=source, workflow=object_detection(), config=config)
    ages, indices = [], set()
    feed = SyntheticSource(*SIZE, fps=fps, frames=frames)
    sent: list[int] = []

    def send() -> None:
        for frame in feed:  # a live feed, paced by the source itself
            try:
                source.send(frame.image)
                sent.append(frame.index)
            except RuntimeError:
                pass  # the SDK session is not up yet: a live frame is simply missed
        # The SDK has no end of stream for a manual source: stop once the tail had time.
        threading.Timer(3.0, session.close).start()

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    with session:
        for frame, _ in session.video():
            if (stamp := decode_stamp(frame)) is not None:
                ages.append(stamp.age_ms())
                indices.add(stamp.index)
    sender.join()
    result = _summary(ages, indices, max(1, len(sent)))
    result["frames_sent"] = len(sent)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("--fps", type=float, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/clients.json"))
    args = parser.parse_args()
    restrict_host_addresses(["127.0.0.1"])
    server = ServerProcess()
    try:
        server.wait_ready()
        runs: dict[str, list[dict]] = {"visionstream": [], "inference-sdk": []}
        for _ in range(args.rounds):
            runs["visionstream"].append(run_ours(server.url, args.frames, args.fps))
            runs["inference-sdk"].append(run_sdk(server.url, args.frames, args.fps))
    finally:
        server.stop()
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}",
        "frames": args.frames,
        "fps": args.fps,
        "size": SIZE,
        "runs": runs,
    }
    for name, results in runs.items():
        p50 = np.median([r["latency_ms_p50"] for r in results])
        delivered = np.median([r["delivered"] for r in results])
        print(f"{name:14s} latency p50 {p50:6.1f} ms, delivered {delivered:.1%}")
    ours, sdk = (np.median([r["latency_ms_p50"] for r in runs[k]]) for k in runs)
    report["latency_p50_ratio_sdk_over_ours"] = round(float(sdk / ours), 2)
    print(f"inference-sdk / visionstream p50 latency: {sdk / ours:.2f}")
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
