"""One pipeline source's frames through its workflow, one at a time on the shared executor
(its motion gate first, ``motion.run_gated``): each result counted, timed, scaled to the
main stream where the workflow ran on a sub-stream, and handed to the pipeline's results."""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial

from sources import SourceFrame

from ..events.describer import EventDescriber
from ..watching import PipelineResult
from ..workflows.runner import FrameFacts
from .motion import run_gated
from .results import PipelineResults
from .status import PipelineStatus, SourceSlot, SourceState
from .substreams import scale_between, scaled_outputs

__all__ = ["Processing"]

log = logging.getLogger("streaming.pipelines.pipeline")  # its lines, as operators know them


@dataclass(frozen=True)
class Processing:
    """What a pipeline's sources are processed with."""

    pipeline: str
    """Its short id, for the log."""
    running: asyncio.Event
    """Cleared while the pipeline is paused."""
    executor: Executor
    status: PipelineStatus
    results: PipelineResults
    describer: EventDescriber | None = None
    """Gets each frame its workflow ran on: the picture of that frame's events."""

    async def frames(self, source: SourceSlot) -> None:
        """Until its buffer closes (or, a file, ends)."""
        loop = asyncio.get_running_loop()
        source_id = source.reference.source_id
        while True:
            await self.running.wait()
            item = await source.buffer.get()
            if item is None:
                break
            frame = item.frame
            assert isinstance(frame, SourceFrame)  # cameras and files decode to these
            live = source.live
            facts = FrameFacts(
                str(source_id),
                frame.index + 1,
                item.received_at,
                fps=item.fps,  # a file's own rate: its frames' times (time in zone) are exact
                from_file=item.from_file,
                # A tracker starts afresh after a reconnection (its tracks are stale);
                # counters keep counting.
                stream_restarts=live.reconnects if live else 0,
            )
            started = time.perf_counter()
            run = await loop.run_in_executor(
                self.executor, run_gated, source.workflow, source.gate, frame, facts
            )
            if self.describer is not None:  # the events of this frame are recorded by now
                # Bound now: the pixels are made later, on the describer's thread.
                self.describer.frame_done(str(source_id), partial(getattr, frame, "image"))
            if run.error is not None:  # one bad frame must not end a monitoring pipeline
                self.status.inference_error(run.error)
                continue
            done = time.perf_counter()
            received_mono = item.received_mono
            source.latencies.append((started - received_mono, done - started, done - received_mono))
            source.processed += 1
            source.last_frame_id = facts.frame_number
            source.last_completed_at = time.monotonic()
            source.completions.append(source.last_completed_at)
            if source.metrics is not None:
                gate = source.gate.stats() if source.gate is not None else None
                source.metrics.frame(facts.stream_restarts, source.buffer.dropped, gate)
            self.status.processed(source.last_completed_at)
            if source.announce:
                source.announce = False
                log.info("pipeline %s source %d: processing", self.pipeline, source_id)
            outputs = run.outputs
            if source.main is not None:  # a sub-stream's detections, in the main's pixels
                outputs = scaled_outputs(outputs, scale_between(source.recorded, live))
            result = PipelineResult(source_id, facts.frame_number, item.received_at, frame, outputs)
            await self.results.dispatch(result)
        if source.reference.kind == "file":
            if source.state is not SourceState.ERROR:
                source.state = SourceState.ENDED
            self.status.video_finished(source_id)
