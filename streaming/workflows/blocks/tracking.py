"""``roboflow_core/byte_tracker@v1..v3``: stable ids across frames, with Roboflow's
``trackers`` package (ByteTrack) doing the tracking.

A compiled workflow serves one stream (a session, or one source of a pipeline), so the
tracker in a block instance is that stream's alone. The reference's fields map onto
``trackers.ByteTrackTracker``: ``minimum_matching_threshold`` is the largest matching cost
(1 - IoU) ByteTrack accepts, i.e. ``minimum_iou_threshold = 1 - minimum_matching_threshold``.

``tracker`` (ours; default ``bytetrack``) puts ``trackers``' SORT or OC-SORT behind the same
block, with the same fields: OC-SORT follows objects through occlusions and non-linear motion
better, SORT is the cheapest.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import supervision as sv
from trackers import ByteTrackTracker, OCSORTTracker, SORTTracker

from .base import Block, BlockSettings, BuildContext, FrameState, select, setting
from .fields import DETECTION_KINDS, DETECTIONS, IMAGE, VIDEO_METADATA, FieldSpec, Takes

__all__ = ["ByteTrackerBlock"]

_DEFAULT_FPS = 30.0
_ALGORITHMS = ("bytetrack", "sort", "ocsort")


@dataclass(frozen=True, kw_only=True)
class ByteTrackerSettings(BlockSettings):
    track_activation_threshold: float = setting(
        FieldSpec(default=0.25, type="number", minimum=0.0, maximum=1.0)
    )
    lost_track_buffer: int = setting(FieldSpec(default=30, type="integer", minimum=0))
    minimum_matching_threshold: float = setting(
        FieldSpec(default=0.8, type="number", minimum=0.0, maximum=1.0)
    )
    minimum_consecutive_frames: int = setting(FieldSpec(default=1, type="integer", minimum=1))
    instances_cache_size: int = setting(FieldSpec(default=16384, type="integer", minimum=1))  # v3
    tracker: Literal["bytetrack", "sort", "ocsort"] = setting(
        FieldSpec(default="bytetrack", choices=_ALGORITHMS)
    )  # ours


class ByteTrackerBlock(Block):
    """Adds ``tracker_id`` to detections; v3 also splits them into first sightings and the
    rest. Unconfirmed tracks (``minimum_consecutive_frames`` not reached) are left out, as
    the reference's tracker does."""

    type_ids = (
        "roboflow_core/byte_tracker@v1",
        "roboflow_core/byte_tracker@v2",
        "roboflow_core/byte_tracker@v3",
    )
    passes_kind = "detections"
    inputs = {
        "detections": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME),
        "image": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),  # v2, v3
        "metadata": FieldSpec((VIDEO_METADATA,), default=None, takes=Takes.FRAME),  # v1
    }
    Settings: ClassVar[type[BlockSettings]] = ByteTrackerSettings
    outputs = {
        "tracked_detections": DETECTIONS,
        "new_instances": DETECTIONS,
        "already_seen_instances": DETECTIONS,
    }

    def __init__(self, name: str, config: ByteTrackerSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._activation = config.track_activation_threshold
        self._matching = config.minimum_matching_threshold
        self._lost_buffer = config.lost_track_buffer
        self._consecutive = config.minimum_consecutive_frames
        self._cache_size = config.instances_cache_size
        self._algorithm = config.tracker
        self._tracker: ByteTrackTracker | SORTTracker | OCSORTTracker | None = None
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._restarts = 0
        self._id_offset = 0
        """Added to the tracker's ids: a tracker started afresh (the camera reconnected)
        counts from 0 again, and ids must stay unique in the stream for the counters."""
        self._max_id = -1

    def _tracker_for(self, frame: FrameState) -> ByteTrackTracker | SORTTracker | OCSORTTracker:
        if self._tracker is not None:
            return self._tracker
        # The stream's frame rate, known from its first frame.
        common: dict[str, Any] = {
            "lost_track_buffer": self._lost_buffer,
            "frame_rate": frame.facts.fps or _DEFAULT_FPS,
            "minimum_consecutive_frames": self._consecutive,
            "minimum_iou_threshold": 1.0 - self._matching,
        }
        if self._algorithm == "sort":
            self._tracker = SORTTracker(**common, track_activation_threshold=self._activation)
        elif self._algorithm == "ocsort":
            self._tracker = OCSORTTracker(**common, high_conf_det_threshold=self._activation)
        else:
            self._tracker = ByteTrackTracker(
                **common,
                track_activation_threshold=self._activation,
                # A detection below the activation threshold may still continue a track.
                high_conf_det_threshold=self._activation,
            )
        return self._tracker

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        detections: sv.Detections = inputs["detections"]
        restarts = frame.facts.stream_restarts
        if restarts != self._restarts:  # the camera reconnected: its old tracks are stale
            self._restarts, self._tracker, self._id_offset = restarts, None, self._max_id + 1
        tracked = self._tracker_for(frame).update(detections)
        if tracked.tracker_id is None:
            tracked.tracker_id = np.full(len(tracked), -1, dtype=int)
        tracked = select(tracked, tracked.tracker_id >= 0)
        ids = np.asarray(tracked.tracker_id, dtype=int) + self._id_offset
        tracked.tracker_id = ids
        if len(ids):
            self._max_id = max(self._max_id, int(ids.max()))
        is_new = np.zeros(len(tracked), dtype=bool)
        for i, tracker_id in enumerate(int(t) for t in ids):
            if tracker_id not in self._seen:
                is_new[i] = True
                self._seen[tracker_id] = None
                if len(self._seen) > self._cache_size:
                    self._seen.popitem(last=False)
        frame.add_time("tracking", started)
        return {
            "tracked_detections": tracked,
            "new_instances": select(tracked, is_new),
            "already_seen_instances": select(tracked, ~is_new),
        }
