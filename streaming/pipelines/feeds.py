"""SourceFeed: fills one pipeline source's buffer, from a camera or local device through the
hub or from a local file read on a thread, through the shared ``FrameFeed``. Pausing the
pipeline stops the feed: a camera's frames are dropped (and counted), a file waits and loses
nothing.

Everything a reader thread reports (a frame, a camera's state change, a device that ended)
is handled on the loop, which owns the slot's state and the buffer: a camera that reconnects
while the pipeline is paused is told to the status as an event, and the source stays PAUSED
until it is resumed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sources import FileSource, LiveStats, SourceError, SourceFrame
from sources.hub import SourceHub

from ..buffering import BufferClosed, Consumption, Filling, FrameBuffer
from ..errors import SourceUnavailable
from ..feed import FedFrame, FrameFeed, Spawn
from .models import SourceReference
from .status import PipelineStatus, Severity, SourceSlot, SourceState

__all__ = ["SourceFeed", "buffer_for", "frame_time"]

log = logging.getLogger(__name__)


def buffer_for(ref: SourceReference, video: Any, size: int) -> FrameBuffer[FedFrame]:
    """The request's strategies; when it gives none: every frame of a file, the newest of
    a camera."""
    file = ref.kind == "file"
    filling = video.source_buffer_filling_strategy or (
        Filling.WAIT if file else Filling.DROP_OLDEST
    )
    consumption = video.source_buffer_consumption_strategy or (
        Consumption.LAZY if file else Consumption.EAGER
    )
    return FrameBuffer(filling, size, consumption, video.max_fps, timestamp=frame_time)


def frame_time(item: FedFrame) -> float | None:
    """When the frame was taken, on its stream's clock (None where it carries no time):
    what ``max_fps`` samples by."""
    frame = item.frame
    pts, time_base = frame.pts, frame.time_base
    if pts is None or time_base is None:
        return None
    return float(pts * time_base)


class SourceFeed:
    """Feeds ``slot.buffer`` while ``running`` is set; reports state changes and failures
    as the pipeline's events. Made on the loop."""

    def __init__(
        self,
        pipeline: str,
        slot: SourceSlot,
        running: asyncio.Event,
        status: PipelineStatus,
        spawn: Spawn,
    ) -> None:
        self._pipeline = pipeline
        self._slot = slot
        self._running = running
        self._status = status
        self._feed = FrameFeed(slot.buffer, spawn, accept=self._accept)

    def _accept(self, _: FedFrame) -> bool:
        """On the loop, for each camera frame: a device has no LiveSource to say it runs;
        a paused pipeline drops what its cameras deliver."""
        slot = self._slot
        if slot.state is SourceState.INITIALISING:
            slot.state = SourceState.RUNNING
        if not self._running.is_set():
            slot.buffer.drops["paused"] += 1
            return False
        return True

    def subscribe(self, hub: SourceHub) -> None:
        """A camera or a local device, shared through the hub; raises if the hub refuses it
        (a device that cannot be opened: ``SourceUnavailable`` saying why)."""
        slot, feed = self._slot, self._feed

        def deliver(frame: SourceFrame) -> None:  # on the camera's reader thread
            feed.from_thread(FedFrame.now(frame))

        def ended(error: str | None) -> None:  # on the reader thread
            feed.call_soon(self._ended, error)

        try:
            slot.subscription = hub.subscribe(str(slot.reference.decoded), deliver, ended)
        except SourceError as exc:  # a device missing or busy: the request's answer says so
            raise SourceUnavailable(f"video_reference {slot.reference.shown}: {exc}") from None
        slot.state = SourceState.INITIALISING
        live = slot.live
        if live is not None:

            def changed(previous: str, new: str, stats: LiveStats) -> None:  # reader thread
                feed.call_soon(self._on_change, new, stats)

            slot.listener = changed
            live.add_listener(changed)
            slot.state = SourceState.of_live(live.stats().state)

    def _on_change(self, new: str, stats: LiveStats) -> None:
        """On the loop: the camera's state, as the reference names it, and why. While the
        pipeline is paused its sources stay PAUSED: ``resume`` reads the camera's state."""
        slot, source_id = self._slot, self._slot.source_id
        camera = SourceState.of_live(new)
        if new == "streaming":
            slot.announce = True  # log the first frame processed from this connection
        log.info(
            "pipeline %s source %d: %s%s",
            self._pipeline,
            source_id,
            camera,
            f" ({stats.last_error})" if new == "reconnecting" else "",
        )
        old_state = slot.state
        if self._running.is_set() and old_state is not SourceState.ERROR:
            slot.state = camera
        change = {"previous_state": old_state, "new_state": slot.state, "source_id": source_id}
        if slot.state is not old_state:
            self._status.event(Severity.INFO, "SOURCE_STATE_UPDATE", change, "video_source")
        if new == "reconnecting" and stats.last_error:
            error = {
                "source_id": source_id,
                "error_type": "SourceConnectionError",
                "error_message": stats.last_error,
                "error_context": "stream_consumer_thread",
            }
            self._status.event(Severity.WARNING, "SOURCE_ERROR", error, "video_source")

    def _ended(self, error: str | None) -> None:
        """On the loop: a device stopped delivering (unplugged, taken by another program); a
        camera URL never ends. The pipeline keeps its other sources."""
        self._failed(RuntimeError(error or "the device ended its stream"))

    async def read_file(self) -> None:
        """A local file (only when the server allows local sources): every frame when the
        filling strategy waits, else played at its own rate like the camera it stands in for."""
        slot = self._slot
        realtime = slot.buffer.filling is not Filling.WAIT
        file = FileSource(str(slot.reference.reference), realtime, defer_open=True)
        slot.file = file
        slot.state = SourceState.INITIALISING
        try:
            await asyncio.to_thread(file.open)
            if self._running.is_set():
                slot.state = SourceState.RUNNING
            error = await self._feed.play(file, self._running)  # a paused file loses nothing
        except BufferClosed:
            return
        except Exception as exc:
            self._failed(exc)
        else:
            if error:
                self._failed(RuntimeError(error))
        finally:
            file.close()
            await slot.buffer.close()

    def _failed(self, exc: Exception) -> None:
        self._slot.state = SourceState.ERROR
        error = {
            "source_id": self._slot.source_id,
            "error_type": type(exc).__name__,
            "error_message": str(exc),
            "error_context": "stream_consumer_thread",
        }
        self._status.event(Severity.ERROR, "SOURCE_ERROR", error, "video_source")
