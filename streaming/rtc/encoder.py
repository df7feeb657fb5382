"""The returned video's encoders: aiortc's VP8 without its denoiser (a fifth to a third less
CPU per returned frame), aiortc's H.264 at a real-time preset, both within one bitrate range.

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

H.264: aiortc opens libx264 at its default preset (``medium``) with only ``tune=zerolatency``,
which spends several times VP8's CPU on a frame; ``H264Encoder`` opens it, whenever aiortc
would, at ``veryfast`` (``python -m benchmarks codecs`` measured both), Constrained Baseline
as aiortc negotiates it.

Both follow the receiver's REMB within ``BitrateLimits`` (start, minimum, maximum: the
server's ``VISIONSTREAM_VIDEO_*_KBPS``), where aiortc had fixed ranges per codec (VP8 250 kbps to
1.5 Mbps, H.264 500 kbps to 3 Mbps). The bitrate is also capped by frame size
(``kbps_per_megapixel``). aiortc follows the receiver's
REMB from 500 kbps up to 1.5 Mbps, and its libvpx runs at a constant bitrate, so a 320x240
stream that a receiver on loopback lets climb is encoded at 20 bits a pixel a second: on a
machine whose clients share the server's cores, four such sessions climbed from 28 to 246 ms
in 20 minutes as the encoders and decoders took more CPU each minute (``benchmarks/README.md``,
the soak). A cap of 3,000 kbps per megapixel (920 kbps at 640x480, 230 kbps at 320x240) is
generous for frames that were compressed once already on the way in.
"""

from __future__ import annotations

import dataclasses
import fractions
import multiprocessing
from typing import Any

import av
from aiortc import rtcrtpsender
from aiortc.codecs import get_encoder, h264, vpx
from av.frame import Frame

from .errors import RtcInstallError

__all__ = ["BitrateLimits", "H264Encoder", "Vp8Encoder", "bitrate_cap", "install"]


_REOPEN_BITRATE_CHANGE = 0.1  # aiortc reopens its encoder when the target moves more than this
_H264_PRESET = "veryfast"


def bitrate_cap(width: int, height: int, kbps_per_megapixel: int) -> int | None:
    """The highest bitrate (bit/s) for a frame size; None when ``kbps_per_megapixel`` is 0."""
    if kbps_per_megapixel <= 0:
        return None
    return max(1, round(kbps_per_megapixel * width * height / 1000))


@dataclasses.dataclass(frozen=True)
class BitrateLimits:
    """Where a returned video's bitrate starts and the range REMB may move it in (bit/s),
    and its cap by frame size (kbit/s per megapixel; 0: none)."""

    start: int = vpx.DEFAULT_BITRATE
    minimum: int = vpx.MIN_BITRATE
    maximum: int = vpx.MAX_BITRATE
    kbps_per_megapixel: int = 0


class _Limited:
    """``target_bitrate`` as aiortc's encoders use it (REMB sets it; ``encode`` reads it to
    open and reopen the codec), kept within ``BitrateLimits`` and the frame size's cap."""

    def _limit(self, limits: BitrateLimits) -> None:
        self._limits = limits
        self._wanted = limits.start
        self._cap: int | None = None

    @property
    def target_bitrate(self) -> int:
        limits = self._limits
        bitrate = max(limits.minimum, min(self._wanted, limits.maximum))
        return bitrate if self._cap is None else min(bitrate, self._cap)

    @target_bitrate.setter
    def target_bitrate(self, bitrate: int) -> None:
        self._wanted = bitrate

    def _must_open(self, codec: Any, frame: av.VideoFrame) -> bool:
        """Whether aiortc's ``encode`` would open a codec for this frame now."""
        self._cap = bitrate_cap(frame.width, frame.height, self._limits.kbps_per_megapixel)
        if codec is None or not codec.bit_rate:
            return True
        return (codec.width, codec.height) != (frame.width, frame.height) or (
            abs(self.target_bitrate - codec.bit_rate) / codec.bit_rate > _REOPEN_BITRATE_CHANGE
        )


class Vp8Encoder(_Limited, vpx.Vp8Encoder):
    """aiortc's VP8 encoder with the codec opened by us (denoiser off), its bitrate within
    ``limits``; see the module."""

    def __init__(self, kbps_per_megapixel: int = 0, limits: BitrateLimits | None = None) -> None:
        super().__init__()
        self._limit(limits or BitrateLimits(kbps_per_megapixel=kbps_per_megapixel))

    def encode(self, frame: Frame, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        if isinstance(frame, av.VideoFrame) and self._must_open(self.codec, frame):
            self.codec = _open_vp8(frame.width, frame.height, self.target_bitrate)
        return super().encode(frame, force_keyframe)


class H264Encoder(_Limited, h264.H264Encoder):
    """aiortc's H.264 encoder with libx264 opened by us at a real-time preset, its bitrate
    within ``limits``; see the module."""

    def __init__(self, limits: BitrateLimits | None = None) -> None:
        super().__init__()
        self._limit(limits or BitrateLimits())

    def encode(self, frame: Frame, force_keyframe: bool = False) -> tuple[list[bytes], int]:
        if isinstance(frame, av.VideoFrame) and self._must_open(self.codec, frame):
            # What aiortc does before opening its own: what the old codec buffered is dropped.
            self.buffer_data, self.buffer_pts = b"", None
            self.codec = _open_h264(frame.width, frame.height, self.target_bitrate)
        return super().encode(frame, force_keyframe)


def _open_vp8(width: int, height: int, bitrate: int) -> Any:
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


def _open_h264(width: int, height: int, bitrate: int) -> Any:
    codec = av.CodecContext.create("libx264", "w")
    codec.width, codec.height = width, height
    codec.bit_rate = bitrate
    codec.pix_fmt = "yuv420p"
    codec.framerate = fractions.Fraction(h264.MAX_FRAME_RATE, 1)
    codec.time_base = fractions.Fraction(1, h264.MAX_FRAME_RATE)
    # aiortc's options (level 3.1, zerolatency, Baseline) at a real-time preset, and a
    # one-second VBV so the rate holds to the target (without it libx264 ran 29 % over).
    codec.options = {
        "level": "31",
        "tune": "zerolatency",
        "preset": _H264_PRESET,
        "maxrate": str(bitrate),
        "bufsize": str(bitrate),
    }
    codec.profile = "Baseline"
    return codec


class _EncoderFactory:
    """What aiortc's senders call instead of ``get_encoder``: ours for VP8 and H.264."""

    def __init__(self, limits: BitrateLimits) -> None:
        self.limits = limits

    def __call__(self, codec: Any) -> Any:
        kind = codec.mimeType.lower()
        if kind == "video/vp8":
            return Vp8Encoder(limits=self.limits)
        if kind == "video/h264":
            return H264Encoder(self.limits)
        return get_encoder(codec)


def install(kbps_per_megapixel: int = 0, limits: BitrateLimits | None = None) -> None:
    """Make aiortc's senders encode VP8 and H.264 with ours, within ``limits`` (default:
    aiortc's VP8 range, capped at ``kbps_per_megapixel``; 0: no cap). Idempotent; a second
    call sets the limits of encoders built after it. Raises ``RtcInstallError`` if aiortc no
    longer builds its encoders this way."""
    if limits is None:
        limits = BitrateLimits(kbps_per_megapixel=kbps_per_megapixel)
    elif kbps_per_megapixel:
        limits = dataclasses.replace(limits, kbps_per_megapixel=kbps_per_megapixel)
    current = getattr(rtcrtpsender, "get_encoder", None)
    if isinstance(current, _EncoderFactory):
        current.limits = limits
        return
    for encoder in (vpx.Vp8Encoder, h264.H264Encoder):
        target = getattr(encoder, "target_bitrate", None)
        if not isinstance(target, property) or target.fset is None:
            raise RtcInstallError(
                f"aiortc's {encoder.__name__} no longer has a target_bitrate property"
            )
    if current is not get_encoder:
        raise RtcInstallError(
            "aiortc's sender no longer builds its encoders through rtcrtpsender.get_encoder: "
            "VP8 would keep aiortc's denoiser"
        )
    rtcrtpsender.get_encoder = _EncoderFactory(limits)
