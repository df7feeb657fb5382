"""Drawing what the analytics blocks watch: ``line_counter_visualization`` (the line and its
counts), ``polygon_zone_visualization`` (the zones, filled), ``trace_visualization`` (each
tracked object's recent path, supervision's ``TraceAnnotator``, one per stream)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import cv2
import numpy as np
import supervision as sv

from .base import Block, BlockSettings, BuildContext, FrameState, WorkflowImage, setting
from .checks import anchor, color, points, polygons
from .fields import DETECTION_KINDS, IMAGE, FieldSpec, Takes

__all__ = [
    "LineCounterVisualizationBlock",
    "PolygonZoneVisualizationBlock",
    "TraceVisualizationBlock",
]

_ZONE_GREEN = "#5bb573"  # the reference's default for both zone blocks


@dataclass(frozen=True, kw_only=True)
class _DrawingSettings(BlockSettings):
    copy_image: Any = setting(FieldSpec(default=True))


class _DrawingBlock(Block):
    """Image in, image out: a copy unless ``copy_image`` is false."""

    inputs = {"image": FieldSpec((IMAGE,), takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = _DrawingSettings
    outputs = {"image": IMAGE}

    def __init__(self, name: str, config: _DrawingSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._copy = bool(config.copy_image)

    def draw(self, scene: np.ndarray, inputs: dict[str, Any]) -> np.ndarray:
        raise NotImplementedError

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        image: WorkflowImage = inputs["image"]
        scene = self.draw(image.numpy.copy() if self._copy else image.numpy, inputs)
        frame.add_time("annotate", started)
        return {"image": image.derived(scene)}


@dataclass(frozen=True, kw_only=True)
class LineCounterVisualizationSettings(_DrawingSettings):
    zone: Any = setting(FieldSpec())
    color: Any = setting(FieldSpec(default=_ZONE_GREEN))
    thickness: int = setting(FieldSpec(default=2, type="integer", minimum=1))
    text_thickness: int = setting(FieldSpec(default=1, type="integer", minimum=1))
    text_scale: float = setting(FieldSpec(default=1.0, type="number", minimum=0.01, maximum=100.0))
    opacity: float = setting(FieldSpec(default=0.3, type="number", minimum=0.0, maximum=1.0))


class LineCounterVisualizationBlock(_DrawingBlock):
    """The counting line, blended at ``opacity``, with ``in: N, out: M`` at its start."""

    type_ids = ("roboflow_core/line_counter_visualization@v1",)
    inputs = {
        **_DrawingBlock.inputs,
        # Usually $steps.<line_counter>.count_in / count_out; unbound: 0.
        "count_in": FieldSpec(("integer",), default=None, takes=Takes.FRAME),
        "count_out": FieldSpec(("integer",), default=None, takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = LineCounterVisualizationSettings

    def __init__(
        self, name: str, config: LineCounterVisualizationSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        start, end = points(name, "zone", config.zone, count=2)
        self._line = (int(start[0]), int(start[1]), int(end[0]), int(end[1]))
        self._start = sv.Point(self._line[0], self._line[1])
        self._color = color(name, "color", config.color)
        self._thickness = config.thickness
        self._text_thickness = config.text_thickness
        self._text_scale = config.text_scale
        self._opacity = config.opacity

    def _inside(self, text: str, width: int, height: int) -> sv.Point:
        """Where the counts' text is centred: at the line's start, moved just enough to be
        whole inside the frame (a line from the top edge had them half cut off)."""
        (w, h), baseline = cv2.getTextSize(
            text, cv2.FONT_HERSHEY_SIMPLEX, self._text_scale, self._text_thickness
        )
        half_w, half_h = w / 2 + 1, (h + baseline) / 2 + 1
        x = min(max(self._start.x, half_w), max(half_w, width - half_w))
        y = min(max(self._start.y, half_h), max(half_h, height - half_h))
        return sv.Point(x=round(x), y=round(y))

    def draw(self, scene: np.ndarray, inputs: dict[str, Any]) -> np.ndarray:
        # Blended at ``opacity`` within the line's bounding box only: a whole-frame blend
        # costs ~20 ms at 640x480 (measured, benchmarks/analytics.py).
        height, width = scene.shape[:2]
        pad = self._thickness + 1
        x1, y1, x2, y2 = self._line
        left, top = max(min(x1, x2) - pad, 0), max(min(y1, y2) - pad, 0)
        right, bottom = min(max(x1, x2) + pad + 1, width), min(max(y1, y2) + pad + 1, height)
        if left < right and top < bottom:
            region = scene[top:bottom, left:right]
            overlay = region.copy()
            cv2.line(
                overlay,
                (x1 - left, y1 - top),
                (x2 - left, y2 - top),
                self._color.as_bgr(),
                self._thickness,
            )
            cv2.addWeighted(overlay, self._opacity, region, 1 - self._opacity, 0, dst=region)
        counts = f"in: {inputs.get('count_in') or 0}, out: {inputs.get('count_out') or 0}"
        return sv.draw_text(
            scene,
            counts,
            self._inside(counts, width, height),
            text_scale=self._text_scale,
            text_thickness=self._text_thickness,
            text_padding=0,
            background_color=sv.Color.WHITE,
        )


@dataclass(frozen=True, kw_only=True)
class PolygonZoneVisualizationSettings(_DrawingSettings):
    zone: Any = setting(FieldSpec())
    color: Any = setting(FieldSpec(default=_ZONE_GREEN))
    opacity: float = setting(FieldSpec(default=0.3, type="number", minimum=0.0, maximum=1.0))


class PolygonZoneVisualizationBlock(_DrawingBlock):
    """The zone (or each of several), filled at ``opacity``."""

    type_ids = ("roboflow_core/polygon_zone_visualization@v1",)
    inputs = {**_DrawingBlock.inputs}
    Settings: ClassVar[type[BlockSettings]] = PolygonZoneVisualizationSettings

    def __init__(
        self, name: str, config: PolygonZoneVisualizationSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        self._polygons = [np.array(p, dtype=np.int64) for p in polygons(name, "zone", config.zone)]
        self._color = color(name, "color", config.color)
        self._opacity = config.opacity

    def draw(self, scene: np.ndarray, inputs: dict[str, Any]) -> np.ndarray:
        for polygon in self._polygons:
            scene = sv.draw_filled_polygon(scene, polygon, self._color, self._opacity)
        return scene


@dataclass(frozen=True, kw_only=True)
class TraceVisualizationSettings(_DrawingSettings):
    position: Any = setting(FieldSpec(default="CENTER"))
    trace_length: int = setting(FieldSpec(default=30, type="integer", minimum=1))
    thickness: int = setting(FieldSpec(default=1, type="integer", minimum=1))


class TraceVisualizationBlock(_DrawingBlock):
    """Each tracked object's last ``trace_length`` positions, as a line."""

    type_ids = ("roboflow_core/trace_visualization@v1",)
    inputs = {
        **_DrawingBlock.inputs,
        "predictions": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = TraceVisualizationSettings

    def __init__(
        self, name: str, config: TraceVisualizationSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        self._annotator = sv.TraceAnnotator(
            position=anchor(name, "position", config.position),
            trace_length=config.trace_length,
            thickness=config.thickness,
            color_lookup=sv.ColorLookup.TRACK,
        )

    def draw(self, scene: np.ndarray, inputs: dict[str, Any]) -> np.ndarray:
        detections: sv.Detections = inputs["predictions"]
        if detections.tracker_id is None:  # nothing to follow (an untracked, empty frame)
            return scene
        return self._annotator.annotate(scene, detections)
