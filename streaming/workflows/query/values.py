"""What the query language evaluates on: the environment of one evaluation, one detection as a
row of its detections, and the reference's properties of a detection."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from ..blocks.base import VideoFacts

__all__ = ["PROPERTIES", "Env", "QueryError", "Row", "Where", "python"]

Row = tuple[sv.Detections, int]
"""One detection: its detections and its index in them."""


@dataclass(frozen=True)
class Env:
    """One evaluation's world: the named operands (a block's ``operations_parameters`` or
    ``evaluation_parameters``) and the frame's facts, typed (``ExtractFrameMetadata``)."""

    values: Mapping[str, Any] = field(default_factory=dict)
    facts: VideoFacts = field(default_factory=VideoFacts)


class QueryError(ValueError):
    """An operation met a value it cannot take while a frame ran (``ToNumber`` on "abc", a
    lookup with no such key): the frame fails with this message, the stream goes on."""


@dataclass(frozen=True)
class Where:
    """Where an expression sits, for the messages that name it."""

    step: str
    field: str

    def fail(self, what: str) -> WorkflowCompilationError:
        return WorkflowCompilationError(f"step '{self.step}': {self.field}: {what}")

    def error(self, what: str) -> QueryError:
        return QueryError(f"step '{self.step}': {self.field}: {what}")


def python(value: Any) -> Any:
    """A numpy scalar or array as the Python value it holds."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def _data(key: str) -> Callable[[Row], Any]:
    def read(row: Row) -> Any:
        detections, i = row
        values = detections.data.get(key)
        return None if values is None else python(values[i])

    return read


def _corner(x: int, y: int) -> Callable[[Row], Any]:
    return lambda r: (float(r[0].xyxy[r[1], x]), float(r[0].xyxy[r[1], y]))


def _dimensions(row: Row) -> Any:
    size = row[0].metadata.get("image_size")
    return None if size is None else [size[1], size[0]]  # the reference's (height, width)


PROPERTIES: dict[str, Callable[[Row], Any]] = {
    "confidence": lambda r: None if r[0].confidence is None else float(r[0].confidence[r[1]]),
    "class_name": _data("class_name"),
    "class_id": lambda r: None if r[0].class_id is None else int(r[0].class_id[r[1]]),
    "tracker_id": lambda r: None if r[0].tracker_id is None else int(r[0].tracker_id[r[1]]),
    "x_min": lambda r: float(r[0].xyxy[r[1], 0]),
    "y_min": lambda r: float(r[0].xyxy[r[1], 1]),
    "x_max": lambda r: float(r[0].xyxy[r[1], 2]),
    "y_max": lambda r: float(r[0].xyxy[r[1], 3]),
    "size": lambda r: float(r[0].box_area[r[1]]),
    "center": lambda r: (
        float((r[0].xyxy[r[1], 0] + r[0].xyxy[r[1], 2]) / 2),
        float((r[0].xyxy[r[1], 1] + r[0].xyxy[r[1], 3]) / 2),
    ),
    "top_left": _corner(0, 1),
    "top_right": _corner(2, 1),
    "bottom_left": _corner(0, 3),
    "bottom_right": _corner(2, 3),
    "in_out": _data("in_out"),
    "path_deviation": _data("path_deviation"),
    "polygon": _data("polygon"),
    "time_in_zone": _data("time_in_zone"),
    "velocity": _data("velocity"),
    "speed": _data("speed"),
    "smoothed_velocity": _data("smoothed_velocity"),
    "smoothed_speed": _data("smoothed_speed"),
    "image_dimensions": _dimensions,
    "prediction_type": _data("prediction_type"),
    "keypoints_xy": _data("keypoints_xy"),
    "rect": _data("rect"),
    "width": _data("width"),
    "height": _data("height"),
    "angle": _data("angle"),
    "area_px": _data("area_px"),
    "area_converted": _data("area_converted"),
}
"""``ExtractDetectionProperty`` and ``DetectionsPropertyExtract``: every property the
reference names, read from what our blocks put on detections (None where nothing did)."""
