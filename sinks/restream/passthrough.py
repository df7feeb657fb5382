"""A camera's own H.264, restreamed as it arrives: its packets copied from the connection the
pipeline already has (``PacketSink``), never decoded or encoded, so the camera keeps one
connection and the restream costs no encoder. No drawing: the camera's picture as it sent it.

Packets come as Annex B (RTSP) or length-prefixed (RTMP, FLV): both leave as Annex B, each
keyframe led by the stream's SPS and PPS, so a player can start on any keyframe. Other codecs
(H.265) are refused with a reason; a new player starts at the camera's next keyframe.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import av

from .encoding import RTP_CLOCK, EncodedFrame
from .restream import Restream

__all__ = ["CameraPackets", "CameraRestream"]

_START = b"\x00\x00\x00\x01"


def _annex_b(data: bytes, length_size: int) -> bytes:
    """Length-prefixed NAL units (AVCC) as Annex B."""
    out, at = bytearray(), 0
    while at + length_size <= len(data):
        size = int.from_bytes(data[at : at + length_size], "big")
        at += length_size
        out += _START + data[at : at + size]
        at += size
    return bytes(out)


def _parameter_sets(extradata: bytes) -> tuple[bytes, int]:
    """The SPS and PPS of a stream's extradata as Annex B, and its packets' NAL length size
    (0: the packets are Annex B already)."""
    if not extradata or extradata[0] != 1:  # Annex B extradata (RTSP's sprop-parameter-sets)
        return extradata, 0
    length_size = (extradata[4] & 0x03) + 1  # avcC: AVCDecoderConfigurationRecord
    out, at = bytearray(), 6
    for count_at in (5, None):
        count = extradata[5] & 0x1F if count_at == 5 else extradata[at]
        at += 0 if count_at == 5 else 1
        for _ in range(count):
            size = int.from_bytes(extradata[at : at + 2], "big")
            out += _START + extradata[at + 2 : at + 2 + size]
            at += 2 + size
    return bytes(out), length_size


class CameraPackets:
    """The ``PacketSink`` on a camera's reader thread: each packet to ``deliver`` (called on
    ``loop``) as an ``EncodedFrame``; ``refused`` says why it delivers none."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        deliver: Callable[[Any], None],
        refuse: Callable[[str], None],
    ) -> None:
        """``refuse``: told (on ``loop``) why the camera's packets cannot be restreamed."""
        self._loop, self._deliver, self._refuse = loop, deliver, refuse
        self._headers = b""
        self._length_size = 0
        self._time_base: Any = None
        self._started = time.monotonic()
        self.refused: str | None = None

    def opened(self, stream: Any) -> None:
        name = stream.codec_context.name
        if name != "h264":
            self.refused = f"the camera sends {name}: only H.264 is restreamed as it comes"
            self._loop.call_soon_threadsafe(self._refuse, self.refused)
            return
        self.refused = None
        extradata = bytes(stream.codec_context.extradata or b"")
        self._headers, self._length_size = _parameter_sets(extradata)
        self._time_base = stream.time_base

    def packet(self, packet: av.Packet) -> None:
        if self.refused is not None or not packet.size:
            return
        data = bytes(packet)
        if self._length_size:
            data = _annex_b(data, self._length_size)
        keyframe = bool(packet.is_keyframe)
        if keyframe and self._headers and self._headers not in data:
            data = self._headers + data
        if packet.pts is not None and self._time_base is not None:
            pts = round(float(packet.pts * self._time_base) * RTP_CLOCK)
        else:
            pts = round((time.monotonic() - self._started) * RTP_CLOCK)
        self._loop.call_soon_threadsafe(self._deliver, EncodedFrame(data, pts, keyframe))

    def lost(self) -> None:
        """The camera reconnects on its own; its next keyframe starts the players again."""


class CameraRestream(Restream):
    """A ``Restream`` of a camera's own packets: H.264 subscriptions only, nothing encoded."""

    def deliver(self, frame: EncodedFrame) -> None:
        """A camera packet (on the loop), to every subscription."""
        self._counts.frames_in += 1
        now = time.monotonic()
        for subscription in list(self._subscriptions):
            subscription.put(frame, now)

    async def _run(self) -> None:
        """Nothing to encode: the task only marks the restream active until cancelled."""
        await asyncio.Event().wait()
