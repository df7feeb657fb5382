"""What one event is, as pipelines and sessions produce it and the store keeps it."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

__all__ = ["EventKind", "EventRecord", "EventRecorder"]


class EventKind(StrEnum):
    """What happened. Pipeline status events keep their own names, lower-cased
    (``pipeline_paused``, ``video_consumption_finished``): any text is a valid kind."""

    LINE_CROSSING = "line_crossing"
    """A tracked object crossed a line counter's line; ``direction`` is ``in`` or ``out``."""
    ZONE_ENTRY = "zone_entry"
    ZONE_EXIT = "zone_exit"
    """A tracked object left a zone; the payload says how long it was in (``time_in_zone``)."""
    EVENT_SINK = "event_sink"
    """``visionstream/event_sink@v1`` fired: its record, snapshot and clip."""
    SOURCE_STATE = "source_state"
    """A pipeline source's state changed (``previous_state`` -> ``new_state``)."""
    SOURCE_ERROR = "source_error"
    INFERENCE_ERROR = "inference_error"
    PIPELINE_FAILED = "pipeline_failed"
    VERIFICATION = "verification"
    """A notification step's verdict from a vision-language model (``verify``): sent or
    not, and why (``description``, ``verdict``)."""


@dataclass(frozen=True)
class EventRecord:
    """One event. ``snapshot`` and ``clip`` are paths relative to the evidence directory
    (``VISIONSTREAM_SINK_DIR``), which every node of a cluster must reach."""

    kind: str
    pipeline: str
    """The pipeline's id; a WebRTC session's events carry ``session:<id>``."""
    source: str
    """The pipeline's source id (``0``, ``1``...); a session's is ``webrtc``."""
    step: str | None = None
    """The workflow step that produced it; None for a source's or a pipeline's own events."""
    at: float = field(default_factory=time.time)
    """When it happened: the server's clock, seconds since the epoch."""
    direction: str | None = None
    """``in`` / ``out`` for a line crossing; None otherwise."""
    class_name: str | None = None
    tracker_id: int | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    """Everything else, JSON-serialisable (counts, confidence, box, error message)."""
    snapshot: str | None = None
    clip: str | None = None
    description: str | None = None
    """What a vision-language model said of it (searched by ``GET /events?q=``)."""
    verdict: dict[str, Any] | None = None
    """A verification's ``confirmed``, ``reason`` and ``sent``."""
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    """Names the event before the store gives it an id: what a description is written
    back to."""


class EventRecorder(Protocol):
    """Where producers hand events; never blocks (a full queue drops and counts)."""

    def record(self, event: EventRecord) -> None: ...
