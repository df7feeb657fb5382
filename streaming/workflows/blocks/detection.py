"""The reference's detector blocks on models from the local registry: object detection,
instance segmentation and keypoint detection, on the frame or on every crop of it at once."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from ...inference.decoders import DecodeOptions
from .base import BlockSettings, FrameState, WorkflowImage
from .fields import DETECTIONS, KEYPOINTS, SEGMENTATION
from .model_block import (
    MODEL_FIELDS,
    ChosenConfidence,
    ChosenConfidenceByDefault,
    DecodeSettings,
    FixedConfidence,
    KeypointSettings,
    MaskSettings,
    ModelBlock,
    ModelSettings,
    threshold,
)

__all__ = [
    "InstanceSegmentationModelBlock",
    "InstanceSegmentationModelBlockV3",
    "KeypointDetectionModelBlock",
    "KeypointDetectionModelBlockV3",
    "ObjectDetectionModelBlock",
    "ObjectDetectionModelBlockV3",
    "stamped",
]

_DETECTING = ("object-detection", "instance-segmentation", "keypoint-detection")


@dataclass(frozen=True, kw_only=True)
class ObjectDetectionModelSettings(FixedConfidence, DecodeSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class ObjectDetectionModelV3Settings(ChosenConfidence, DecodeSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class InstanceSegmentationModelSettings(FixedConfidence, MaskSettings, DecodeSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class InstanceSegmentationModelV3Settings(ChosenConfidence, MaskSettings, DecodeSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class KeypointDetectionModelSettings(FixedConfidence, KeypointSettings, DecodeSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class KeypointDetectionModelV3Settings(ChosenConfidenceByDefault, KeypointSettings, DecodeSettings):
    pass


def stamped(image: WorkflowImage, detections: sv.Detections) -> sv.Detections:
    """``detections`` found on ``image``, with what the results say of each (its id, its
    image's id) and of the image (its size; where it lay in its parent, for a crop)."""
    n = len(detections)
    detections.data["detection_id"] = np.array([str(uuid.uuid4()) for _ in range(n)])
    detections.data["parent_id"] = np.array([image.parent_id] * n)
    height, width = image.numpy.shape[:2]
    detections.metadata["image_size"] = (width, height)
    if image.parent_origin is not None:  # found on a crop or slice: where it lay
        detections.metadata["parent_origin"] = image.parent_origin
    return detections


class ObjectDetectionModelBlock(ModelBlock):
    """The reference's object detection model block: one of our models on the frame."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/roboflow_object_detection_model@v1",
        "roboflow_core/roboflow_object_detection_model@v2",
        "RoboflowObjectDetectionModel",
        "ObjectDetectionModel",
    )
    inputs = MODEL_FIELDS  # the rest (the reference blocks' defaults) in its Settings
    Settings: ClassVar[type[BlockSettings]] = ObjectDetectionModelSettings
    outputs = {"predictions": DETECTIONS, "inference_id": "string", "model_id": "string"}

    tasks: tuple[str, ...] = _DETECTING
    """The model tasks this block runs (a segmentation model's boxes are boxes too)."""

    def configure(self, name: str, config: ModelSettings) -> None:
        super().configure(name, config)
        assert isinstance(config, DecodeSettings)
        model_id = self.model_id
        class_filter = config.class_filter
        class_ids: frozenset[int] | None = None
        if class_filter is not None:
            names = self.model.manifest.class_names
            if not all(isinstance(c, str) for c in class_filter):
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
        self.options = DecodeOptions(
            confidence=threshold(config, name),
            iou_threshold=config.iou_threshold,
            class_filter=class_ids,
            max_detections=config.max_detections,
            class_agnostic_nms=config.class_agnostic_nms,
            max_candidates=config.max_candidates,
        )

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return self.run_batch([inputs], frame)[0]

    def run_batch(self, batch: list[dict[str, Any]], frame: FrameState) -> list[dict[str, Any]]:
        """Every crop of a frame in as few model runs as the model takes."""
        images = [self.image(inputs) for inputs in batch]
        found = self.model.detect_many([i.numpy for i in images], self.options, frame.timer)
        return [self.result(i, d) for i, d in zip(images, found, strict=True)]

    def result(self, image: WorkflowImage, detections: sv.Detections) -> dict[str, Any]:
        """The step's outputs for one image's detections."""
        return {
            "predictions": stamped(image, detections),
            "inference_id": str(uuid.uuid4()),
            "model_id": self.model_id,
        }


class InstanceSegmentationModelBlock(ObjectDetectionModelBlock):
    """Boxes with masks (``points`` polygons in the results) from a ``*-seg`` model."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/roboflow_instance_segmentation_model@v1",
        "roboflow_core/roboflow_instance_segmentation_model@v2",
        "RoboflowInstanceSegmentationModel",
        "InstanceSegmentationModel",
    )
    tasks = ("instance-segmentation",)
    Settings: ClassVar[type[BlockSettings]] = InstanceSegmentationModelSettings
    outputs = {"predictions": SEGMENTATION, "inference_id": "string", "model_id": "string"}


class KeypointDetectionModelBlock(ObjectDetectionModelBlock):
    """Boxes with named keypoints from a ``*-pose`` model; keypoints below
    ``keypoint_confidence`` are left out of the results (and not drawn)."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/roboflow_keypoint_detection_model@v1",
        "roboflow_core/roboflow_keypoint_detection_model@v2",
        "RoboflowKeypointDetectionModel",
        "KeypointsDetectionModel",
    )
    tasks = ("keypoint-detection",)
    Settings: ClassVar[type[BlockSettings]] = KeypointDetectionModelSettings
    outputs = {"predictions": KEYPOINTS, "inference_id": "string", "model_id": "string"}

    def configure(self, name: str, config: ModelSettings) -> None:
        super().configure(name, config)
        assert isinstance(config, KeypointSettings)
        self.keypoint_confidence = config.keypoint_confidence

    def result(self, image: WorkflowImage, detections: sv.Detections) -> dict[str, Any]:
        result = super().result(image, detections)
        if self.keypoint_confidence > 0 and "keypoints_confidence" in detections.data:
            weak = np.asarray(detections.data["keypoints_confidence"]) < self.keypoint_confidence
            names = np.asarray(detections.data["keypoints_class_name"]).astype(object)
            names[weak] = ""  # no name: left out when serialised, (0, 0): not drawn
            detections.data["keypoints_class_name"] = names
            xy = np.asarray(detections.data["keypoints_xy"]).copy()
            xy[weak] = 0
            detections.data["keypoints_xy"] = xy
        return result


class ObjectDetectionModelBlockV3(ObjectDetectionModelBlock):
    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/roboflow_object_detection_model@v3",)
    Settings: ClassVar[type[BlockSettings]] = ObjectDetectionModelV3Settings


class InstanceSegmentationModelBlockV3(InstanceSegmentationModelBlock):
    # v4 drops v3's enforce_dense_masks_in_inference_models, which has no meaning here.
    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/roboflow_instance_segmentation_model@v3",
        "roboflow_core/roboflow_instance_segmentation_model@v4",
    )
    Settings: ClassVar[type[BlockSettings]] = InstanceSegmentationModelV3Settings


class KeypointDetectionModelBlockV3(KeypointDetectionModelBlock):
    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/roboflow_keypoint_detection_model@v3",)
    Settings: ClassVar[type[BlockSettings]] = KeypointDetectionModelV3Settings
