"""VP8 against H.264 for the video both ways: CPU per frame to encode (what the server spends
on each returned frame) and to decode (what it spends on each frame a client sends), at
640x480 and 1280x720, in one run.

Encoders: aiortc's VP8 and ours (denoiser off), aiortc's H.264 (libx264 at its default
preset) and ours (``veryfast``), each at the bitrate the server's defaults give that size
(3,000 kbit/s per megapixel, at most 1.5 Mbit/s). Decoders: libvpx and FFmpeg's h264, as
aiortc's receivers use them. Content: Debian's darknet photos slowly panned (a synthetic
pattern without them). CPU is the process's (every encoder thread counted); PSNR is the
decoded frame against the one encoded. Run: ``python -m benchmarks codecs [--frames 300]``.
"""

from __future__ import annotations

import argparse
import json
import time
from fractions import Fraction

import av
import cv2
import numpy as np
from aiortc.codecs import h264, vpx

from benchmarks.common import write_result
from benchmarks.encoder import contents
from streaming.rtc.encoder import BitrateLimits, H264Encoder, Vp8Encoder, bitrate_cap

SIZES = ((640, 480), (1280, 720))
KBPS_PER_MEGAPIXEL = 3000  # the server's default cap
MAX_BITRATE = 1_500_000  # the server's default VISIONSTREAM_VIDEO_MAX_KBPS


def encoders(bitrate: int) -> dict[str, tuple[object, str]]:
    limits = BitrateLimits(start=bitrate, minimum=bitrate // 4, maximum=bitrate)
    aiortc_vp8, aiortc_h264 = vpx.Vp8Encoder(), h264.H264Encoder()
    return {
        "VP8 aiortc": (aiortc_vp8, "libvpx"),
        "VP8 ours": (Vp8Encoder(limits=limits), "libvpx"),
        "H.264 aiortc": (aiortc_h264, "h264"),
        "H.264 ours": (H264Encoder(limits), "h264"),
    }


def depayload(name: str, payloads: list[bytes]) -> bytes:
    if name.startswith("VP8"):
        return b"".join(vpx.vp8_depayload(p) for p in payloads)
    return b"".join(h264.h264_depayload(p) for p in payloads)  # Annex B, start codes in


def run(name: str, encoder, decoder_name: str, images: list[np.ndarray], bitrate: int) -> dict:
    encoder.target_bitrate = bitrate
    decoder = av.CodecContext.create(decoder_name, "r")
    encode_cpu = encode_wall = decode_cpu = 0.0
    size, psnr, decoded_frames = 0, [], 0
    for i, image in enumerate(images):
        frame = av.VideoFrame.from_ndarray(image, format="bgr24").reformat(format="yuv420p")
        frame.pts, frame.time_base = i * 3000, Fraction(1, 90000)
        cpu, wall = time.process_time(), time.perf_counter()
        payloads, _ = encoder.encode(frame, force_keyframe=i == 0)
        encode_cpu += time.process_time() - cpu
        encode_wall += time.perf_counter() - wall
        data = depayload(name, payloads)
        size += len(data)
        if not data:
            continue
        cpu = time.process_time()
        decoded = decoder.decode(av.Packet(data))
        decode_cpu += time.process_time() - cpu
        for out in decoded:
            decoded_frames += 1
            psnr.append(cv2.PSNR(out.to_ndarray(format="bgr24"), image))
    count = len(images)
    return {
        "encode_cpu_ms": round(1000 * encode_cpu / count, 2),
        "encode_wall_ms": round(1000 * encode_wall / count, 2),
        "decode_cpu_ms": round(1000 * decode_cpu / max(decoded_frames, 1), 2),
        "kbit_s": round(size * 8 * 30 / count / 1000),
        "psnr_db": round(float(np.mean(psnr)), 2) if psnr else None,
        "frames_decoded": decoded_frames,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks codecs", description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2, help="alternated rounds per encoder")
    args = parser.parse_args(argv)
    base = next(iter(contents(args.frames).values()))  # the clean 640x480 frames
    rows = []
    for width, height in SIZES:
        images = [np.ascontiguousarray(cv2.resize(i, (width, height))) for i in base]
        bitrate = min(bitrate_cap(width, height, KBPS_PER_MEGAPIXEL) or MAX_BITRATE, MAX_BITRATE)
        for round_ in range(args.rounds):
            for name, (encoder, decoder) in encoders(bitrate).items():
                row = {"size": f"{width}x{height}", "bitrate": bitrate, "codec": name,
                       "round": round_}  # fmt: skip
                row.update(run(name, encoder, decoder, images, bitrate))
                rows.append(row)
                print(json.dumps(row), flush=True)
    path = write_result("codecs", {"frames": args.frames, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
