"""One restream's pictures as H.264 (PyAV: libx264 or the hardware encoder the operator
names) and as JPEG; sizes fitted to the restream's bounds."""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import av
import cv2
import numpy as np
from av.video.frame import PictureType

__all__ = [
    "RTP_CLOCK",
    "TIME_BASE",
    "EncodedFrame",
    "H264Encoding",
    "add_h264_stream",
    "fitted_size",
    "jpeg",
    "muxed",
]

log = logging.getLogger(__name__)

RTP_CLOCK = 90_000
"""Every restream's timestamps are in 1/90000 s: RTP's video clock, MPEG-TS's too."""
TIME_BASE = Fraction(1, RTP_CLOCK)
FALLBACK = "libx264"

_OPTIONS: dict[str, dict[str, str]] = {
    # Low latency: no B-frames, no lookahead; SPS/PPS before every IDR so a player can join
    # at any keyframe (FFmpeg turns x264's repeat-headers off only for global headers).
    "libx264": {"preset": "ultrafast", "tune": "zerolatency", "forced-idr": "1"},
    "h264_nvenc": {"preset": "p1", "tune": "ll", "zerolatency": "1", "forced-idr": "1"},
    "h264_qsv": {"preset": "veryfast", "forced_idr": "1"},
    "h264_vaapi": {},
}


@dataclass(frozen=True)
class EncodedFrame:
    """One encoded picture: Annex-B H.264 access unit, its 90 kHz timestamp."""

    data: bytes
    pts: int
    keyframe: bool


def add_h264_stream(container: av.container.OutputContainer, keyframe: EncodedFrame) -> Any:
    """A stream of ``container`` for the restream's H.264, its parameters (size, profile,
    SPS and PPS as extradata: FLV and RTSP need them) read from ``keyframe``. Copied from a
    demuxed template, so that no encoder is opened for a stream that only muxes."""
    with av.open(io.BytesIO(keyframe.data), format="h264") as parsed:
        return container.add_stream_from_template(parsed.streams.video[0])


def muxed(
    container: av.container.OutputContainer, stream: Any, frame: EncodedFrame, origin: int
) -> None:
    """One access unit into ``container``, its time counted from ``origin`` (90 kHz)."""
    packet = av.Packet(frame.data)
    packet.stream = stream
    packet.pts = packet.dts = frame.pts - origin
    packet.time_base = TIME_BASE
    packet.is_keyframe = frame.keyframe
    container.mux(packet)


def fitted_size(width: int, height: int, max_width: int, max_height: int) -> tuple[int, int]:
    """``width`` x ``height`` scaled down (never up) into the bounds, shape kept, both even
    (4:2:0 needs even sizes)."""
    scale = min(1.0, max_width / width, max_height / height)
    return max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2)


def jpeg(image: np.ndarray, quality: int) -> bytes:
    ok, encoded = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:  # pragma: no cover - OpenCV fails only on an empty image
        raise ValueError("JPEG encoding failed")
    return encoded.tobytes()


class H264Encoding:
    """An H.264 encoder of one size and rate. Not thread-safe: one thread at a time."""

    def __init__(
        self, encoder: str, width: int, height: int, fps: float, kbps: int, keyframe_s: float
    ) -> None:
        self.width, self.height = width, height
        self.name = encoder
        try:
            self._context = self._opened(encoder, fps, kbps, keyframe_s)
        except (av.FFmpegError, ValueError) as error:
            if encoder == FALLBACK:
                raise
            log.warning("restream encoder %s did not open (%s): using %s", encoder, error, FALLBACK)
            self.name = FALLBACK
            self._context = self._opened(FALLBACK, fps, kbps, keyframe_s)

    def _opened(self, name: str, fps: float, kbps: int, keyframe_s: float) -> av.VideoCodecContext:
        context = av.CodecContext.create(name, "w")
        assert isinstance(context, av.VideoCodecContext)
        context.width, context.height = self.width, self.height
        context.pix_fmt = "yuv420p"
        context.time_base = TIME_BASE
        context.framerate = Fraction(fps).limit_denominator(1000)
        context.bit_rate = kbps * 1000
        context.gop_size = max(1, round(fps * keyframe_s))
        context.max_b_frames = 0
        context.options = dict(_OPTIONS.get(name, {}))
        context.open()
        return context

    def encode(self, image: np.ndarray, pts: int, keyframe: bool = False) -> list[EncodedFrame]:
        """``image`` (BGR, any size: scaled to the encoder's) at ``pts`` (90 kHz);
        ``keyframe`` forces an IDR (a new player starts on it)."""
        frame = av.VideoFrame.from_ndarray(image, format="bgr24")
        frame = frame.reformat(self.width, self.height, format="yuv420p")
        frame.pts, frame.time_base = pts, TIME_BASE
        if keyframe:
            frame.pict_type = PictureType.I
        return [
            EncodedFrame(bytes(packet), int(packet.pts or pts), bool(packet.is_keyframe))
            for packet in self._context.encode(frame)
        ]

    def close(self) -> None:
        """Idempotent; what the encoder still holds is dropped (nobody is watching)."""
        self._context = None  # type: ignore[assignment]  # PyAV frees it when collected
