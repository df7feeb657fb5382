"""How tracked objects move: ``roboflow_core/velocity@v1``,
``roboflow_core/stabilize_detections@v1`` (supervision's ``DetectionsSmoother``) and
``roboflow_core/path_deviation_analytics@v1/v2`` (discrete Fréchet distance to a reference
path).

Each keeps per-track state for its stream in a ``TrackMemory`` (it forgets tracks long
gone); the Fréchet distance is updated with one new row per frame
(O(reference points)) instead of recomputed over the whole path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import supervision as sv

from .analytics import TrackMemory, tracked
from .base import Block, BlockSettings, BuildContext, FrameState, select, setting
from .checks import anchor, points
from .fields import DETECTION_KINDS, DETECTIONS, IMAGE, VIDEO_METADATA, FieldSpec, Takes

__all__ = ["PathDeviationBlock", "StabilizeDetectionsBlock", "VelocityBlock"]

_TRACKED_FIELDS = {
    "image": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),
    "metadata": FieldSpec((VIDEO_METADATA,), default=None, takes=Takes.FRAME),
    "detections": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME),
}


@dataclass(frozen=True, kw_only=True)
class VelocitySettings(BlockSettings):
    smoothing_alpha: float = setting(FieldSpec(default=0.5, type="number", above=0, maximum=1.0))
    pixels_per_meter: float = setting(FieldSpec(default=1.0, type="number", above=0))


class VelocityBlock(Block):
    """Adds ``velocity`` ([vx, vy]), ``speed``, ``smoothed_velocity`` and ``smoothed_speed``
    (per second, in meters given ``pixels_per_meter``) to each tracked detection, from its
    box center's displacement between the frames it was seen in; smoothing is an exponential
    moving average with ``smoothing_alpha``."""

    type_ids = ("roboflow_core/velocity@v1",)
    passes_kind = "detections"
    inputs = {**_TRACKED_FIELDS}
    Settings: ClassVar[type[BlockSettings]] = VelocitySettings
    outputs = {"velocity_detections": DETECTIONS}

    def __init__(self, name: str, config: VelocitySettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._alpha = config.smoothing_alpha
        self._scale = 1.0 / config.pixels_per_meter
        # Track -> (center, time, smoothed velocity), all in pixels.
        self._last: TrackMemory[tuple[np.ndarray, float, np.ndarray]] = TrackMemory()

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        detections = tracked(self.name, inputs["detections"])
        now = frame.facts.seconds
        self._last.prune(now)
        count = len(detections)
        centers = detections.get_anchors_coordinates(sv.Position.CENTER).astype(np.float64)
        velocity = np.zeros((count, 2))
        smoothed = np.zeros((count, 2))
        ids: Any = detections.tracker_id if detections.tracker_id is not None else []
        for i, track in enumerate(int(t) for t in ids):
            last = self._last.get(track)
            if last is not None:
                center, when, previous = last
                if now > when:
                    velocity[i] = (centers[i] - center) / (now - when)
                smoothed[i] = self._alpha * velocity[i] + (1 - self._alpha) * previous
            else:
                smoothed[i] = velocity[i]
            self._last.put(track, (centers[i], now, smoothed[i]), now)
        out = select_all(detections)
        out.data["velocity"] = velocity * self._scale
        out.data["speed"] = np.linalg.norm(velocity, axis=1) * self._scale
        out.data["smoothed_velocity"] = smoothed * self._scale
        out.data["smoothed_speed"] = np.linalg.norm(smoothed, axis=1) * self._scale
        frame.add_time("analytics", started)
        return {"velocity_detections": out}


@dataclass(frozen=True, kw_only=True)
class StabilizeDetectionsSettings(BlockSettings):
    smoothing_window_size: int = setting(FieldSpec(default=3, type="integer", minimum=1))
    bbox_smoothing_coefficient: float = setting(
        FieldSpec(default=0.2, type="number", minimum=0, maximum=1)
    )


class StabilizeDetectionsBlock(Block):
    """Boxes averaged over each track's last ``smoothing_window_size`` frames (supervision's
    ``DetectionsSmoother``): less jitter for drawing and counting.

    The reference smooths with a velocity Kalman filter and keeps a lost track's box moving
    for a few frames; supervision's window mean does neither (a track absent from the frame
    is absent from the output), and ``bbox_smoothing_coefficient`` is accepted and checked
    but has no counterpart there."""

    type_ids = ("roboflow_core/stabilize_detections@v1",)
    passes_kind = "detections"
    inputs = {**_TRACKED_FIELDS}
    Settings: ClassVar[type[BlockSettings]] = StabilizeDetectionsSettings
    outputs = {"tracked_detections": DETECTIONS}

    def __init__(
        self, name: str, config: StabilizeDetectionsSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        # bbox_smoothing_coefficient is declared (and checked) but unused (docs/guide/workflows.md).
        window = config.smoothing_window_size
        self._smoother = sv.DetectionsSmoother(length=window)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        detections = tracked(self.name, inputs["detections"])
        if detections.tracker_id is None:  # no detections at all: nothing to average
            detections = select_all(detections)
            detections.tracker_id = np.zeros(0, dtype=int)
        smoothed = self._smoother.update_with_detections(detections)
        frame.add_time("analytics", started)
        return {"tracked_detections": smoothed}


@dataclass(frozen=True, kw_only=True)
class PathDeviationSettings(BlockSettings):
    triggering_anchor: Any = setting(FieldSpec(default="CENTER"))
    reference_path: Any = setting(FieldSpec())


class PathDeviationBlock(Block):
    """``path_deviation`` on each tracked detection: the discrete Fréchet distance (pixels)
    between the path its ``triggering_anchor`` has taken so far and ``reference_path``."""

    type_ids = (
        "roboflow_core/path_deviation_analytics@v1",
        "roboflow_core/path_deviation_analytics@v2",
    )
    passes_kind = "detections"
    inputs = {**_TRACKED_FIELDS}
    Settings: ClassVar[type[BlockSettings]] = PathDeviationSettings
    outputs = {"path_deviation_detections": DETECTIONS}

    def __init__(self, name: str, config: PathDeviationSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._anchor = anchor(name, "triggering_anchor", config.triggering_anchor)
        self._reference = np.array(points(name, "reference_path", config.reference_path))
        # Track -> the last row of the Fréchet table (its path so far against the reference).
        self._rows: TrackMemory[np.ndarray] = TrackMemory()

    def _next_row(self, previous: np.ndarray | None, point: np.ndarray) -> np.ndarray:
        distance = np.linalg.norm(self._reference - point, axis=1)
        row = np.empty_like(distance)
        if previous is None:  # the path's first point
            row[0] = distance[0]
            for j in range(1, len(row)):
                row[j] = max(row[j - 1], distance[j])
            return row
        row[0] = max(previous[0], distance[0])
        for j in range(1, len(row)):
            row[j] = max(min(previous[j], previous[j - 1], row[j - 1]), distance[j])
        return row

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        detections = tracked(self.name, inputs["detections"])
        now = frame.facts.seconds
        self._rows.prune(now)
        anchors = detections.get_anchors_coordinates(self._anchor).astype(np.float64)
        deviation = np.zeros(len(detections))
        ids: Any = detections.tracker_id if detections.tracker_id is not None else []
        for i, track in enumerate(int(t) for t in ids):
            row = self._next_row(self._rows.get(track), anchors[i])
            self._rows.put(track, row, now)
            deviation[i] = row[-1]
        out = select_all(detections)
        out.data["path_deviation"] = deviation
        frame.add_time("analytics", started)
        return {"path_deviation_detections": out}


def select_all(detections: sv.Detections) -> sv.Detections:
    """A copy to add data to: the input may feed other steps."""
    return select(detections, np.arange(len(detections)))
