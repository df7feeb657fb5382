"""``roboflow_core/roboflow_object_detection_model`` on a model from the local registry."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np

from ...errors import WorkflowCompilationError
from ...inference.decoders import DecodeOptions
from ...inference.registry import UnknownModel
from .base import DETECTIONS, IMAGE, Block, BuildContext, FieldSpec, FrameState
from .checks import number

__all__ = ["ObjectDetectionModelBlock"]


class ObjectDetectionModelBlock(Block):
    """The reference's object detection model block: one of our models on the frame."""

    type_ids = (
        "roboflow_core/roboflow_object_detection_model@v1",
        "roboflow_core/roboflow_object_detection_model@v2",
        "roboflow_core/roboflow_object_detection_model@v3",
        "RoboflowObjectDetectionModel",
        "ObjectDetectionModel",
    )
    # Defaults are the reference blocks'.
    fields = {
        "images": FieldSpec((IMAGE,), default=None, per_frame=True),
        "image": FieldSpec((IMAGE,), default=None, per_frame=True),  # v1 name
        "model_id": FieldSpec(),
        "confidence": FieldSpec(default=0.4),
        "iou_threshold": FieldSpec(default=0.3),
        "class_filter": FieldSpec(default=None),
        "max_detections": FieldSpec(default=300),
        "class_agnostic_nms": FieldSpec(default=False),
        "max_candidates": FieldSpec(default=3000),
    }
    outputs = {"predictions": DETECTIONS, "inference_id": "string", "model_id": "string"}

    @classmethod
    def check_bindings(cls, name: str, bound: set[str]) -> None:
        if not bound & {"images", "image"}:
            raise WorkflowCompilationError(f"step '{name}': field 'images' is required")

    def __init__(self, name: str, config: dict[str, Any], context: BuildContext) -> None:
        super().__init__(name, config, context)
        model_id = config["model_id"]
        if not isinstance(model_id, str) or not model_id:
            raise WorkflowCompilationError(f"step '{name}': model_id must be a non-empty string")
        try:
            self.model = context.models.get(model_id)
        except UnknownModel:
            known = ", ".join(context.models.available()) or "none"
            raise WorkflowCompilationError(
                f"step '{name}': unknown model_id '{model_id}' (available: {known})"
            ) from None
        self.model_id = model_id
        class_filter = config["class_filter"]
        class_ids: frozenset[int] | None = None
        if class_filter is not None:
            names = self.model.manifest.class_names
            if not isinstance(class_filter, list) or not all(
                isinstance(c, str) for c in class_filter
            ):
                raise WorkflowCompilationError(
                    f"step '{name}': class_filter must be a list of class names"
                )
            unknown = [c for c in class_filter if c not in names]
            if unknown:
                raise WorkflowCompilationError(
                    f"step '{name}': class_filter names classes {unknown} "
                    f"that model '{model_id}' does not have"
                )
            class_ids = frozenset(names.index(c) for c in class_filter)
        max_detections = config["max_detections"]
        max_candidates = config["max_candidates"]
        for key, value in (("max_detections", max_detections), ("max_candidates", max_candidates)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise WorkflowCompilationError(f"step '{name}': {key} must be a positive integer")
        self.options = DecodeOptions(
            confidence=number(name, "confidence", config["confidence"], 0.0, 1.0),
            iou_threshold=number(name, "iou_threshold", config["iou_threshold"], 0.0, 1.0),
            class_filter=class_ids,
            max_detections=max_detections,
            class_agnostic_nms=bool(config["class_agnostic_nms"]),
            max_candidates=max_candidates,
        )

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image = inputs["images"] if inputs.get("images") is not None else inputs["image"]
        detections = self.model.detect(image.numpy, self.options, frame.timer)
        n = len(detections)
        detections.data["detection_id"] = np.array([str(uuid.uuid4()) for _ in range(n)])
        detections.data["parent_id"] = np.array([image.parent_id] * n)
        height, width = image.numpy.shape[:2]
        detections.metadata["image_size"] = (width, height)
        return {
            "predictions": detections,
            "inference_id": str(uuid.uuid4()),
            "model_id": self.model_id,
        }
