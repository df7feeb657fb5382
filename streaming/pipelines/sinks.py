"""SinkFanOut: where a pipeline's results go besides its memory buffer: every sink its
request set (``sinks.base.ResultSink``: JSONL, webhook, video files, ...), each guarded so
that one failing never stops the pipeline or the others."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sinks.base import ResultSink, SinkContext, SinkSettings
from sinks.pinning import Pin

from ..workflows.blocks.base import WorkflowImage
from .models import SinkConfiguration

if TYPE_CHECKING:
    from ..watching import PipelineResult

__all__ = ["SinkFanOut"]

log = logging.getLogger(__name__)

Record = Callable[["PipelineResult"], dict[str, Any]]
"""A result as one JSON record (its metadata and outputs, no images)."""


class _Written:
    """A pipeline result as its sinks get it (``sinks.base.Written``)."""

    def __init__(self, result: PipelineResult, record: Record) -> None:
        self._result = result
        self._record = record
        self.source_id = result.source_id

    def record(self) -> dict[str, Any]:
        return self._made

    @cached_property
    def _made(self) -> dict[str, Any]:
        return self._record(self._result)

    def image(self, output: str | None) -> np.ndarray:
        outputs = self._result.outputs
        if output is not None:
            value = outputs.get(output)
        else:
            value = next((v for v in outputs.values() if isinstance(v, WorkflowImage)), None)
        return value.numpy if isinstance(value, WorkflowImage) else self._result.frame.image


class SinkFanOut:
    """Opened with the pipeline, written from a worker thread, closed once."""

    def __init__(
        self,
        pipeline: str,
        config: SinkConfiguration,
        source_ids: Iterable[int],
        sink_dir: Path,
        record: Record,
        pin: Pin | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._record = record
        # Started-at in file names: a restarted pipeline never overwrites earlier files.
        context = SinkContext(pipeline, sink_dir, time.strftime("%Y%m%d-%H%M%S"), pin)
        self._sinks: list[ResultSink] = [
            settings.open(context) for _, settings in config if isinstance(settings, SinkSettings)
        ]
        self._errors: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._closed = False
        for source_id in source_ids:
            self.add_source(source_id)

    def add_source(self, source_id: int) -> None:
        """A source of the pipeline (also one added while it runs)."""
        with self._lock:
            for sink in self._sinks:
                sink.add_source(source_id)

    def remove_source(self, source_id: int) -> None:
        """Blocking: what the sinks hold of the source finished (waits out a write)."""
        with self._lock:
            for sink in self._sinks:
                self.guarded(sink.name, sink.remove_source, source_id)

    @property
    def any(self) -> bool:
        """Whether there is anything to write (else the pipeline skips the thread hop)."""
        return bool(self._sinks)

    def write(self, result: PipelineResult) -> None:
        """Blocking: on a worker thread. Under the lock: the pipeline's end cancels the task
        awaiting this, not this thread, and closing an encoder while it encodes would crash
        the process."""
        with self._lock:
            if self._closed:
                return
            written = _Written(result, self._record)
            for sink in self._sinks:
                self.guarded(sink.name, sink.write, written)

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

    def close(self) -> None:
        """Blocking; idempotent. Waits out a write in progress, then flushes and closes
        every sink (recordings finalised, JSONL flushed, webhook queue dropped and counted)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for sink in self._sinks:
            self.guarded(sink.name, sink.close)

    def stats(self) -> dict[str, Any]:
        """Per sink: what it wrote, and its errors."""
        out: dict[str, Any] = {}
        for sink in self._sinks:
            if stats := sink.stats():
                out[sink.name] = stats
        for sink_name, errors in self._errors.items():
            out.setdefault(sink_name, {}).update(errors)
        return out
