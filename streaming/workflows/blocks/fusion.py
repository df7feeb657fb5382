"""Bringing a second stage's answers back: a list per frame out of one value per crop
(``dimension_collapse``), and each detection's class replaced by what a classifier (or OCR)
said of its crop (``detections_classes_replacement``); two sets of detections as one
(``detections_combine``), or all of a set as one box around them (``detections_merge``)."""

from __future__ import annotations

import copy
import sys
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import supervision as sv

from .base import Block, BlockSettings, BuildContext, FrameState, select, setting
from .fields import ANY, CLASSIFICATION, DETECTION_KINDS, DETECTIONS, SEGMENTATION, FieldSpec, Takes

__all__ = [
    "DetectionsClassesReplacementBlock",
    "DetectionsCombineBlock",
    "DetectionsMergeBlock",
    "DimensionCollapseBlock",
    "fallback_class",
    "leading_class",
]

LIST_OF_VALUES = "list_of_values"


class DimensionCollapseBlock(Block):
    """The values of every crop (slice, ...) of an element, as one list at the element's
    dimension: a frame's classifications of its crops as one list per frame."""

    type_ids = ("roboflow_core/dimension_collapse@v1", "DimensionCollapse")
    inputs = {"data": FieldSpec((ANY,), takes=Takes.FRAME)}
    outputs = {"output": LIST_OF_VALUES}
    output_dimension = -1

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return {"output": list(inputs["data"])}


@dataclass(frozen=True, kw_only=True)
class ClassesReplacementSettings(BlockSettings):
    fallback_class_name: str | None = setting(FieldSpec(default=None, type="string"))
    fallback_class_id: int | None = setting(FieldSpec(default=None, type="integer"))


def fallback_class(name: str | None, class_id: int | None) -> tuple[str, int, float] | None:
    """The class a detection takes when its crop got none, if one is set (an id below 0 or
    none: the largest integer, as the reference's)."""
    if not name:
        return None
    return name, sys.maxsize if class_id is None or class_id < 0 else class_id, 0.0


def leading_class(
    prediction: Any, fallback_name: str | None, fallback_id: int | None
) -> tuple[str, int, float] | None:
    """The class a classifier's (or OCR's) answer leads with: ``(name, id, confidence)``;
    the fallback where it names none (if one is set), else None."""
    fallback = fallback_class(fallback_name, fallback_id)
    if isinstance(prediction, str):
        return prediction, 0, 1.0
    if isinstance(prediction, list):
        if not prediction:
            return fallback
        return (prediction[0], 0, 1.0) if isinstance(prediction[0], str) else None
    if not isinstance(prediction, dict):
        return None
    if "top" in prediction:  # single-label: the top class
        if not prediction.get("predictions"):
            return fallback
        top = prediction["top"]
        matching = [
            (p["class_id"], p["confidence"])
            for p in prediction["predictions"]
            if p.get("class") == top
        ]
        if len(matching) != 1:
            return None
        return top, int(matching[0][0]), float(matching[0][1])
    if not prediction.get("predicted_classes"):  # multi-label: the most confident class
        return None
    best = max(
        prediction.get("predictions", {}).items(),
        key=lambda item: item[1]["confidence"],
        default=None,
    )
    if best is None or not best[1]["confidence"]:
        return None
    return best[0], int(best[1]["class_id"]), float(best[1]["confidence"])


class DetectionsClassesReplacementBlock(Block):
    """Each detection takes the class its crop was given by a second stage (matched by the
    crop's ``parent_id``, the detection's id; or, for answers that are plain text, by
    position); a detection whose crop got no class is dropped unless a fallback class is
    set. The detections get new ids, as the reference's do."""

    type_ids = ("roboflow_core/detections_classes_replacement@v1", "DetectionsClassesReplacement")
    passes_kind = "object_detection_predictions"
    inputs = {
        "object_detection_predictions": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME),
        "classification_predictions": FieldSpec(
            (CLASSIFICATION, LIST_OF_VALUES, "string"), takes=Takes.FRAME
        ),
    }
    Settings: ClassVar[type[BlockSettings]] = ClassesReplacementSettings
    outputs = {"predictions": DETECTIONS}
    input_offsets = {"object_detection_predictions": 0, "classification_predictions": 1}
    dimension_reference = "object_detection_predictions"
    accepts_empty = True

    def __init__(
        self, name: str, config: ClassesReplacementSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        self.fallback = (config.fallback_class_name, config.fallback_class_id)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        detections: sv.Detections | None = inputs["object_detection_predictions"]
        answers: list[Any] = inputs["classification_predictions"] or []
        if detections is None:
            return {"predictions": None}
        if not answers:
            return {"predictions": sv.Detections.empty()}
        first = next((a for a in answers if a is not None), None)
        if isinstance(first, str | list):  # text (OCR, a language model): by position
            padded = list(answers) + [None] * (len(detections) - len(answers))
            classes = [
                leading_class(a, *self.fallback)
                if a is not None
                else fallback_class(*self.fallback)
                for a in padded[: len(detections)]
            ]
        else:
            by_crop = {
                a.get("parent_id"): leading_class(a, *self.fallback)
                for a in answers
                if isinstance(a, dict)
            }
            ids = detections.data.get("detection_id")
            classes = [by_crop.get(str(i)) for i in ids] if ids is not None else []
        keep = np.array([c is not None for c in classes], dtype=bool)
        if not keep.any():
            return {"predictions": sv.Detections.empty()}
        chosen = select(detections, keep)
        kept = [c for c in classes if c is not None]
        chosen.class_id = np.array([c[1] for c in kept])
        chosen.confidence = np.array([c[2] for c in kept], dtype=float)
        chosen.data["class_name"] = np.array([c[0] for c in kept])
        chosen.data["detection_id"] = np.array([str(uuid.uuid4()) for _ in kept])
        return {"predictions": chosen}


def _plain(detections: sv.Detections) -> sv.Detections:
    """Detections without their per-image metadata, which differs between sets (their image
    size, where a crop lay) and which supervision refuses to merge."""
    plain = copy.copy(detections)
    plain.metadata = {}
    return plain


class DetectionsCombineBlock(Block):
    """Two sets of detections of one image as one (all of both, in order)."""

    type_ids = ("roboflow_core/detections_combine@v1",)
    inputs = {
        "prediction_one": FieldSpec((DETECTIONS, SEGMENTATION), takes=Takes.FRAME),
        "prediction_two": FieldSpec((DETECTIONS, SEGMENTATION), takes=Takes.FRAME),
    }
    outputs = {"predictions": DETECTIONS}

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        one, two = inputs["prediction_one"], inputs["prediction_two"]
        merged = sv.Detections.merge([_plain(one), _plain(two)])
        merged.metadata = dict(one.metadata)
        return {"predictions": merged}


@dataclass(frozen=True, kw_only=True)
class DetectionsMergeSettings(BlockSettings):
    class_name: str = setting(FieldSpec(default="merged_detection", type="string"))


class DetectionsMergeBlock(Block):
    """All the detections as one: the box around them all, the lowest confidence among
    them, class id 0 and ``class_name``; none gives none."""

    type_ids = ("roboflow_core/detections_merge@v1",)
    inputs = {"predictions": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = DetectionsMergeSettings
    outputs = {"predictions": DETECTIONS}

    def __init__(self, name: str, config: DetectionsMergeSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.class_name = config.class_name

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        detections: sv.Detections = inputs["predictions"]
        if not len(detections):
            return {"predictions": sv.Detections.empty()}
        xyxy = detections.xyxy
        box = np.array([[xyxy[:, 0].min(), xyxy[:, 1].min(), xyxy[:, 2].max(), xyxy[:, 3].max()]])
        confidence = detections.confidence
        merged = sv.Detections(
            xyxy=box.astype(np.float32),
            confidence=None if confidence is None else np.array([confidence.min()], np.float32),
            class_id=np.array([0]),
            data={
                "class_name": np.array([self.class_name]),
                "detection_id": np.array([str(uuid.uuid4())]),
            },
            metadata=dict(detections.metadata),
        )
        return {"predictions": merged}
