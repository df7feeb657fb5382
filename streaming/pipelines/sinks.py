"""SinkFanOut: where a pipeline's results go besides its memory buffer (JSONL, webhook, video
files), each sink guarded so that one failing never stops the pipeline or the others."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sinks import JsonLinesWriter, RollingVideoRecorder, WebhookSink

from ..workflows.blocks.base import WorkflowImage
from .models import SinkConfiguration

if TYPE_CHECKING:
    from ..watching import PipelineResult

__all__ = ["SinkFanOut"]

log = logging.getLogger(__name__)

Record = Callable[["PipelineResult"], dict[str, Any]]
"""A result as one JSON record (its metadata and outputs, no images)."""


class SinkFanOut:
    """Opened with the pipeline, written from a worker thread, closed once."""

    def __init__(
        self,
        pipeline: str,
        config: SinkConfiguration,
        source_ids: Iterable[int],
        sink_dir: Path,
        record: Record,
    ) -> None:
        self._pipeline = pipeline
        self._record = record
        self._video_output = config.video_file.output if config.video_file else None
        self._jsonl: JsonLinesWriter | None = None
        self._videos: dict[int, RollingVideoRecorder] = {}
        self._webhook: WebhookSink | None = None
        self._errors: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._closed = False
        if config.jsonl is not None:
            self._jsonl = JsonLinesWriter(sink_dir / f"{config.jsonl.name}.jsonl", append=True)
        if config.webhook is not None:
            hook = config.webhook
            self._webhook = WebhookSink(
                hook.url,
                queue_size=hook.queue_size,
                timeout_s=hook.timeout_seconds,
                max_attempts=hook.max_attempts,
            )
        self._video_file = config.video_file
        self._sink_dir = sink_dir
        # Started-at in the name: a restarted pipeline never overwrites earlier segments.
        self._started = time.strftime("%Y%m%d-%H%M%S")
        for source_id in source_ids:
            self.add_source(source_id)

    def add_source(self, source_id: int) -> None:
        """A source's own recording, if the pipeline records video (also for a source added
        while it runs)."""
        if self._video_file is None:
            return
        stem = f"{self._video_file.name}-source{source_id}-{self._started}"
        recorder = RollingVideoRecorder(self._sink_dir, stem, self._video_file.segment_seconds)
        with self._lock:
            self._videos[source_id] = recorder

    def remove_source(self, source_id: int) -> None:
        """Blocking: the source's recording finalised (waits out a write in progress)."""
        with self._lock:
            recorder = self._videos.pop(source_id, None)
            if recorder is not None:
                self.guarded("video_file", recorder.close)

    @property
    def any(self) -> bool:
        """Whether there is anything to write (else the pipeline skips the thread hop)."""
        return self._jsonl is not None or self._webhook is not None or bool(self._videos)

    def write(self, result: PipelineResult) -> None:
        """Blocking: on a worker thread. Under the lock: the pipeline's end cancels the task
        awaiting this, not this thread, and closing an encoder while it encodes would crash
        the process."""
        with self._lock:
            if not self._closed:
                self._write(result)

    def _write(self, result: PipelineResult) -> None:
        if self._jsonl is not None or self._webhook is not None:
            record = self._record(result)
            if self._jsonl is not None:
                self.guarded("jsonl", self._jsonl.write, record)
            if self._webhook is not None:
                self.guarded("webhook", self._webhook.write, record)
        recorder = self._videos.get(result.source_id)
        if recorder is not None:
            image = self._image_to_record(result.outputs)
            frame = image if image is not None else result.frame.image
            self.guarded("video_file", recorder.write, frame, time.monotonic())

    def guarded(self, sink: str, write: Callable[..., None], *args: Any) -> None:
        """A failing sink (disk full, a codec error) is counted and reported in the status;
        it never stops the pipeline or the other sinks."""
        try:
            write(*args)
        except Exception as exc:
            errors = self._errors.setdefault(sink, {"errors": 0, "last_error": None})
            if not errors["errors"]:
                log.warning("pipeline %s: %s sink failed", self._pipeline, sink, exc_info=exc)
            errors["errors"] += 1
            errors["last_error"] = f"{type(exc).__name__}: {exc}"

    def _image_to_record(self, outputs: dict[str, Any]) -> Any:
        if self._video_output is not None:
            value = outputs.get(self._video_output)
            return value.numpy if isinstance(value, WorkflowImage) else None
        for value in outputs.values():
            if isinstance(value, WorkflowImage):
                return value.numpy
        return None

    def close(self) -> None:
        """Blocking; idempotent. Waits out a write in progress, then flushes and closes
        every sink (recordings finalised, JSONL flushed, webhook queue dropped and counted)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._jsonl is not None:
            self.guarded("jsonl", self._jsonl.close)
        for recorder in self._videos.values():
            self.guarded("video_file", recorder.close)
        if self._webhook is not None:
            self.guarded("webhook", self._webhook.close)

    def stats(self) -> dict[str, Any]:
        """Per sink: what it wrote, and its errors."""
        out: dict[str, Any] = {}
        if self._jsonl is not None:
            out["jsonl"] = {"lines": self._jsonl.lines, "file": self._jsonl.path.name}
        if self._videos:
            out["video_file"] = {
                str(i): [p.name for p in r.segments] for i, r in self._videos.items()
            }
        if self._webhook is not None:
            out["webhook"] = {**self._webhook.stats.__dict__, "pending": self._webhook.pending()}
        for sink, errors in self._errors.items():
            out.setdefault(sink, {}).update(errors)
        return out
