"""One headless monitoring pipeline: its sources, its workflow runs and its sinks.

Each source has its own FrameBuffer (the request's strategies) and its own task: frames are
taken from the buffer and run through that source's compiled workflow in the shared executor,
one at a time, and every result goes to the memory sink (read by ``consume``), the extra sinks
and any watchers (WebRTC sessions that show this pipeline's output). Cameras come from the
shared SourceHub, so a pipeline and viewers of the same camera share one connection. A
pipeline runs until terminated, whatever its cameras do: they reconnect on their own.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from sinks.pinning import Pin
from sources import LiveFeed, SourceError, SourceFrame
from sources.hub import SourceHub

from ..errors import Conflict, NotFound, SourceUnavailable
from ..events import EventRecorder
from ..events.describer import EventDescriber
from ..metrics import SourceMetrics
from ..tasks import Closer, TaskOwner
from ..watching import Ended, Watcher
from ..workflows.engine import CompiledWorkflow
from ..workflows.runner import WorkflowOutputs
from .feeds import SourceFeed, buffer_for
from .models import ConsumePayload, InitialisePipelinePayload, SourceReference
from .motion import MotionGate
from .processing import Processing
from .recording import Recording
from .results import PipelineResults
from .status import PipelineStatus, Severity, SourceSlot, SourceState

__all__ = ["LastSource", "Pipeline", "SourceNotFound"]


def _undecoded(_: SourceFrame) -> None:
    """A main stream's reader never decodes: nothing is delivered."""


log = logging.getLogger(__name__)


class SourceNotFound(NotFound):
    """No source with that id in the pipeline (never one, or removed)."""

    code = "source_not_found"


class LastSource(Conflict):
    """Removing a pipeline's only source would leave it nothing to do."""

    code = "last_source"


class Pipeline:
    """One headless monitoring pipeline: its sources, workflow runs, watchers and sinks."""

    def __init__(
        self,
        payload: InitialisePipelinePayload,
        references: list[SourceReference],
        workflows: list[CompiledWorkflow],
        *,
        hub: SourceHub,
        executor: Executor,
        sink_dir: Path,
        jpeg_quality: int,
        pipeline_id: str | None = None,
        source_metrics: Sequence[SourceMetrics] = (),
        events: EventRecorder | None = None,
        recording: Recording | None = None,
        pin: Pin | None = None,
        describer: EventDescriber | None = None,
    ) -> None:
        """``source_metrics``: each source's Prometheus series, in the sources' order (none:
        not kept). ``events``: where status events are also stored (none: not kept), and
        what the sources' workflows were compiled with. ``recording``: what its cameras
        record (none: nothing)."""
        self.events = events
        self._recording = recording
        self.describer = describer
        """Describes its events (``payload.describe``); None: not asked for."""
        self.pipeline_id = pipeline_id or str(uuid.uuid4())
        self.payload = payload
        self._hub = hub
        self._executor = executor
        self._jpeg_quality = jpeg_quality
        self._status = PipelineStatus(self.pipeline_id, events)
        self._running = asyncio.Event()
        self._running.set()
        self._tasks = TaskOwner(f"pipeline-{self.pipeline_id[:8]}", self._on_task_failure)
        self._terminator = Closer(self.terminate, f"pipeline-{self.pipeline_id[:8]}:terminate")
        self._terminated = False
        self._terminated_event = asyncio.Event()
        self.last_consumed = time.monotonic()
        self._sources = [
            self._slot(ref, workflow) for ref, workflow in zip(references, workflows, strict=True)
        ]
        for slot, series in zip(self._sources, source_metrics, strict=False):
            slot.metrics = series
        self._next_source_id = max(r.source_id for r in references) + 1
        self.results = PipelineResults(
            self.pipeline_id[:8],
            payload.sink_configuration,
            self.source_ids,
            sink_dir,
            executor,
            jpeg_quality,
            pin,
        )
        self._processing = Processing(
            self.pipeline_id[:8], self._running, executor, self._status, self.results, describer
        )

    def _slot(self, reference: SourceReference, workflow: CompiledWorkflow) -> SourceSlot:
        payload = self.payload
        buffer = buffer_for(reference, payload.video_configuration, payload.decoding_buffer_size)
        slot = SourceSlot(reference, buffer, workflow)
        gating = payload.motion_gating
        if gating.applies_to(reference.kind) and workflow.holds_when_still:
            slot.gate = MotionGate(gating)
        return slot

    async def start(self) -> None:
        """Subscribe to every source and start processing; raises if a source is refused."""
        self._status.event(Severity.INFO, "INFERENCE_THREAD_STARTED", {}, "inference_pipeline")
        try:
            for source in self._sources:
                self._start_source(source)
        except BaseException:
            await self.terminate()
            raise

    def _start_source(self, source: SourceSlot) -> None:
        feed = SourceFeed(
            self.pipeline_id[:8], source, self._running, self._status, self._tasks.spawn
        )
        if source.reference.kind != "file":  # cameras and devices, shared
            feed.subscribe(self._hub)
            if source.reference.detect is not None:  # the main stream: packets, never decoded
                self._read_main(source)
            recording, live = self._recording, source.recorded  # a camera URL's, not a device's
            if recording is not None and live is not None and recording.records(source.source_id):
                source.recorder = recording.start(source.source_id, live)
        else:
            self._spawn(feed.read_file())
        source.task = self._tasks.spawn(self._process(source))

    def _read_main(self, source: SourceSlot) -> None:
        """A sub-stream camera's main stream: a reader of its packets (for the recording
        and the main's picture size); refused, the source is left as it was never read."""
        try:
            main = str(source.reference.reference)
            source.main = self._hub.subscribe(main, _undecoded, decode=False)
        except SourceError as exc:
            source.stop_reading()
            raise SourceUnavailable(f"video_reference {source.reference.shown}: {exc}") from None

    @property
    def references(self) -> list[str | int]:
        """Its sources' references as they now are (sources added and removed included)."""
        return [source.reference.reference for source in self._sources]

    @property
    def sub_streams(self) -> dict[str, str] | None:
        """Its cameras' sub-streams as they now are, by main stream (None: none)."""
        subs = {
            str(s.reference.reference): s.reference.detect
            for s in self._sources
            if s.reference.detect is not None
        }
        return subs or None

    def position(self, source_id: int) -> int | None:
        """Where the source is among the pipeline's sources now; None once removed."""
        return next((i for i, s in enumerate(self._sources) if s.source_id == source_id), None)

    @property
    def next_source_id(self) -> int:
        """Never one a removed source had: results and sinks stay unambiguous."""
        return self._next_source_id

    async def add_source(
        self, reference: SourceReference, workflow: CompiledWorkflow, metrics: SourceMetrics | None
    ) -> None:
        """One more source, its own buffer and workflow, started beside the others (paused
        with them when the pipeline is); raises if it is refused (a device missing)."""
        slot = self._slot(reference, workflow)
        slot.metrics = metrics
        self._start_source(slot)  # raises before anything is kept
        self._next_source_id = max(self._next_source_id, reference.source_id + 1)
        if self.paused:
            slot.state = SourceState.PAUSED
        self._sources.append(slot)
        await self.results.add_source(reference.source_id)
        log.info(
            "pipeline %s source %d added: %s",
            self.pipeline_id[:8],
            reference.source_id,
            reference.shown,
        )

    async def remove_source(self, source_id: int) -> SourceSlot:
        """Stops one source (its reader, its workflow, its recording); the others go on."""
        slot = next((s for s in self._sources if s.source_id == source_id), None)
        if slot is None:
            raise SourceNotFound(f"pipeline {self.pipeline_id} has no source {source_id}")
        if len(self._sources) == 1:
            raise LastSource(
                f"source {source_id} is the pipeline's only one: terminate the pipeline instead"
            )
        self._sources.remove(slot)
        await self._stop_recording(slot)
        slot.stop_reading()
        await slot.buffer.close(discard=True)
        if slot.task is not None:  # its frame in the workflow finishes first
            await asyncio.gather(slot.task, return_exceptions=True)
        await self.results.remove_source(source_id)
        await asyncio.to_thread(slot.workflow.close)
        log.info("pipeline %s source %d removed", self.pipeline_id[:8], source_id)
        return slot

    async def _stop_recording(self, slot: SourceSlot) -> None:
        """Its open segment finished (a file that plays), before it leaves the camera."""
        recorder, slot.recorder = slot.recorder, None
        if recorder is not None and self._recording is not None:
            await asyncio.to_thread(self._recording.stop, slot.source_id, slot.recorded, recorder)

    async def _process(self, source: SourceSlot) -> None:
        try:
            await self._processing.frames(source)
        finally:  # however it stopped (removed, its file ended, terminated, failed)
            self.results.tell_ended(source.source_id, self._why_ended(source))

    def _why_ended(self, source: SourceSlot) -> str:
        if self._terminated:
            return f"pipeline {self.pipeline_id} was terminated"
        if source not in self._sources:
            return f"source {source.source_id} was removed from pipeline {self.pipeline_id}"
        if source.reference.kind == "file":
            return f"the video of source {source.source_id} of pipeline {self.pipeline_id} ended"
        return f"source {source.source_id} of pipeline {self.pipeline_id} stopped"

    async def consume(self, payload: ConsumePayload) -> dict[str, list[Any]]:
        """The next result, as ``consume`` answers it: one slot per source, in the order of
        its sources now (video_reference's, then any added); only this result's is filled,
        and its metadata's source_id names it."""
        result = await self.results.next(payload.wait_seconds)
        position = self.position(result.source_id) if result is not None else None
        if result is None or position is None:  # none, or one of a source since removed
            return {"outputs": [], "frames_metadata": []}
        self.last_consumed = time.monotonic()
        outputs: list[Any] = [None] * self.source_count
        metadata: list[Any] = [None] * self.source_count
        outputs[position] = await asyncio.to_thread(
            self.results.serialize, result, payload.excluded_fields
        )
        metadata[position] = result.metadata()
        return {"outputs": outputs, "frames_metadata": metadata}

    # ----------------------------------------------------------------- control

    def watch(self, watcher: Watcher, ended: Ended | None = None) -> Callable[[], None]:
        """Receive every result from now on, and (``ended``) each source that stops;
        returns the function that stops it."""
        return self.results.watch(watcher, ended)

    @property
    def outputs(self) -> WorkflowOutputs:
        """The outputs of the workflow every source runs (compiled once per source from one
        specification)."""
        return self._sources[0].workflow

    @property
    def source_count(self) -> int:
        return len(self._sources)

    def camera_feed(self, source_id: int) -> LiveFeed | None:
        """The camera connection of a source (its main stream), whose packets a restream
        may copy as they are; None for a file or a device."""
        for source in self._sources:
            if source.source_id == source_id and source.reference.kind == "camera":
                return source.recorded
        return None

    @property
    def source_ids(self) -> list[int]:
        return [source.source_id for source in self._sources]

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self) -> None:
        self._running.clear()
        for source in self._sources:
            source.state = SourceState.PAUSED
        self._status.event(Severity.INFO, "PIPELINE_PAUSED", {}, "inference_pipeline")
        log.info("pipeline %s paused", self.pipeline_id[:8])

    def resume(self) -> None:
        self._running.set()
        for source in self._sources:
            live = source.live
            source.state = SourceState.of_live(live.stats().state) if live else SourceState.RUNNING
        for source in self._sources:
            source.announce = True
        self._status.event(Severity.INFO, "PIPELINE_RESUMED", {}, "inference_pipeline")
        log.info("pipeline %s resumed", self.pipeline_id[:8])

    async def terminate(self) -> None:
        """Idempotent: stops the sources (leaving the hub), the tasks and the sinks; a
        second call waits for the first to finish."""
        if self._terminated:
            await self._terminated_event.wait()
            return
        self._terminated = True
        for source in self._sources:
            await self._stop_recording(source)
            source.stop_reading()
            await source.buffer.close(discard=True)
        self._running.set()  # wake tasks parked on a pause so they can finish
        self.results.stop_waiting()  # and long polls
        await self._tasks.close()
        await self.results.close()
        for source in self._sources:
            await asyncio.to_thread(source.workflow.close)
        if self.describer is not None:
            await asyncio.to_thread(self.describer.close)
        self._terminated_event.set()

    async def wait_terminated(self) -> None:
        """Until the pipeline has stopped: terminated, or failed and stopped by itself."""
        await self._terminated_event.wait()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._tasks.spawn(coro)

    def _on_task_failure(self, name: str, exc: BaseException) -> None:
        # A bug of ours: the pipeline stops (sources, sinks flushed) and its status says why;
        # it stays listed until terminated, so whoever watches it can read that.
        failure = {"task": name.partition(":")[2], "error": type(exc).__name__}
        self._status.event(Severity.ERROR, "PIPELINE_FAILED", failure, "inference_pipeline")
        for source in self._sources:
            source.state = SourceState.ERROR
        self._terminator()

    # ------------------------------------------------------------------ status

    def report(self) -> dict[str, Any]:
        report = self._status.report(self._sources, self.paused, self.results.stats())
        if self.describer is not None:
            report["descriptions"] = self.describer.stats()
        return report
