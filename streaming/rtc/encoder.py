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

The bitrate is capped by frame size (``kbps_per_megapixel``). aiortc follows the receiver's
REMB from 500 kbps up to 1.5 Mbps, and its libvpx runs at a constant bitrate, so a 320x240
stream that a receiver on loopback lets climb is encoded at 20 bits a pixel a second: on a
machine whose clients share the server's cores, four such sessions climbed from 28 to 246 ms
in 20 minutes as the encoders and decoders took more CPU each minute (``benchmarks/README.md``,
the soak). A cap of 3,000 kbps per megapixel (920 kbps at 640x480, 230 kbps at 320x240) is
generous for frames that were compressed once already on the way in.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import av
from aiortc import rtcrtpsender
from aiortc.codecs import get_encoder, vpx
from av.frame import Frame

from .errors import RtcInstallError

__all__ = ["Vp8Encoder", "bitrate_cap", "install"]


_REOPEN_BITRATE_CHANGE = 0.1  # aiortc reopens its encoder when the target moves more than this


def bitrate_cap(width: int, height: int, kbps_per_megapixel: int) -> int | None:
    """The highest bitrate (bit/s) for a frame size; None when ``kbps_per_megapixel`` is 0."""
    if kbps_per_megapixel <= 0:
        return None
    return max(1, round(kbps_per_megapixel * width * height / 1000))


class Vp8Encoder(vpx.Vp8Encoder):
    """aiortc's VP8 encoder with the codec opened by us (denoiser off) and its bitrate capped
    by frame size; see the module."""

    def __init__(self, kbps_per_megapixel: int = 0) -> None:
        super().__init__()
        self._kbps_per_megapixel = kbps_per_megapixel
        self._cap: int | None = None

    # aiortc sets the target from each REMB and reads it back to decide when to reopen its
    # codec and at which rate: capping the value read keeps both on the capped rate.
    @property
    def target_bitrate(self) -> int:
        wanted: int = vpx.Vp8Encoder.target_bitrate.fget(self)  # type: ignore[attr-defined]
        return wanted if self._cap is None else min(wanted, self._cap)

    @target_bitrate.setter
    def target_bitrate(self, bitrate: int) -> None:
        vpx.Vp8Encoder.target_bitrate.fset(self, bitrate)  # type: ignore[attr-defined]

    def encode(self, frame: Frame, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        if isinstance(frame, av.VideoFrame):
            self._cap = bitrate_cap(frame.width, frame.height, self._kbps_per_megapixel)
            if self._must_open(frame):
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


class _EncoderFactory:
    """What aiortc's senders call instead of ``get_encoder``: ours for VP8, aiortc's else."""

    def __init__(self, kbps_per_megapixel: int) -> None:
        self.kbps_per_megapixel = kbps_per_megapixel

    def __call__(self, codec: Any) -> Any:
        if codec.mimeType.lower() == "video/vp8":
            return Vp8Encoder(self.kbps_per_megapixel)
        return get_encoder(codec)


def install(kbps_per_megapixel: int = 0) -> None:
    """Make aiortc's senders encode VP8 with ``Vp8Encoder`` capped at ``kbps_per_megapixel``
    (0: aiortc's range). Idempotent; a second call sets the cap for encoders built after it.
    Raises ``RtcInstallError`` if aiortc no longer builds its encoders this way."""
    current = getattr(rtcrtpsender, "get_encoder", None)
    if isinstance(current, _EncoderFactory):
        current.kbps_per_megapixel = kbps_per_megapixel
        return
    target = getattr(vpx.Vp8Encoder, "target_bitrate", None)
    if current is not get_encoder or not isinstance(target, property) or target.fset is None:
        raise RtcInstallError(
            "aiortc's sender no longer builds its encoders through rtcrtpsender.get_encoder: "
            "VP8 would keep aiortc's denoiser"
        )
    rtcrtpsender.get_encoder = _EncoderFactory(kbps_per_megapixel)
