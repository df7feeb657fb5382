"""Per-frame time in each stage at 640x480 with the default model, through the real server.

Streams photos from a loopback aiortc peer to `visionstream serve` (non-realtime, so every
frame is processed) and collects the timings each result carries in ``video_metadata``.
The codec stages happen inside aiortc on both peers; they are timed here by running aiortc's
own VP8 decoder and encoder on the same frames. JSON + gzip is timed on the received
messages. Run: ``python benchmarks/stages.py [--frames 300] [--fps 15]``.
"""

from __future__ import annotations

import argparse
import asyncio
import fractions
import gzip
import json
import os
import platform
import sys
import time
from pathlib import Path

import av
import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiortc.codecs import get_decoder, get_encoder  # noqa: E402
from aiortc.codecs.vpx import vp8_depayload  # noqa: E402
from aiortc.jitterbuffer import JitterFrame  # noqa: E402
from aiortc.rtcrtpparameters import RTCRtpCodecParameters  # noqa: E402

from streaming.rtc.ice import restrict_host_addresses  # noqa: E402
from tests.conftest import DETECT_SPEC, PHOTO_DIRS  # noqa: E402
from tests.support.peer import LoopbackPeer  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402

SERVER_STAGES = [
    "convert",
    "preprocess",
    "inference",
    "postprocess",
    "annotate",
    "output_frame",
    "serialize",
]
NOT_OVERHEAD = {"inference", "decode", "encode"}


def _photos() -> list[np.ndarray]:
    folder = next(Path(d) for d in PHOTO_DIRS if d and (Path(d) / "person.jpg").is_file())
    names = ["person.jpg", "dog.jpg", "horses.jpg", "kite.jpg", "eagle.jpg", "giraffe.jpg"]
    return [cv2.resize(cv2.imread(str(folder / n)), (640, 480)) for n in names]


def _percentiles(values: list[float]) -> dict[str, float]:
    array = np.asarray(values)
    return {
        "p50": float(np.percentile(array, 50)),
        "p95": float(np.percentile(array, 95)),
        "mean": float(array.mean()),
    }


def codec_timings(images: list[np.ndarray], frames: int) -> dict[str, list[float]]:
    """aiortc's VP8 encoder and decoder, one thread each as aiortc runs them."""
    codec = RTCRtpCodecParameters(mimeType="video/VP8", clockRate=90000, payloadType=96)
    encoder, decoder = get_encoder(codec), get_decoder(codec)
    encode_ms, decode_ms = [], []
    for i in range(frames):
        frame = av.VideoFrame.from_ndarray(images[i % len(images)], format="bgr24")
        frame = frame.reformat(format="yuv420p")  # what the server hands the encoder
        frame.pts, frame.time_base = i * 3000, fractions.Fraction(1, 90000)
        t0 = time.perf_counter()
        payloads, timestamp = encoder.encode(frame)
        t1 = time.perf_counter()
        data = b"".join(vp8_depayload(p) for p in payloads)
        t2 = time.perf_counter()
        decoder.decode(JitterFrame(data=data, timestamp=timestamp))
        t3 = time.perf_counter()
        encode_ms.append((t1 - t0) * 1000)
        decode_ms.append((t3 - t2) * 1000)
    return {"encode": encode_ms[5:], "decode": decode_ms[5:]}  # skip codec start-up


async def stream(url: str, images: list[np.ndarray], frames: int, fps: float) -> list[dict]:
    peer = LoopbackPeer(url)
    response = await peer.connect(spec=DETECT_SPEC, webrtc_realtime_processing=False)
    response.raise_for_status()
    await asyncio.wait_for(peer.connected.wait(), 10)
    try:
        for i in range(frames + 1):  # +1: the receiver releases a frame when the next arrives
            peer.track.send(images[i % len(images)])
            await asyncio.sleep(1 / fps)  # input pacing: the source's frame rate
        await peer.wait_for(lambda: len(peer.results) >= frames, timeout=120)
    finally:
        await peer.close()
    return peer.results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--fps", type=float, default=15.0)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/stages.json"))
    args = parser.parse_args()

    restrict_host_addresses(["127.0.0.1"])
    images = _photos()
    server = ServerProcess()
    try:
        server.wait_ready()
        results = asyncio.run(stream(server.url, images, args.frames, args.fps))
    finally:
        server.stop()

    frames = [r for r in results if not r["processing_complete"]][: args.frames]
    stages: dict[str, list[float]] = {s: [] for s in SERVER_STAGES}
    stages["buffer_wait"] = [r["video_metadata"]["queue_wait_ms"] for r in frames]
    for r in frames:
        for stage in SERVER_STAGES:
            stages[stage].append(r["video_metadata"]["stage_ms"].get(stage, 0.0))
    # Sending message k is reported in message k+1.
    stages["send"] = [r["video_metadata"]["previous_send_ms"] for r in frames[1:]]
    json_gzip = []
    for r in frames:
        message = {k: v for k, v in r.items() if k != "_gzipped"}
        t0 = time.perf_counter()
        gzip.compress(json.dumps(message, separators=(",", ":")).encode(), compresslevel=6)
        json_gzip.append((time.perf_counter() - t0) * 1000)
    stages["json_gzip"] = json_gzip
    stages.update(codec_timings(images, len(frames) + 5))

    n = min(len(v) for v in stages.values())
    per_frame_overhead = [
        sum(stages[s][i] for s in stages if s not in NOT_OVERHEAD) for i in range(n)
    ]
    per_frame_total = [sum(stages[s][i] for s in stages) for i in range(n)]
    report = {
        "frames": len(frames),
        "resolution": "640x480",
        "model": "yolov3-tiny-416",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "stages_ms": {s: _percentiles(v) for s, v in stages.items()},
        "overhead_ms": _percentiles(per_frame_overhead),
        "total_ms": _percentiles(per_frame_total),
    }
    order = ["decode", "buffer_wait", *SERVER_STAGES, "json_gzip", "send", "encode"]
    print(f"{len(frames)} frames at 640x480, yolov3-tiny-416, {report['machine']}")
    print(f"{'stage':<14}{'p50 ms':>9}{'p95 ms':>9}")
    for stage in order:
        p = report["stages_ms"][stage]
        print(f"{stage:<14}{p['p50']:>9.2f}{p['p95']:>9.2f}")
    o, t = report["overhead_ms"], report["total_ms"]
    print(f"{'total':<14}{t['p50']:>9.2f}{t['p95']:>9.2f}")
    print(
        f"{'not infer/codec':<14}{o['p50']:>9.2f}{o['p95']:>9.2f}"
        f"   ({100 * o['p50'] / t['p50']:.0f}% of the total at p50)"
    )
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
