"""FrameFeed: one source's frames into one bounded FrameBuffer, for sessions and pipelines.

Whatever the source (a client's track, a camera or device read by the hub, an uploaded or
local file, a pipeline a session watches), its frames reach the loop's buffer here:

- ``put`` on the loop: the feed's ``accept`` gate (a paused pipeline drops a camera's frames,
  counted), then the buffer's strategy, the only thing that decides dropping and waiting.
- ``from_thread`` on a reader thread: the one bridge. The frame is put by a task the feed's
  owner holds; the reader thread waits for it only when the buffer's strategy is WAIT (a
  bounded wait), so a camera's other consumers are never held by a buffer that drops.
- ``call_soon`` on a reader thread: any other callback (a camera's state change, a device
  that ended) runs on the loop, never on the reader thread: the state it changes is the
  loop's.
- ``play``: a file read on a thread, frame by frame, into the buffer; a WAIT buffer holds
  the reader, and a closed gate pauses it (a paused file loses nothing).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import av

from sources import FileSource, SourceFrame

from .buffering import BufferClosed, Filling, FrameBuffer

__all__ = ["FedFrame", "FrameFeed", "Spawn"]

# A reader thread feeding a WAIT buffer is held at most this long per frame.
_THREAD_WAIT_S = 30.0

Spawn = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any] | None"]
"""Starts a task its owner holds (``TaskOwner.spawn``); None once the owner is closing."""


@dataclass(frozen=True, slots=True)
class FedFrame:
    """A frame as its source gave it, and what the source knew of it then."""

    frame: av.VideoFrame | SourceFrame
    received_at: datetime
    """Wall clock, for the frame's metadata."""
    received_mono: float
    """``time.perf_counter()``, for queue waits and latencies."""
    outputs: dict[str, Any] | None = None
    """Already computed by the pipeline a session watches: the workflow is not run again."""
    fps: float | None = None
    """The source's own rate where it knows it (a file)."""
    from_file: bool = False

    @classmethod
    def now(
        cls,
        frame: av.VideoFrame | SourceFrame,
        outputs: dict[str, Any] | None = None,
        *,
        fps: float | None = None,
        from_file: bool = False,
    ) -> FedFrame:
        return cls(frame, datetime.now(), time.perf_counter(), outputs, fps, from_file)


class FrameFeed:
    """Fills ``buffer``; ``on_put(discarded)`` hears how many frames each put dropped;
    ``accept(frame)`` (on the loop) may refuse a frame before the buffer sees it."""

    def __init__(
        self,
        buffer: FrameBuffer[FedFrame],
        spawn: Spawn,
        *,
        on_put: Callable[[int], None] | None = None,
        accept: Callable[[FedFrame], bool] | None = None,
    ) -> None:
        self.buffer = buffer
        self._spawn = spawn
        self._on_put = on_put
        self._accept = accept
        self._loop = asyncio.get_running_loop()

    async def put(self, item: FedFrame) -> None:
        """On the loop; a closed buffer (the consumer is gone) takes nothing, silently."""
        if self._accept is not None and not self._accept(item):
            return
        with contextlib.suppress(BufferClosed):
            discarded = await self.buffer.put(item)
            if self._on_put is not None:
                self._on_put(discarded)

    def from_thread(self, item: FedFrame) -> None:
        """On a reader thread: ``item`` is put by a task on the loop; the thread waits for
        it only if the buffer's strategy says WAIT."""
        waited: concurrent.futures.Future[None] | None = None
        if self.buffer.filling is Filling.WAIT:
            waited = concurrent.futures.Future()
        try:
            self._loop.call_soon_threadsafe(self._start_put, item, waited)
        except RuntimeError:  # the loop is closed: the server is gone
            return
        if waited is not None:
            with contextlib.suppress(concurrent.futures.TimeoutError):
                waited.result(timeout=_THREAD_WAIT_S)

    def call_soon(self, callback: Callable[..., None], *args: Any) -> None:
        """On a reader thread: ``callback(*args)`` runs on the loop."""
        with contextlib.suppress(RuntimeError):  # the loop is closed
            self._loop.call_soon_threadsafe(callback, *args)

    def _start_put(self, item: FedFrame, waited: concurrent.futures.Future[None] | None) -> None:
        task = self._spawn(self.put(item))
        if waited is None:
            return
        if task is None:  # the owner is closing: nothing to wait for
            waited.set_result(None)
        else:
            task.add_done_callback(lambda _: waited.set_result(None))

    async def play(self, file: FileSource, gate: asyncio.Event | None = None) -> str | None:
        """Every frame of ``file`` (opened already) into the buffer, read on a thread; waits
        while ``gate`` is clear. Returns the file's error, if it ended on one. Raises
        ``BufferClosed`` once the consumer is gone."""
        while True:
            if gate is not None:
                await gate.wait()
            frame = await asyncio.to_thread(file.read)
            if frame is None:
                return file.error
            if self.buffer.closed:
                raise BufferClosed
            await self.put(FedFrame.now(frame, fps=file.fps, from_file=True))
