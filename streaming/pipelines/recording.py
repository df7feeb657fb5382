"""A pipeline's recordings: one ``SegmentRecorder`` per camera source, fed by the camera's
reader with the packets it demuxes, under ``<sink_dir>/recordings/<pipeline>/<source>/``;
and, for ``mode="events"``, the tee that hands each of a source's workflow events to its
recorder as a trigger on the way to the event store."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path

from sinks.recording.recorder import RecordingPolicy, SegmentRecorder
from sources import LiveFeed

from ..events import EventRecord, EventRecorder
from .models import RecordConfiguration

__all__ = ["Recording", "SourceTriggers", "recording_directory"]

_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def recording_directory(sink_dir: Path, pipeline: str, source: str) -> Path | None:
    """Where a source's segments are; None for names that are not a pipeline's or a
    source's (a path, ``..``)."""
    if not (_PART.match(pipeline) and _PART.match(source)):
        return None
    return sink_dir / "recordings" / pipeline / source


class SourceTriggers:
    """An ``EventRecorder`` in front of the event store (or of nothing): every event of a
    workflow step also triggers its source's recorder."""

    def __init__(self, store: EventRecorder | None) -> None:
        self._store = store
        self._triggers: dict[str, Callable[[float], None]] = {}
        self._lock = threading.Lock()

    def watch(self, source: str, trigger: Callable[[float], None] | None) -> None:
        with self._lock:
            if trigger is None:
                self._triggers.pop(source, None)
            else:
                self._triggers[source] = trigger

    def record(self, event: EventRecord) -> None:
        if self._store is not None:
            self._store.record(event)
        if event.step is None:  # a source's or the pipeline's own event
            return
        with self._lock:
            trigger = self._triggers.get(event.source)
        if trigger is not None:
            trigger(event.at)


class Recording:
    """What a pipeline records, as its request's ``sink_configuration.record`` says."""

    def __init__(
        self,
        config: RecordConfiguration,
        sink_dir: Path,
        pipeline_id: str,
        min_free_bytes: int,
        triggers: SourceTriggers | None,
    ) -> None:
        self._directory = sink_dir / "recordings" / pipeline_id
        self._triggers = triggers
        self._sources = set(config.source_ids) if config.source_ids is not None else None
        gigabytes = config.max_gigabytes
        hours = config.max_age_hours
        self._policy = RecordingPolicy(
            mode=config.mode,
            segment_s=config.segment_seconds,
            pre_s=config.pre_seconds,
            post_s=config.post_seconds,
            max_age_s=hours * 3600 if hours is not None else None,
            max_bytes=int(gigabytes * (1 << 30)) if gigabytes is not None else None,
            min_free_bytes=min_free_bytes,
        )

    def records(self, source_id: int) -> bool:
        return self._sources is None or source_id in self._sources

    def start(self, source_id: int, live: LiveFeed) -> SegmentRecorder:
        recorder = SegmentRecorder(self._directory / str(source_id), self._policy)
        live.add_packet_sink(recorder)
        if self._triggers is not None and self._policy.mode == "events":
            self._triggers.watch(str(source_id), recorder.trigger)
        return recorder

    def stop(self, source_id: int, live: LiveFeed | None, recorder: SegmentRecorder) -> None:
        """Blocks while the open segment is finished (call off the loop)."""
        if self._triggers is not None:
            self._triggers.watch(str(source_id), None)
        if live is not None:
            live.remove_packet_sink(recorder)
        recorder.close()
