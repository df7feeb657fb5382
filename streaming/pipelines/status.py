"""What a pipeline reports: its sources' states, its events, its throughput and latencies, in
the reference's status shape (pipelines-api.md) plus our own keys."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum, StrEnum
from typing import Any

from sinks.recording.recorder import SegmentRecorder
from sources import FileSource, LiveFeed, LiveStats
from sources.hub import Subscription

from ..buffering import FrameBuffer
from ..events import EventKind, EventRecord, EventRecorder
from ..feed import FedFrame
from ..metrics import SourceMetrics
from ..workflows.engine import CompiledWorkflow
from .models import SourceReference
from .motion import MotionGate

__all__ = ["PipelineStatus", "Severity", "SourceSlot", "SourceState"]

_EVENTS = 512
_LATENCY_WINDOW = 64
_THROUGHPUT_WINDOW_S = 5.0


class SourceState(StrEnum):
    """A source's state, by the reference's names."""

    NOT_STARTED = "NOT_STARTED"
    INITIALISING = "INITIALISING"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    PAUSED = "PAUSED"
    ENDED = "ENDED"
    ERROR = "ERROR"

    @classmethod
    def of_live(cls, state: str) -> SourceState:
        """A ``LiveSource`` state (``LiveState`` value) as the reference names it."""
        return _LIVE_STATES.get(state, cls.ERROR)


_LIVE_STATES = {
    "connecting": SourceState.INITIALISING,
    "streaming": SourceState.RUNNING,
    "reconnecting": SourceState.RESTARTING,
    "closed": SourceState.ENDED,
}


class Severity(IntEnum):
    """Event severities, as Python's logging levels (the reference's numbers)."""

    INFO = 20
    WARNING = 30
    ERROR = 40


_RATE_WINDOW = 30
"""Frames the achieved rate is measured over."""


def _rate(times: deque[float]) -> float | None:
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return (len(times) - 1) / span if span > 0 else None


def _rounded(value: float | None) -> float | None:
    return round(value, 2) if value is not None else None


@dataclass(eq=False)
class SourceSlot:
    """One source of a pipeline: where its frames come from, its buffer and workflow, and
    what the status says about it."""

    reference: SourceReference
    buffer: FrameBuffer[FedFrame]
    workflow: CompiledWorkflow
    subscription: Subscription | None = None
    file: FileSource | None = None
    state: SourceState = SourceState.NOT_STARTED
    processed: int = 0
    last_frame_id: int = 0
    last_completed_at: float | None = None
    completions: deque[float] = field(default_factory=lambda: deque(maxlen=_RATE_WINDOW))
    """When its last frames were done (``time.monotonic()``): the rate achieved."""
    latencies: deque[tuple[float, float, float]] = field(
        default_factory=lambda: deque(maxlen=_LATENCY_WINDOW)
    )
    listener: Callable[[str, str, LiveStats], None] | None = None
    metrics: SourceMetrics | None = None
    announce: bool = True
    """Log the next processed frame (the first, and the first after each reconnection)."""
    task: asyncio.Task[None] | None = None
    """The task that runs its frames through its workflow (ends when its buffer closes)."""
    main: Subscription | None = None
    """A camera with a sub-stream: its main stream's reader (packets only, recorded)."""
    gate: MotionGate | None = None
    """Its motion gate (``payload.motion_gating``); None: its models run on every frame."""
    recorder: SegmentRecorder | None = None
    """Its camera's recording (``sink_configuration.record``); None: not recorded."""

    def stop_reading(self) -> None:
        """Leave the hub (or stop reading the file); idempotent."""
        live = self.live
        if live is not None and self.listener is not None:
            live.remove_listener(self.listener)
        if self.subscription is not None:
            self.subscription.close()
        if self.main is not None:
            self.main.close()
        if self.file is not None:
            self.file.close()

    @property
    def source_id(self) -> int:
        return self.reference.source_id

    @property
    def recorded(self) -> LiveFeed | None:
        """The camera stream a recording taps: the main stream where a sub-stream is what
        is decoded."""
        source = self.main.source if self.main is not None else None
        main = source.live() if source is not None else None
        return main if main is not None else self.live

    @property
    def live(self) -> LiveFeed | None:
        source = self.subscription.source if self.subscription is not None else None
        return source.live() if source is not None else None

    def _main_report(self) -> dict[str, Any] | None:
        if self.reference.detect is None:
            return None
        main = self.recorded if self.main is not None else None
        return {
            "detect_reference": SourceReference.shown_of(self.reference.detect),
            "main_stats": main.stats().to_dict() if main is not None else None,
            "main_size": list(main.size) if main is not None and main.size else None,
        }

    def latency_report(self) -> dict[str, Any]:
        entries = list(self.latencies)
        names = ("frame_decoding_latency", "inference_latency", "e2e_latency")
        averages = (
            [round(sum(e[i] for e in entries) / len(entries), 4) for i in range(3)]
            if entries
            else [None, None, None]
        )
        return {"source_id": self.source_id, **dict(zip(names, averages, strict=True))}

    def metadata_report(self) -> dict[str, Any]:
        live = self.live
        stats = live.stats().to_dict() if live is not None else None
        properties = None
        if self.processed or (stats and stats["frames"]):
            properties = {
                "is_file": self.reference.kind == "file",
                "fps": stats["fps_in"] if stats else None,
            }
        return {
            "source_properties": properties,
            "source_reference": self.reference.shown,
            "buffer_size": self.buffer.capacity,
            "state": self.state.value,
            "buffer_filling_strategy": self.buffer.filling.value,
            "buffer_consumption_strategy": self.buffer.consumption.value,
            "source_id": self.source_id,
            # Ours: the camera's own stats (masked), and every drop by reason.
            "stats": stats,
            "drops": dict(self.buffer.drops),
            # Ours: a camera with a sub-stream: ``stats`` are the sub-stream's (decoded),
            # these its main stream's (packets read and recorded, never decoded).
            "sub_stream": self._main_report(),
            "frames_processed": self.processed,
            # Ours: the rate asked for, the rate its sampler keeps of the stream, and the
            # results a second this source gets (its last frames done).
            "max_fps": self.buffer.max_fps,
            "sampled_fps": _rounded(self.buffer.sampler.achieved if self.buffer.sampler else None),
            "results_fps": _rounded(_rate(self.completions)),
            # Ours: a gated source's frames its models ran on and did not (nothing moved).
            "motion": self.gate.stats().to_dict() if self.gate is not None else None,
        }

    def completion_report(self) -> dict[str, Any]:
        return {
            "source_id": self.source_id,
            "completed_frames": self.processed,
            "last_completed_at_monotonic": self.last_completed_at,
            "last_frame_id": self.last_frame_id or None,
        }


_KINDS = {
    "SOURCE_STATE_UPDATE": EventKind.SOURCE_STATE,
    "SOURCE_ERROR": EventKind.SOURCE_ERROR,
    "INFERENCE_ERROR": EventKind.INFERENCE_ERROR,
    "PIPELINE_FAILED": EventKind.PIPELINE_FAILED,
}


class PipelineStatus:
    """The pipeline's events (bounded, recorded from any thread) and its throughput."""

    def __init__(self, pipeline_id: str = "", events: EventRecorder | None = None) -> None:
        """``events``: where each status event is also stored (the event store), as kind
        ``source_state``, ``source_error``, ``inference_error``, ``pipeline_failed`` or the
        status event's own name lower-cased."""
        self._events: deque[dict[str, Any]] = deque(maxlen=_EVENTS)
        self._processed_at: deque[float] = deque(maxlen=100)
        self._pipeline_id = pipeline_id
        self._store = events

    def event(self, severity: Severity, event_type: str, payload: dict, context: str) -> None:
        # deque.append is atomic: camera reader threads add events too.
        self._events.append(
            {
                "timestamp": datetime.now().isoformat(),
                "severity": int(severity),
                "event_type": event_type,
                "payload": payload,
                "context": context,
            }
        )
        if self._store is not None:
            source = payload.get("source_id")
            stored = {k: str(v) if isinstance(v, StrEnum) else v for k, v in payload.items()}
            self._store.record(
                EventRecord(
                    _KINDS.get(event_type, event_type.lower()),
                    self._pipeline_id,
                    "" if source is None else str(source),
                    payload={**stored, "severity": severity.name.lower(), "context": context},
                )
            )

    def processed(self, at: float) -> None:
        self._processed_at.append(at)

    def inference_error(self, error: BaseException) -> None:
        """A frame's workflow run failed (the pipeline goes on with the next frame)."""
        payload = {
            "error_type": type(error).__name__,
            "error_message": str(error),
            "error_context": "inference_thread",
        }
        self.event(Severity.ERROR, "INFERENCE_ERROR", payload, "inference_pipeline")

    def video_finished(self, source_id: int) -> None:
        """A file source played to its end."""
        self.event(
            Severity.INFO, "VIDEO_CONSUMPTION_FINISHED", {"source_id": source_id}, "video_source"
        )

    def report(
        self, sources: list[SourceSlot], paused: bool, sinks: dict[str, Any]
    ) -> dict[str, Any]:
        now = time.monotonic()
        recent = [t for t in self._processed_at if now - t <= _THROUGHPUT_WINDOW_S]
        span = recent[-1] - recent[0] if len(recent) > 1 else 0.0
        throughput = (len(recent) - 1) / span if span > 0 else 0.0
        return {
            "video_source_status_updates": list(self._events),
            "latency_reports": [s.latency_report() for s in sources],
            "inference_throughput": round(throughput, 2),
            "sources_metadata": [s.metadata_report() for s in sources],
            "completion_statistics": {
                "sampled_at_monotonic": now,
                "sources": [s.completion_report() for s in sources],
            },
            "paused": paused,
            "sinks": sinks,
            "restarting": False,
        }

    @staticmethod
    def restarting_report() -> dict[str, Any]:
        """A pipeline being restarted elsewhere (Ray moving its actor): it exists, and
        nothing is known of its sources until it runs again."""
        return {
            "video_source_status_updates": [],
            "latency_reports": [],
            "inference_throughput": 0.0,
            "sources_metadata": [],
            "completion_statistics": {"sampled_at_monotonic": time.monotonic(), "sources": []},
            "paused": False,
            "sinks": {},
            "restarting": True,
        }
