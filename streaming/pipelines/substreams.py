"""A camera with a sub-stream: the workflow runs on the sub-stream (a low resolution, cheap
to decode), in its pixels; what leaves the pipeline as data (``consume``'s detections, the
stored events' boxes) is scaled to the main stream, which is what gets recorded.

The scale is the two streams' picture sizes as their readers last connected
(``LiveFeed.size``); until both are known (the main stream still connecting), nothing is
scaled and the data says the sub-stream's size (``image`` in each serialised detection set).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import cv2
import numpy as np
import supervision as sv

from sources import LiveFeed
from sources.hub import SourceHub

from ..events import EventRecord, EventRecorder

__all__ = ["ScaledEvents", "scale_between", "scaled_outputs"]

Scale = tuple[float, float, tuple[int, int]]
"""x factor, y factor, and the main stream's (width, height)."""


def scale_between(main: LiveFeed | None, sub: LiveFeed | None) -> Scale | None:
    """How the sub-stream's pixels map onto the main stream's; None while unknown or 1."""
    if main is None or sub is None or main.size is None or sub.size is None:
        return None
    (width, height), (sub_width, sub_height) = main.size, sub.size
    if (width, height) == (sub_width, sub_height):
        return None
    return width / sub_width, height / sub_height, (width, height)


def scaled_detections(detections: sv.Detections, scale: Scale) -> sv.Detections:
    """A copy in the main stream's pixels: boxes, masks and keypoints."""
    sx, sy, (width, height) = scale
    scaled = copy.copy(detections)
    scaled.xyxy = detections.xyxy * np.array([sx, sy, sx, sy], dtype=detections.xyxy.dtype)
    if detections.mask is not None:
        scaled.mask = np.array(
            [
                cv2.resize(m.astype(np.uint8), (width, height), interpolation=cv2.INTER_NEAREST)
                for m in detections.mask
            ],
            dtype=bool,
        ).reshape(len(detections), height, width)
    data = dict(detections.data)
    if "keypoints_xy" in data:
        data["keypoints_xy"] = [np.asarray(p, np.float64) * [sx, sy] for p in data["keypoints_xy"]]
    scaled.data = data
    scaled.metadata = {**detections.metadata, "image_size": (width, height)}
    return scaled


def scaled_outputs(outputs: dict[str, Any], scale: Scale | None) -> dict[str, Any]:
    """``outputs`` with each detection set (an output's value, or one in a list of them)
    scaled to the main stream; the rest as they are."""
    if scale is None:
        return outputs

    def scaled(value: Any) -> Any:
        if isinstance(value, sv.Detections):
            return scaled_detections(value, scale)
        if isinstance(value, list):
            return [scaled(v) for v in value]
        return value

    return {name: scaled(value) for name, value in outputs.items()}


class ScaledEvents:
    """An ``EventRecorder`` in front of another, for a source with a sub-stream: each event's
    box (``payload.xyxy``) is scaled to the main stream, whose recording it goes with."""

    def __init__(self, inner: EventRecorder, hub: SourceHub, main: str, sub: str) -> None:
        self._inner, self._hub, self._main, self._sub = inner, hub, main, sub

    def record(self, event: EventRecord) -> None:
        main = self._hub.source_of(self._main, decode=False)
        sub = self._hub.source_of(self._sub)
        scale = scale_between(
            main.live() if main is not None else None, sub.live() if sub is not None else None
        )
        box = event.payload.get("xyxy")
        if scale is not None and isinstance(box, list) and len(box) == 4:
            sx, sy, _ = scale
            xyxy = [box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy]
            event = replace(event, payload={**event.payload, "xyxy": [round(v, 1) for v in xyxy]})
        self._inner.record(event)
