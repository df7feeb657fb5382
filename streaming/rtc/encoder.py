"""aiortc's VP8 encoder without its denoiser: a fifth to a third less CPU per returned frame.

aiortc opens libvpx with ``noise-sensitivity=4``, a temporal denoiser meant for camera noise
at low bitrates. Our returned frames are the server's own renderings (annotations, blurs) of
frames the client's encoder already compressed once. On 640x480 frames the denoiser costs
0.6 to 1.2 ms of the 2.4 to 3.1 ms a frame takes, and at the same bitrate the frames come out
0.4 to 2 dB further from what was handed in (``python -m benchmarks encoder``). Everything
else stays aiortc's: its rate control (the bitrate the receiver's REMB asks for), its
keyframes on PLI, its packetization.

``Vp8Encoder`` opens the codec itself whenever aiortc's ``encode`` would (first frame, a new
size, a bitrate change over 10 %), with aiortc's options but the denoiser off; aiortc's
``encode`` then finds a codec that fits and uses it. ``install()`` makes aiortc's senders build
it for VP8, through the module name ``get_encoder`` they call (the server's whole process: its
senders only return frames it rendered); an aiortc that no longer does is an error.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import av
from aiortc import rtcrtpsender
from aiortc.codecs import get_encoder, vpx
from av.frame import Frame

from .errors import RtcInstallError

__all__ = ["Vp8Encoder", "install"]


_REOPEN_BITRATE_CHANGE = 0.1  # aiortc reopens its encoder when the target moves more than this


class Vp8Encoder(vpx.Vp8Encoder):
    """aiortc's VP8 encoder with the codec opened by us (denoiser off); see the module."""

    def encode(self, frame: Frame, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        if isinstance(frame, av.VideoFrame) and self._must_open(frame):
            self.codec = _open(frame.width, frame.height, self.target_bitrate)
        return super().encode(frame, force_keyframe)

    def _must_open(self, frame: av.VideoFrame) -> bool:
        codec = self.codec
        if codec is None or not codec.bit_rate:
            return True
        return (codec.width, codec.height) != (frame.width, frame.height) or (
            abs(self.target_bitrate - codec.bit_rate) / codec.bit_rate > _REOPEN_BITRATE_CHANGE
        )


def _open(width: int, height: int, bitrate: int) -> Any:
    codec = av.CodecContext.create("libvpx", "w")
    codec.width, codec.height = width, height
    codec.bit_rate = bitrate
    codec.pix_fmt = "yuv420p"
    codec.gop_size = 3000  # no periodic keyframes: the receiver asks (PLI) when it needs one
    codec.qmin, codec.qmax = 2, 56
    codec.options = {
        "bufsize": str(bitrate),
        "cpu-used": "-6",
        "deadline": "realtime",
        "lag-in-frames": "0",
        "minrate": str(bitrate),  # minrate = maxrate = bit_rate: constant bitrate
        "maxrate": str(bitrate),
        "noise-sensitivity": "0",
        "overshoot-pct": "15",
        "partitions": "0",
        "static-thresh": "1",
        "undershoot-pct": "100",
    }
    codec.thread_count = vpx.number_of_threads(width * height, multiprocessing.cpu_count())
    return codec


def _get_encoder(codec: Any) -> Any:
    if codec.mimeType.lower() == "video/vp8":
        return Vp8Encoder()
    return get_encoder(codec)


def install() -> None:
    """Make aiortc's senders encode VP8 with ``Vp8Encoder`` (idempotent). Raises
    ``RtcInstallError`` if aiortc no longer builds its encoders this way."""
    current = getattr(rtcrtpsender, "get_encoder", None)
    if current is _get_encoder:
        return
    if current is not get_encoder or not hasattr(vpx.Vp8Encoder, "target_bitrate"):
        raise RtcInstallError(
            "aiortc's sender no longer builds its encoders through rtcrtpsender.get_encoder: "
            "VP8 would keep aiortc's denoiser"
        )
    rtcrtpsender.get_encoder = _get_encoder
