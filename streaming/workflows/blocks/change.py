"""What moves in a stream, by OpenCV's MOG2 background model (one per step, learnt frame by
frame): ``background_subtraction`` (the foreground as a white-on-black image) and
``motion_detection`` (the moving regions as detections and polygons, whether anything moves,
and an ``alarm`` on the frame where motion starts).

A step keeps its model for the stream it runs in; each WebRTC session and pipeline source
compiles its own. Motion is counted inside ``detection_zone`` only, by masking the
foreground with the zone before regions are found (the reference clips each region's
polygon to the zone; the pixels counted are the same)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

import cv2
import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .checks import polygons
from .fields import DETECTIONS, IMAGE, FieldSpec, Takes

__all__ = ["BackgroundSubtractionBlock", "MotionDetectionBlock"]


@dataclass(frozen=True, kw_only=True)
class BackgroundSettings(BlockSettings):
    threshold: int = setting(FieldSpec(default=16, type="integer", minimum=1))
    history: int = setting(FieldSpec(default=30, type="integer", minimum=1))


def _model(history: int, threshold: int) -> cv2.BackgroundSubtractorMOG2:
    return cv2.createBackgroundSubtractorMOG2(
        history=history, varThreshold=threshold, detectShadows=True
    )


class BackgroundSubtractionBlock(Block):
    """``image``: what differs from the learnt background, white (shadows grey)."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/background_subtraction@v1",)
    inputs = {"image": FieldSpec((IMAGE,), takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = BackgroundSettings
    outputs = {"image": IMAGE}

    def __init__(self, name: str, config: BackgroundSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._model = _model(config.history, config.threshold)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image = inputs["image"]
        mask = self._model.apply(image.numpy)
        return {"image": image.derived(cv2.cvtColor(mask, cv2.COLOR_GRAY2BGR))}


@dataclass(frozen=True, kw_only=True)
class MotionSettings(BackgroundSettings):
    minimum_contour_area: int = setting(FieldSpec(default=200, type="integer", minimum=1))
    morphological_kernel_size: int = setting(FieldSpec(default=3, type="integer", minimum=1))
    detection_zone: Any = setting(FieldSpec(default=None))
    suppress_first_detections: bool = setting(FieldSpec(default=True, type="boolean"))


class MotionDetectionBlock(Block):
    """``motion`` (a region of at least ``minimum_contour_area`` pixels moves), ``alarm``
    (motion now, none the frame before), ``detections`` (each region's box, class
    ``motion``) and ``motion_zones`` (each region's polygon). While the model learns (the
    first ``history`` frames) nothing is reported, unless ``suppress_first_detections`` is
    false."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/motion_detection@v1",)
    inputs = BackgroundSubtractionBlock.inputs | {}
    Settings: ClassVar[type[BlockSettings]] = MotionSettings
    outputs = {
        "motion": "boolean",
        "alarm": "boolean",
        "detections": DETECTIONS,
        "motion_zones": "list_of_values",
    }

    def __init__(self, name: str, config: MotionSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.config = config
        zone = config.detection_zone
        if isinstance(zone, str):  # the reference takes the zone as JSON text too
            try:
                zone = json.loads(zone)
            except ValueError:
                raise WorkflowCompilationError(
                    f"step '{name}': detection_zone is not a JSON list of points"
                ) from None
        self._zone = np.array(polygons(name, "detection_zone", zone)[0], np.int32) if zone else None
        size = config.morphological_kernel_size
        context.limits.check_kernel(name, "morphological_kernel_size", size)
        self._kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size, size))
        self._model = _model(config.history, config.threshold)
        self._learning = config.history if config.suppress_first_detections else 0
        self._moving = False

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        mask = self._model.apply(inputs["image"].numpy)
        if self._learning > 0:
            self._learning -= 1
            return self._result([], [])
        mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, self._kernel)  # shadows count, as there
        if self._zone is not None:
            inside = np.zeros(mask.shape, np.uint8)
            cv2.fillPoly(inside, [self._zone], 255)
            mask = cv2.bitwise_and(mask, inside)
        contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        least = self.config.minimum_contour_area
        regions = [c for c in contours if len(c) > 2 and cv2.contourArea(c) > least]
        simplified = [cv2.approxPolyDP(c, 0.01 * cv2.arcLength(c, True), True) for c in regions]
        simplified = [c for c in simplified if len(c) >= 3]
        boxes = [cv2.boundingRect(c) for c in simplified]
        return self._result(
            [[x, y, x + w, y + h] for x, y, w, h in boxes],
            [c.reshape(-1, 2).tolist() for c in simplified],
            moving=bool(regions),
        )

    def _result(self, boxes: list[list[int]], zones: list[Any], moving: bool = False) -> dict:
        if boxes:
            detections = sv.Detections(
                xyxy=np.array(boxes, np.float32),
                confidence=np.ones(len(boxes), np.float32),
                class_id=np.zeros(len(boxes), int),
                data={"class_name": np.array(["motion"] * len(boxes))},
            )
        else:
            detections = sv.Detections.empty()
            detections.data["class_name"] = np.array([], dtype=str)
        alarm = moving and not self._moving
        self._moving = moving
        return {"motion": moving, "alarm": alarm, "detections": detections, "motion_zones": zones}
