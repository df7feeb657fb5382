"""Any FrameSource as an aiortc video track."""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
from collections.abc import AsyncIterator
from fractions import Fraction

import av
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

from .base import FrameSource

__all__ = ["FrameSourceTrack", "received_frames", "tail_flush_frame"]


def tail_flush_frame(last: av.VideoFrame) -> av.VideoFrame:
    """A copy of ``last`` stamped 1 ms later, sent once after a stream's final frame.

    aiortc's receiver hands a frame on only when a packet of the next frame arrives, so the
    final frame of a stream would never reach the peer. This copy releases it; the copy
    itself is then the one held back, and never surfaces.
    """
    copy = av.VideoFrame.from_ndarray(last.to_ndarray(), format=last.format.name)
    time_base = Fraction(last.time_base) if last.time_base is not None else Fraction(1, 90000)
    copy.time_base = time_base
    copy.pts = (last.pts or 0) + _flush_offset(time_base)
    return copy


def _flush_offset(time_base: Fraction) -> int:
    return max(1, math.ceil(Fraction(1, 1000) / time_base))


def _is_tail_flush(previous_pts: int | None, frame: av.VideoFrame) -> bool:
    if previous_pts is None or frame.pts is None or frame.time_base is None:
        return False
    return 0 < frame.pts - previous_pts <= _flush_offset(Fraction(frame.time_base))


async def received_frames(track: MediaStreamTrack) -> AsyncIterator[av.VideoFrame]:
    """A remote track's frames until it ends, without the copy ``tail_flush_frame`` sends:
    a receiver whose jitter buffer releases frames on their last packet
    (``streaming.peer.jitter``) would see that copy as one more frame."""
    previous_pts = None
    while True:
        try:
            frame = await track.recv()
        except MediaStreamError:
            return
        if _is_tail_flush(previous_pts, frame):
            continue
        previous_pts = frame.pts
        yield frame


class FrameSourceTrack(MediaStreamTrack):
    """Reads the source on a thread of its own, one frame per ``recv``.

    The track owns the source: ``stop`` closes it, which also wakes a blocked read. Pacing is
    the source's business (live sources are paced by nature, files and synthetic patterns
    pace themselves when asked to). ``frames_sent`` counts what went to the encoder.
    """

    kind = "video"

    def __init__(self, source: FrameSource) -> None:
        super().__init__()
        self.source = source
        self.frames_sent = 0
        self._last: av.VideoFrame | None = None
        # A dedicated thread, not the loop's default executor: a read blocked on a camera
        # must not starve other blocking work, and stop() can release the thread.
        self._reader = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="source")

    async def recv(self) -> av.VideoFrame:
        if self.readyState != "live":
            raise MediaStreamError
        loop = asyncio.get_running_loop()
        try:
            frame = await loop.run_in_executor(self._reader, self.source.read)
        except RuntimeError:  # executor shut down by stop()
            frame = None
        if frame is None:
            last, self._last = self._last, None
            if last is not None and self.readyState == "live":
                return tail_flush_frame(last)
            self.stop()
            raise MediaStreamError
        video = av.VideoFrame.from_ndarray(frame.image, format="bgr24")
        video.pts, video.time_base = frame.pts, frame.time_base
        self.frames_sent += 1
        self._last = video
        return video

    def stop(self) -> None:
        super().stop()
        self.source.close()
        self._reader.shutdown(wait=False)

    async def aclose(self) -> None:
        """``stop`` and wait until the reader thread is gone."""
        self.stop()
        await asyncio.to_thread(self._reader.shutdown, True)
