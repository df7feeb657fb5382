"""SourceFeed: fills one pipeline source's buffer, from a camera or local device through the
hub or from a local file read on a thread. Pausing the pipeline stops the feed: a camera's
frames are dropped (and counted), a file waits and loses nothing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import datetime
from typing import Any

from sources import FileSource, LiveStats, SourceError, SourceFrame
from sources.hub import SourceHub

from ..buffering import BufferClosed, Consumption, Filling, FrameBuffer
from ..errors import SourceUnavailable
from .models import SourceReference
from .status import Item, PipelineStatus, Severity, SourceSlot, SourceState

__all__ = ["SourceFeed", "buffer_for"]

log = logging.getLogger(__name__)

# A camera whose buffer is set to WAIT holds its reader at most this long per frame.
_CAMERA_WAIT_S = 30.0


def buffer_for(ref: SourceReference, video: Any, size: int) -> FrameBuffer[Item]:
    """The request's strategies; when it gives none: every frame of a file, the newest of
    a camera."""
    file = ref.kind == "file"
    filling = video.source_buffer_filling_strategy or (
        Filling.WAIT if file else Filling.DROP_OLDEST
    )
    consumption = video.source_buffer_consumption_strategy or (
        Consumption.LAZY if file else Consumption.EAGER
    )
    return FrameBuffer(filling, size, consumption, video.max_fps)


class SourceFeed:
    """Feeds ``slot.buffer`` while ``running`` is set; reports state changes and failures
    as the pipeline's events."""

    def __init__(
        self, pipeline: str, slot: SourceSlot, running: asyncio.Event, status: PipelineStatus
    ) -> None:
        self._pipeline = pipeline
        self._slot = slot
        self._running = running
        self._status = status

    def subscribe(self, hub: SourceHub, loop: asyncio.AbstractEventLoop) -> None:
        """A camera or a local device, shared through the hub; raises if the hub refuses it
        (a device that cannot be opened: ``SourceUnavailable`` saying why)."""
        slot = self._slot
        buffer = slot.buffer
        waits = buffer.filling is Filling.WAIT

        def deliver(frame: SourceFrame) -> None:  # on the camera's reader thread
            if slot.state is SourceState.INITIALISING:  # a device: no LiveSource to tell
                slot.state = SourceState.RUNNING
            if not self._running.is_set():
                buffer.drops["paused"] += 1
                return
            put = asyncio.run_coroutine_threadsafe(
                buffer.put((frame, datetime.now(), time.perf_counter())), loop
            )
            if waits:  # WAIT on a live camera holds its reader, as the strategy says
                with contextlib.suppress(BufferClosed, RuntimeError, TimeoutError):
                    put.result(timeout=_CAMERA_WAIT_S)

        try:
            slot.subscription = hub.subscribe(str(slot.reference.reference), deliver, self._ended)
        except SourceError as exc:  # a device missing or busy: the request's answer says so
            raise SourceUnavailable(f"video_reference {slot.reference.shown}: {exc}") from None
        slot.state = SourceState.INITIALISING
        live = slot.live
        if live is not None:
            slot.listener = self._on_change
            live.add_listener(self._on_change)
            slot.state = SourceState.of_live(live.stats().state)

    def _on_change(self, previous: str, new: str, stats: LiveStats) -> None:
        """On the camera's reader thread: its state, as the reference names it, and why."""
        slot, source_id = self._slot, self._slot.source_id
        old_state, slot.state = slot.state, SourceState.of_live(new)
        if new == "streaming":
            slot.announce = True  # log the first frame processed from this connection
        log.info(
            "pipeline %s source %d: %s%s",
            self._pipeline,
            source_id,
            slot.state,
            f" ({stats.last_error})" if new == "reconnecting" else "",
        )
        change = {"previous_state": old_state, "new_state": slot.state, "source_id": source_id}
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
        """On the reader thread: a device stopped delivering (unplugged, taken by another
        program); a camera URL never ends. The pipeline keeps its other sources."""
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
            slot.state = SourceState.RUNNING
            while True:
                await self._running.wait()  # a paused file stops reading, loses nothing
                frame = await asyncio.to_thread(file.read)
                if frame is None:
                    break
                await slot.buffer.put((frame, datetime.now(), time.perf_counter()))
        except BufferClosed:
            return
        except Exception as exc:
            self._failed(exc)
        else:
            if file.error:
                self._failed(RuntimeError(file.error))
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
