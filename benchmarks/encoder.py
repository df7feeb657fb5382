"""aiortc's VP8 encoder against ours (the same, denoiser off): encode time, bitrate and
fidelity to the frames handed in, on the same 640x480 frames in one run.

Two contents: Debian's darknet photos, slowly panned (a synthetic pattern without them), and
the same with camera-like noise (sigma 3). Each at 500 kbit/s (aiortc's starting bitrate)
and 1.5 Mbit/s (where REMB takes it on a LAN). Fidelity is the PSNR of the decoded frame
against the frame encoded. Run: ``python -m benchmarks encoder [--frames 300]``.
"""

from __future__ import annotations

import argparse
import json
import time
from fractions import Fraction

import av
import cv2
import numpy as np
from aiortc.codecs import vpx
from aiortc.codecs.vpx import vp8_depayload

from benchmarks.common import write_result
from benchmarks.upload import SIZE, _panned_photos
from sources import SyntheticSource
from streaming.rtc.encoder import Vp8Encoder


def contents(frames: int) -> dict[str, list[np.ndarray]]:
    photos = _panned_photos(frames)
    name = "photos" if photos is not None else "synthetic"
    if photos is None:
        photos = (f.image for f in SyntheticSource(*SIZE, frames=frames, realtime=False))
    clean = [np.ascontiguousarray(image) for image in photos]
    rng = np.random.default_rng(0)
    noisy = [
        np.clip(image + rng.normal(0, 3, image.shape), 0, 255).astype(np.uint8) for image in clean
    ]
    return {name: clean, f"{name} + noise": noisy}


def run(encoder, images: list[np.ndarray], bitrate: int) -> dict:
    encoder.target_bitrate = bitrate
    decoder = av.CodecContext.create("libvpx", "r")
    spent, size, psnr = 0.0, 0, []
    for i, image in enumerate(images):
        frame = av.VideoFrame.from_ndarray(image, format="bgr24").reformat(format="yuv420p")
        frame.pts, frame.time_base = i * 3000, Fraction(1, 90000)
        started = time.perf_counter()
        payloads, _ = encoder.encode(frame)
        spent += time.perf_counter() - started
        data = b"".join(vp8_depayload(p) for p in payloads)
        size += len(data)
        decoded = decoder.decode(av.Packet(data))[0].to_ndarray(format="bgr24")
        psnr.append(cv2.PSNR(decoded, image))
    return {
        "encode_ms": round(1000 * spent / len(images), 2),
        "kbit_s": round(size * 8 * 30 / len(images) / 1000),
        "psnr_db": round(float(np.mean(psnr)), 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks encoder", description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300)
    args = parser.parse_args(argv)
    rows = []
    for content, images in contents(args.frames).items():
        for bitrate in (500_000, 1_500_000):
            for name, make in (("aiortc", vpx.Vp8Encoder), ("ours", Vp8Encoder)):
                row = {"content": content, "bitrate": bitrate, "encoder": name}
                row.update(run(make(), images, bitrate))
                rows.append(row)
                print(json.dumps(row), flush=True)
    path = write_result("encoder", {"frames": args.frames, "size": list(SIZE), "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
