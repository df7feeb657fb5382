"""Reshaping detections: boxes grown by a margin (``detection_offset``), so that a crop
of them keeps some context around the object."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import DETECTION_KINDS, DETECTIONS, FieldSpec, Takes

__all__ = ["DetectionOffsetBlock"]

PERCENT, PIXELS = "Percent (%)", "Pixels"


@dataclass(frozen=True, kw_only=True)
class DetectionOffsetSettings(BlockSettings):
    offset_width: int | None = setting(FieldSpec(default=None, type="integer", minimum=1))
    offset_x: int | None = setting(FieldSpec(default=None, type="integer", minimum=1))  # the alias
    offset_height: int | None = setting(FieldSpec(default=None, type="integer", minimum=1))
    offset_y: int | None = setting(FieldSpec(default=None, type="integer", minimum=1))  # the alias
    units: str = setting(FieldSpec(default=PIXELS, choices=(PERCENT, PIXELS)))


class DetectionOffsetBlock(Block):
    """Each box grown by ``offset_width`` and ``offset_height`` in all (half on each side),
    in pixels or percent of the box, kept inside the image. The grown detections get new
    ids; each one's ``parent_id`` is the id of the detection it grew from."""

    type_ids = ("roboflow_core/detection_offset@v1", "DetectionOffset")
    passes_kind = "predictions"
    inputs = {"predictions": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = DetectionOffsetSettings
    outputs = {"predictions": DETECTIONS}

    def __init__(self, name: str, config: DetectionOffsetSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        width = config.offset_width if config.offset_width is not None else config.offset_x
        height = config.offset_height if config.offset_height is not None else config.offset_y
        for field, value in (("offset_width", width), ("offset_height", height)):
            if value is None:
                raise WorkflowCompilationError(f"step '{name}': field '{field}' is required")
        assert width is not None and height is not None
        self.offset = (width, height)
        self.percent = config.units == PERCENT

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        detections: sv.Detections = inputs["predictions"]
        if not len(detections):
            return {"predictions": detections}
        grown = copy.deepcopy(detections)
        xyxy = detections.xyxy.astype(float)
        if self.percent:  # percent of each box's own size, on each side half of it
            sizes = np.stack([xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]], axis=1)
            margin = (sizes * np.array(self.offset) / 200).astype(int)
        else:
            margin = np.tile(np.array(self.offset) // 2, (len(detections), 1))
        left_top = np.maximum(0, xyxy[:, :2] - margin)
        right_bottom = xyxy[:, 2:] + margin
        size = detections.metadata.get("image_size")  # (width, height): kept inside
        if size is not None:
            right_bottom = np.minimum(np.array(size), right_bottom)
        grown.xyxy = np.column_stack([left_top, right_bottom])
        ids = detections.data.get("detection_id")
        if ids is not None:
            grown.data["parent_id"] = np.asarray(ids).copy()
        grown.data["detection_id"] = np.array([str(uuid.uuid4()) for _ in range(len(grown))])
        return {"predictions": grown}
