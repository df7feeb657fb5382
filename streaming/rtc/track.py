"""Any FrameSource as an aiortc video track."""

from __future__ import annotations

import asyncio
import contextlib
import math
import queue
import threading
from collections.abc import AsyncIterator, Callable
from fractions import Fraction
from typing import Any

import av
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

from sources.base import FrameSource, SourceFrame

__all__ = ["FrameSourceTrack", "discard", "received_frames", "tail_flush_frame"]


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


async def discard(track: MediaStreamTrack) -> None:
    """Receive and drop every frame of a track nobody uses, so aiortc's queue stays empty."""
    try:
        while True:
            await track.recv()
    except MediaStreamError:
        pass


async def received_frames(track: MediaStreamTrack) -> AsyncIterator[av.VideoFrame]:
    """A remote track's frames until it ends, without the copy ``tail_flush_frame`` sends:
    a receiver whose jitter buffer releases frames on their last packet
    (``streaming.rtc.jitter``) would see that copy as one more frame."""
    previous_pts = None
    while True:
        try:
            frame = await track.recv()
        except MediaStreamError:
            return
        if not isinstance(frame, av.VideoFrame):
            continue  # a video track yields video frames; anything else is not ours to show
        if _is_tail_flush(previous_pts, frame):
            continue
        previous_pts = frame.pts
        yield frame


class _ReaderThread:
    """Calls ``source.read`` on a daemon thread of its own, one call per ``read()``.

    Not an executor: the interpreter joins executor workers at exit, so one blocked in a
    read (a ManualSource nobody feeds, a camera that stopped answering) would keep the
    program from ending. A daemon thread never does; ``close`` wakes it through the source.
    """

    def __init__(self, source: FrameSource) -> None:
        self._source = source
        self._requests: queue.SimpleQueue[
            tuple[asyncio.AbstractEventLoop, asyncio.Future[SourceFrame | None]] | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="source", daemon=True)
        self._started = False
        self._closed = False
        self._lock = threading.Lock()
        self._finished = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = []

    async def read(self) -> SourceFrame | None:
        if self._closed:
            return None
        if not self._started:
            self._started = True
            self._thread.start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SourceFrame | None] = loop.create_future()
        self._requests.put((loop, future))
        return await future

    def _serve(self) -> None:
        try:
            while (request := self._requests.get()) is not None:
                loop, future = request
                try:
                    outcome: Any = self._source.read()
                    deliver: Callable[[asyncio.Future[Any], Any], None] = _set_result
                except Exception as exc:
                    outcome, deliver = exc, _set_exception
                if not _post(loop, deliver, future, outcome):
                    return  # the loop is closed: nobody waits any more
        finally:
            with self._lock:
                self._finished = True
                waiters, self._waiters = self._waiters, []
            for loop, future in waiters:
                _post(loop, _set_result, future, None)

    def close(self) -> None:
        """Idempotent; the thread ends after the read in progress (the source's ``close``
        wakes a blocked one)."""
        self._closed = True
        self._requests.put(None)

    async def wait_finished(self, timeout: float) -> None:
        """Until the thread has ended, at most ``timeout`` s. Waits on the loop, not in an
        executor: at interpreter exit executors take no new work, and closing must still."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if not self._started or self._finished:
                return
            self._waiters.append((loop, future))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(future, timeout)


def _post(loop: asyncio.AbstractEventLoop, deliver: Any, *args: Any) -> bool:
    try:
        loop.call_soon_threadsafe(deliver, *args)
    except RuntimeError:  # loop closed
        return False
    return True


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


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
        # A thread of its own, not the loop's default executor: a read blocked on a camera
        # must not starve other blocking work, nor keep the process from exiting.
        self._reader = _ReaderThread(source)

    async def recv(self) -> av.VideoFrame:
        if self.readyState != "live":
            raise MediaStreamError
        frame = await self._reader.read()
        if frame is None:
            last, self._last = self._last, None
            if last is not None and self.readyState == "live":
                return tail_flush_frame(last)
            self.stop()
            raise MediaStreamError
        video = frame.video_frame()  # the decoder's own frame: no BGR round trip
        video.pts, video.time_base = frame.pts, frame.time_base
        self.frames_sent += 1
        self._last = video
        return video

    def stop(self) -> None:
        super().stop()
        self.source.close()
        self._reader.close()

    async def aclose(self, timeout: float = 5.0) -> None:
        """``stop`` and wait (at most ``timeout`` s) until the reader thread is gone."""
        self.stop()
        await self._reader.wait_finished(timeout)
