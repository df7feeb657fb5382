"""Counting and timing tracked objects: ``roboflow_core/line_counter@v1/v2`` (supervision's
``LineZone``) and ``roboflow_core/time_in_zone@v1..v3`` (supervision's ``PolygonZone``).

Both need tracked detections (a ``tracker_id``); their counts and clocks belong to the block
instance, i.e. to one stream. Times come from the frames' own clock: for a video file the
frame number over its fps (so a file processed faster or slower than real time still gets
its true times), else the frame's timestamp, as the reference does.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from ...events import EventKind
from .base import Block, BlockSettings, BuildContext, FrameState, select, setting
from .checks import anchor, points, polygons
from .fields import DETECTION_KINDS, DETECTIONS, IMAGE, VIDEO_METADATA, FieldSpec, Takes

__all__ = [
    "LineCounterBlock",
    "LineCounterV1Block",
    "TimeInZoneBlock",
    "TrackMemory",
    "object_facts",
    "tracked",
]

T = TypeVar("T")

FORGET_AFTER_S = 60.0
"""A track unseen this long (the stream's clock) is dropped from a block's state: far beyond
any tracker's lost-track buffer, so a track that comes back is still the same one."""


class TrackMemory(Generic[T]):
    """Per-track values that forget tracks unseen for ``forget_after`` seconds."""

    def __init__(self, forget_after: float = FORGET_AFTER_S) -> None:
        self._values: dict[int, T] = {}
        self._seen: dict[int, float] = {}
        self._forget_after = forget_after
        self._pruned_at: float | None = None

    def get(self, track: int) -> T | None:
        return self._values.get(track)

    def put(self, track: int, value: T, now: float) -> None:
        self._values[track] = value
        self._seen[track] = now

    def pop(self, track: int) -> None:
        self._values.pop(track, None)
        self._seen.pop(track, None)

    def prune(self, now: float) -> None:
        """Forget stale tracks; cheap to call every frame (it scans once per period)."""
        if self._pruned_at is not None and 0 <= now - self._pruned_at < self._forget_after:
            return
        self._pruned_at = now
        for track, seen in list(self._seen.items()):
            # A clock that went backwards (a file looped, a camera's clock reset) forgets too.
            if not 0 <= now - seen <= self._forget_after:
                self.pop(track)

    def __len__(self) -> int:
        return len(self._values)


_TRACKED = "detections must come from a tracker (byte_tracker): they carry no tracker_id"


def tracked(step: str, detections: sv.Detections) -> sv.Detections:
    """``detections`` as given; an error when they have no tracker ids."""
    if detections.tracker_id is None:
        if len(detections) == 0:
            return detections
        raise WorkflowCompilationError(f"step '{step}': {_TRACKED}")
    return detections


@dataclass(frozen=True, kw_only=True)
class LineCounterSettings(BlockSettings):
    line_segment: Any = setting(FieldSpec())
    # None: a box's four corners must all cross (LineZone's own default, v2's).
    triggering_anchor: Any = setting(FieldSpec(default=None))


class LineCounterBlock(Block):
    """Objects crossing a line, each way. A track still unconfirmed (``tracker_id`` -1) is
    never counted: supervision would count all of them as one object (its issue 2578)."""

    type_ids = ("roboflow_core/line_counter@v2",)
    passes_kind = "detections"
    inputs = {
        "detections": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME),
        "image": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),  # v2
        "metadata": FieldSpec((VIDEO_METADATA,), default=None, takes=Takes.FRAME),  # v1
    }
    Settings: ClassVar[type[BlockSettings]] = LineCounterSettings
    outputs = {
        "count_in": "integer",
        "count_out": "integer",
        "detections_in": DETECTIONS,
        "detections_out": DETECTIONS,
    }

    def __init__(self, name: str, config: LineCounterSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        start, end = points(name, "line_segment", config.line_segment, count=2)
        given = config.triggering_anchor
        self._report = context.analytics
        self._context = context
        start_point, end_point = sv.Point(*start), sv.Point(*end)
        if given is None:
            self._zone = sv.LineZone(start=start_point, end=end_point)
        else:
            position = anchor(name, "triggering_anchor", given)
            self._zone = sv.LineZone(start_point, end_point, triggering_anchors=[position])

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        detections = tracked(self.name, inputs["detections"])
        if detections.tracker_id is not None:
            detections = select(detections, detections.tracker_id >= 0)
        crossed_in, crossed_out = self._zone.trigger(detections)
        if self._report is not None:
            self._report.line(self.name, self._zone.in_count, self._zone.out_count)
        went_in, went_out = select(detections, crossed_in), select(detections, crossed_out)
        if self._context.events is not None:
            counts = {"count_in": self._zone.in_count, "count_out": self._zone.out_count}
            for direction, crossed in (("in", went_in), ("out", went_out)):
                for fields in object_facts(crossed, frame):
                    fields["payload"].update(counts)
                    self._context.event(
                        EventKind.LINE_CROSSING, self.name, direction=direction, **fields
                    )
        frame.add_time("analytics", started)
        return {
            "count_in": self._zone.in_count,
            "count_out": self._zone.out_count,
            "detections_in": went_in,
            "detections_out": went_out,
        }


@dataclass(frozen=True, kw_only=True)
class LineCounterV1Settings(LineCounterSettings):
    triggering_anchor: Any = setting(FieldSpec(default="CENTER"))


class LineCounterV1Block(LineCounterBlock):
    """v1: the same counting; a box's center crosses unless told otherwise."""

    type_ids = ("roboflow_core/line_counter@v1",)
    passes_kind = "detections"
    inputs = {**LineCounterBlock.inputs}
    Settings: ClassVar[type[BlockSettings]] = LineCounterV1Settings


@dataclass(frozen=True, kw_only=True)
class TimeInZoneSettings(BlockSettings):
    zone: Any = setting(FieldSpec())
    triggering_anchor: Any = setting(FieldSpec(default="CENTER"))
    remove_out_of_zone_detections: Any = setting(FieldSpec(default=True))
    reset_out_of_zone_detections: Any = setting(FieldSpec(default=True))


class TimeInZoneBlock(Block):
    """How long each tracked object has been in a zone (v3: in any of several zones), as
    ``time_in_zone`` seconds on each detection; objects outside dropped unless asked."""

    type_ids = (
        "roboflow_core/time_in_zone@v1",
        "roboflow_core/time_in_zone@v2",
        "roboflow_core/time_in_zone@v3",
    )
    passes_kind = "detections"
    inputs = {
        "detections": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME),
        "image": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),
        "metadata": FieldSpec((VIDEO_METADATA,), default=None, takes=Takes.FRAME),  # v1
    }
    Settings: ClassVar[type[BlockSettings]] = TimeInZoneSettings
    outputs = {"timed_detections": DETECTIONS}

    def __init__(self, name: str, config: TimeInZoneSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        zones = polygons(name, "zone", config.zone)
        position = anchor(name, "triggering_anchor", config.triggering_anchor)
        self._zones = [
            sv.PolygonZone(np.array(p, dtype=np.int32), triggering_anchors=(position,))
            for p in zones
        ]
        for key in ("remove_out_of_zone_detections", "reset_out_of_zone_detections"):
            if not isinstance(getattr(config, key), bool):
                raise WorkflowCompilationError(
                    f"step '{name}': {key} must be true or false, got {getattr(config, key)!r}"
                )
        self._report = context.analytics
        self._remove = config.remove_out_of_zone_detections
        self._reset = config.reset_out_of_zone_detections
        self._entered: TrackMemory[float] = TrackMemory()
        """Tracker id -> when it entered (the frames' clock)."""
        self._context = context
        self._present: TrackMemory[float] = TrackMemory()
        """Tracker id -> when it entered, for tracks now inside: entries and exits are
        events whatever the reset rule of ``time_in_zone``."""

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        detections = tracked(self.name, inputs["detections"])
        now = frame.facts.seconds
        self._entered.prune(now)
        inside = np.zeros(len(detections), dtype=bool)
        for zone in self._zones:
            inside |= zone.trigger(detections)
        seconds = np.zeros(len(detections), dtype=np.float64)
        ids: Any = detections.tracker_id if detections.tracker_id is not None else []
        for i, tracker_id in enumerate(int(t) for t in ids):
            if inside[i]:
                entered = self._entered.get(tracker_id)
                entered = now if entered is None else entered
                self._entered.put(tracker_id, entered, now)
                seconds[i] = now - entered
            elif self._reset or not self._remove:
                # The reference's rule: an object seen outside starts again on its next
                # entry, unless out-of-zone objects are dropped and not reset.
                self._entered.pop(tracker_id)
        # A copy: the input detections may feed other steps.
        kept = select(detections, inside if self._remove else np.arange(len(detections)))
        kept.data["time_in_zone"] = seconds[inside] if self._remove else seconds
        if self._report is not None:
            self._report.zone(self.name, int(inside.sum()))
        if self._context.events is not None:
            self._record_transits(detections, inside, now, frame)
        frame.add_time("analytics", started)
        return {"timed_detections": kept}

    def _record_transits(
        self, detections: sv.Detections, inside: np.ndarray, now: float, frame: FrameState
    ) -> None:
        self._present.prune(now)
        if detections.tracker_id is None:
            return
        for i, track in enumerate(int(t) for t in detections.tracker_id):
            if track < 0:
                continue
            entered = self._present.get(track)
            if inside[i]:
                self._present.put(track, now if entered is None else entered, now)
                if entered is None:
                    (fields,) = object_facts(detections, frame, [i])
                    self._context.event(EventKind.ZONE_ENTRY, self.name, **fields)
            elif entered is not None:
                self._present.pop(track)
                (fields,) = object_facts(detections, frame, [i])
                fields["payload"]["time_in_zone"] = round(now - entered, 3)
                self._context.event(EventKind.ZONE_EXIT, self.name, **fields)


def object_facts(
    detections: sv.Detections, frame: FrameState, indices: Iterable[int] | None = None
) -> list[dict[str, Any]]:
    """An event's fields for each detection (or those at ``indices``): class, tracker id,
    and in the payload its confidence, box and the frame's number."""
    names = detections.data.get("class_name")
    trackers = detections.tracker_id
    confidences = detections.confidence
    number = frame.facts.frame_number
    return [
        {
            "class_name": str(names[i]) if names is not None else None,
            "tracker_id": int(trackers[i]) if trackers is not None else None,
            "payload": {
                "confidence": round(float(confidences[i]), 4) if confidences is not None else None,
                "xyxy": [round(float(v), 1) for v in detections.xyxy[i]],
                "frame_number": number,
            },
        }
        for i in (range(len(detections)) if indices is None else indices)
    ]
