"""Video frames leave the jitter buffer when their last packet arrives, not one frame later.

aiortc's jitter buffer knows a video frame is complete only when a packet of the *next* frame
arrives, so every receiving hop holds each frame for one frame interval (33 ms at 30 fps):
66 ms of a round trip through the server, more than the whole processing budget. The RTP
marker bit says "last packet of this frame" (RFC 7741 for VP8, RFC 6184 for H.264; aiortc and
browsers set it), so a run of packets that starts where the previous frame ended and ends on
a marker is a whole frame already.

``VideoJitterBuffer`` is our own buffer with aiortc's interface (``add`` returns the PLI flag
and at most one complete frame; ``capacity``). aiortc's receiver creates its buffer through
the module name ``JitterBuffer`` and hands packets over with the depayloaded bytes in
``packet._data`` (aiortc's own contract between the two); ``install`` checks both are still
there (raising ``RtcInstallError`` if the name is not; ``tests/unit/test_rtc.py`` streams
between two real peers to check the rest) and puts a factory in that name which builds ours
for video receivers *that are ours*: every receiver when the server installs it for its own
process (``everywhere=True``), and only those created inside ``releasing_on_marker()`` when
our client does (the rest of the user's process keeps aiortc's buffer). Audio keeps aiortc's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from aiortc import rtcrtpreceiver
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket

from .errors import RtcInstallError

__all__ = ["VideoJitterBuffer", "install", "releasing_on_marker"]


MAX_MISORDER = 100  # an older packet this far behind means the sender restarted its numbering
_SEQ = 1 << 16


def _ahead(a: int, b: int) -> int:
    """How far sequence number ``a`` is past ``b`` (mod 2^16)."""
    return (a - b) % _SEQ


class VideoJitterBuffer:
    """A video jitter buffer that hands a frame on with its marker packet; see the module."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._packets: dict[int, RtpPacket] = {}
        self._start: int | None = None  # first sequence number of the next frame to emit

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        seq = packet.sequence_number
        if self._start is None:
            self._start = seq
        pli = False
        behind = _ahead(self._start, seq)
        if 0 < behind < _SEQ // 2:  # older than what was already emitted
            if behind < MAX_MISORDER:
                return False, None  # late or duplicate: its frame is gone
            self._packets.clear()  # a new numbering: start over from here
            self._start = seq
            pli = True
        if _ahead(seq, self._start) >= self.capacity:
            self._drop_until_fits(seq)
            pli = True
        self._packets[seq] = packet
        return pli, self._take_frame()

    def _take_frame(self) -> JitterFrame | None:
        assert self._start is not None
        first = self._packets.get(self._start)
        if first is None:
            return None
        run = [first]
        seq = self._start
        while not run[-1].marker:
            nxt = self._packets.get((seq + 1) % _SEQ)
            if nxt is None:
                return None  # a gap: wait for it (NACK) or for the buffer to overflow
            if nxt.timestamp != first.timestamp:
                break  # the next frame began: this one ended without a marker
            run.append(nxt)
            seq = (seq + 1) % _SEQ
        for i in range(len(run)):
            del self._packets[(self._start + i) % _SEQ]
        self._start = (self._start + len(run)) % _SEQ
        # aiortc's receiver sets _data (the depayloaded bytes): its contract with its buffer.
        data = b"".join(p._data for p in run)  # type: ignore[attr-defined]
        return JitterFrame(data, first.timestamp)

    def _drop_until_fits(self, newest: int) -> None:
        """Discard the oldest packets, whole frames, until ``newest`` fits in the window."""
        assert self._start is not None
        doomed = None  # timestamp of the last frame the window cut into
        while _ahead(newest, self._start) >= self.capacity:
            dropped = self._packets.pop(self._start, None)
            if dropped is not None:
                doomed = dropped.timestamp
            self._start = (self._start + 1) % _SEQ
        # The rest of that frame goes too (a partial frame would only make the decoder fail);
        # its missing packets, should they come, are then too late and ignored.
        rest = [seq for seq, p in self._packets.items() if p.timestamp == doomed]
        for seq in rest:
            del self._packets[seq]
        start = self._start
        if rest:
            last = max(rest, key=lambda seq: _ahead(seq, start))
            self._start = (last + 1) % _SEQ


_everywhere = False
_here: ContextVar[bool] = ContextVar("visionstream_release_on_marker", default=False)


def _jitter_buffer(capacity: int, prefetch: int = 0, is_video: bool = False) -> Any:
    if is_video and (_everywhere or _here.get()):
        return VideoJitterBuffer(capacity)
    return JitterBuffer(capacity, prefetch=prefetch, is_video=is_video)


def install(*, everywhere: bool) -> None:
    """Put our factory in aiortc's receiver module (idempotent); ``everywhere``: every video
    receiver of this process uses ``VideoJitterBuffer`` from now on (the server's choice).
    Raises ``RtcInstallError`` if aiortc no longer builds its buffer this way."""
    global _everywhere
    current = getattr(rtcrtpreceiver, "JitterBuffer", None)
    if current is not _jitter_buffer:
        if current is not JitterBuffer:
            raise RtcInstallError(
                "aiortc's receiver no longer builds its jitter buffer through "
                "rtcrtpreceiver.JitterBuffer: cannot release frames on their marker packet"
            )
        rtcrtpreceiver.JitterBuffer = _jitter_buffer  # type: ignore[assignment,misc]
    if everywhere:
        _everywhere = True


@contextmanager
def releasing_on_marker() -> Iterator[None]:
    """Video receivers created in this context (this task, and tasks it starts meanwhile)
    release each frame on its marker packet; others keep aiortc's buffer."""
    install(everywhere=False)
    token = _here.set(True)
    try:
        yield
    finally:
        _here.reset(token)
