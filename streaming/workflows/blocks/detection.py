"""The reference's model blocks on models from the local registry: object detection,
instance segmentation, keypoint detection, and single- and multi-label classification."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import numpy as np

from ...errors import WorkflowCompilationError
from ...inference.decoders import DecodeOptions
from ...inference.registry import UnknownModel
from .base import (
    CLASSIFICATION,
    DETECTIONS,
    IMAGE,
    KEYPOINTS,
    SEGMENTATION,
    Block,
    BlockSettings,
    BuildContext,
    FieldSpec,
    FrameState,
    ModelSource,
    WorkflowImage,
    fraction,
)

__all__ = [
    "ClassificationModelBlock",
    "ClassificationModelBlockV3",
    "InstanceSegmentationModelBlock",
    "InstanceSegmentationModelBlockV3",
    "KeypointDetectionModelBlock",
    "KeypointDetectionModelBlockV3",
    "MultiLabelClassificationModelBlock",
    "MultiLabelClassificationModelBlockV3",
    "ObjectDetectionModelBlock",
    "ObjectDetectionModelBlockV3",
]

_DETECTING = ("object-detection", "instance-segmentation", "keypoint-detection")


def _model(name: str, model_id: str, context: BuildContext, tasks: tuple[str, ...]):
    """The step's model from the registry, of one of ``tasks``; a 400 naming it otherwise."""
    if not isinstance(model_id, str) or not model_id:
        raise WorkflowCompilationError(f"step '{name}': model_id must be a non-empty string")
    try:
        model = context.models.acquire(model_id)
    except UnknownModel:
        known = ", ".join(context.models.available()) or "none"
        raise WorkflowCompilationError(
            f"step '{name}': unknown model_id '{model_id}' (available: {known})"
        ) from None
    task = getattr(model, "task", "object-detection")
    if task not in tasks:
        context.models.release(model.name)
        raise WorkflowCompilationError(
            f"step '{name}': model '{model_id}' does {task}, not {' or '.join(tasks)}"
        )
    return model


DEFAULT_CONFIDENCE = 0.4
"""The threshold of the reference's model blocks when none is chosen."""


_MODEL_FIELDS = {
    "images": FieldSpec((IMAGE,), default=None, per_frame=True),
    "image": FieldSpec((IMAGE,), default=None, per_frame=True),  # v1 name
    "model_id": FieldSpec(type="string", description="a model of the models directory"),
}


@dataclass(frozen=True, kw_only=True)
class _ModelSettings(BlockSettings):
    model_id: str


@dataclass(frozen=True, kw_only=True)
class _DecodeSettings(_ModelSettings):
    """What a detector's results keep (the reference's defaults in ``fields``)."""

    iou_threshold: float
    class_filter: list[Any] | None
    max_detections: int
    class_agnostic_nms: bool
    max_candidates: int


@dataclass(frozen=True, kw_only=True)
class _MaskSettings(BlockSettings):
    mask_decode_mode: Literal["accurate", "tradeoff", "fast"]
    tradeoff_factor: float


@dataclass(frozen=True, kw_only=True)
class _KeypointSettings(BlockSettings):
    keypoint_confidence: float


@dataclass(frozen=True, kw_only=True)
class _FixedConfidence(BlockSettings):
    """v1 and v2 blocks: the threshold is ``confidence``."""

    confidence: float


@dataclass(frozen=True, kw_only=True)
class _ChosenConfidence(BlockSettings):
    """v3 (v4 for segmentation) model blocks: ``confidence_mode`` instead of ``confidence``.
    ``custom`` takes ``custom_confidence``; ``best`` (the reference's per-class F1-optimal
    thresholds from its training platform's evaluation, which an ONNX export does not carry)
    and ``default`` take the model's default, 0.4."""

    confidence_mode: Literal["best", "default", "custom"]
    custom_confidence: float | None


def _threshold(config: BlockSettings, step: str) -> float:
    """The confidence threshold a model step chose."""
    if isinstance(config, _FixedConfidence):
        return float(config.confidence)
    assert isinstance(config, _ChosenConfidence)
    if config.confidence_mode != "custom":
        return DEFAULT_CONFIDENCE
    if config.custom_confidence is None:
        raise WorkflowCompilationError(
            f"step '{step}': custom_confidence is required when confidence_mode is custom"
        )
    return float(config.custom_confidence)


@dataclass(frozen=True, kw_only=True)
class ObjectDetectionModelSettings(_FixedConfidence, _DecodeSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class ObjectDetectionModelV3Settings(_ChosenConfidence, _DecodeSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class InstanceSegmentationModelSettings(_FixedConfidence, _MaskSettings, _DecodeSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class InstanceSegmentationModelV3Settings(_ChosenConfidence, _MaskSettings, _DecodeSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class KeypointDetectionModelSettings(_FixedConfidence, _KeypointSettings, _DecodeSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class KeypointDetectionModelV3Settings(_ChosenConfidence, _KeypointSettings, _DecodeSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class ClassificationModelSettings(_FixedConfidence, _ModelSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class ClassificationModelV3Settings(_ChosenConfidence, _ModelSettings):
    pass


class _ModelBlock(Block):
    """One of our models on the frame: the image input (``images``, or v1's ``image``) and
    the model, which must do one of ``tasks``."""

    tasks: tuple[str, ...]

    @classmethod
    def check_bindings(cls, name: str, bound: set[str]) -> None:
        if not bound & {"images", "image"}:
            raise WorkflowCompilationError(f"step '{name}': field 'images' is required")

    def __init__(self, name: str, config: _ModelSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.model = _model(name, config.model_id, context, self.tasks)
        self.model_id = config.model_id
        self._models: ModelSource | None = context.models  # released once, on close
        try:
            self.configure(name, config)
        except BaseException:
            self.close()  # a block that is never built is never closed: release it here
            raise

    def configure(self, name: str, config: _ModelSettings) -> None:
        """The subclass's own fields, checked once the model is held."""

    def close(self) -> None:
        models, self._models = self._models, None
        if models is not None:
            models.release(self.model.name)

    @staticmethod
    def image(inputs: dict[str, Any]) -> WorkflowImage:
        return inputs["images"] if inputs.get("images") is not None else inputs["image"]


class ObjectDetectionModelBlock(_ModelBlock):
    """The reference's object detection model block: one of our models on the frame."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/roboflow_object_detection_model@v1",
        "roboflow_core/roboflow_object_detection_model@v2",
        "RoboflowObjectDetectionModel",
        "ObjectDetectionModel",
    )
    # Defaults are the reference blocks'.
    fields = {
        **_MODEL_FIELDS,
        "confidence": fraction(0.4),
        "iou_threshold": fraction(0.3),
        "class_filter": FieldSpec(default=None, type="list"),
        "max_detections": FieldSpec(default=300, type="integer", minimum=1),
        "class_agnostic_nms": FieldSpec(default=False, type="boolean"),
        "max_candidates": FieldSpec(default=3000, type="integer", minimum=1),
    }
    Settings: ClassVar[type[BlockSettings]] = ObjectDetectionModelSettings
    outputs = {"predictions": DETECTIONS, "inference_id": "string", "model_id": "string"}

    tasks: tuple[str, ...] = _DETECTING
    """The model tasks this block runs (a segmentation model's boxes are boxes too)."""

    def configure(self, name: str, config: _ModelSettings) -> None:
        super().configure(name, config)
        assert isinstance(config, _DecodeSettings)
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
            confidence=_threshold(config, name),
            iou_threshold=config.iou_threshold,
            class_filter=class_ids,
            max_detections=config.max_detections,
            class_agnostic_nms=config.class_agnostic_nms,
            max_candidates=config.max_candidates,
        )

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image = self.image(inputs)
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


class InstanceSegmentationModelBlock(ObjectDetectionModelBlock):
    """Boxes with masks (``points`` polygons in the results) from a ``*-seg`` model."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/roboflow_instance_segmentation_model@v1",
        "roboflow_core/roboflow_instance_segmentation_model@v2",
        "RoboflowInstanceSegmentationModel",
        "InstanceSegmentationModel",
    )
    tasks = ("instance-segmentation",)
    fields = {
        **ObjectDetectionModelBlock.fields,
        # Accepted as the reference spells them; masks are always decoded fully here.
        "mask_decode_mode": FieldSpec(default="accurate", choices=("accurate", "tradeoff", "fast")),
        "tradeoff_factor": fraction(0.0),
    }
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
    fields = {
        **ObjectDetectionModelBlock.fields,
        "keypoint_confidence": fraction(0.0),
    }
    Settings: ClassVar[type[BlockSettings]] = KeypointDetectionModelSettings
    outputs = {"predictions": KEYPOINTS, "inference_id": "string", "model_id": "string"}

    def configure(self, name: str, config: _ModelSettings) -> None:
        super().configure(name, config)
        assert isinstance(config, _KeypointSettings)
        self.keypoint_confidence = config.keypoint_confidence

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        result = super().run(inputs, frame)
        detections = result["predictions"]
        if self.keypoint_confidence > 0 and "keypoints_confidence" in detections.data:
            weak = np.asarray(detections.data["keypoints_confidence"]) < self.keypoint_confidence
            names = np.asarray(detections.data["keypoints_class_name"]).astype(object)
            names[weak] = ""  # no name: left out when serialised, (0, 0): not drawn
            detections.data["keypoints_class_name"] = names
            xy = np.asarray(detections.data["keypoints_xy"]).copy()
            xy[weak] = 0
            detections.data["keypoints_xy"] = xy
        return result


class ClassificationModelBlock(_ModelBlock):
    """A classifier on the frame: ``predictions`` as the reference's classification response
    (every class with its confidence, best first; ``top`` and its ``confidence``)."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/roboflow_classification_model@v1",
        "roboflow_core/roboflow_classification_model@v2",
        "RoboflowClassificationModel",
        "ClassificationModel",
    )
    tasks: tuple[str, ...] = ("classification",)
    fields = {**_MODEL_FIELDS, "confidence": fraction(0.4)}
    Settings: ClassVar[type[BlockSettings]] = ClassificationModelSettings
    outputs = {"predictions": CLASSIFICATION, "inference_id": "string", "model_id": "string"}

    def configure(self, name: str, config: _ModelSettings) -> None:
        super().configure(name, config)
        self.confidence = _threshold(config, name)
        self.class_names = list(self.model.manifest.class_names)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image = self.image(inputs)
        probabilities = self.model.classify(image.numpy, frame.timer)
        height, width = image.numpy.shape[:2]
        inference_id = str(uuid.uuid4())
        prediction = {
            "inference_id": inference_id,
            "image": {"width": width, "height": height},
            **self.describe(probabilities),
            "prediction_type": "classification",
            "parent_id": image.parent_id,
            "root_parent_id": image.parent_id,
        }
        return {"predictions": prediction, "inference_id": inference_id, "model_id": self.model_id}

    def describe(self, probabilities: np.ndarray) -> dict[str, Any]:
        order = np.argsort(-probabilities)
        ranked = [
            {
                "class": self.class_names[i],
                "class_id": int(i),
                "confidence": round(float(probabilities[i]), 4),
            }
            for i in order
        ]
        return {"predictions": ranked, "top": ranked[0]["class"],
                "confidence": ranked[0]["confidence"]}  # fmt: skip


class MultiLabelClassificationModelBlock(ClassificationModelBlock):
    """Each class on its own: ``predictions`` maps every class to its confidence, and
    ``predicted_classes`` lists those at ``confidence`` or above."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/roboflow_multi_label_classification_model@v1",
        "roboflow_core/roboflow_multi_label_classification_model@v2",
        "RoboflowMultiLabelClassificationModel",
        "MultiLabelClassificationModel",
    )
    tasks = ("multi-label-classification",)

    def describe(self, probabilities: np.ndarray) -> dict[str, Any]:
        every = {
            name: {"confidence": round(float(p), 4), "class_id": i}
            for i, (name, p) in enumerate(zip(self.class_names, probabilities, strict=True))
        }
        chosen = [n for n, p in zip(self.class_names, probabilities, strict=True)
                  if p >= self.confidence]  # fmt: skip
        return {"predictions": every, "predicted_classes": chosen}


def _with_confidence_mode(fields: dict[str, FieldSpec], mode: str = "best") -> dict[str, FieldSpec]:
    """``fields`` with v3's confidence fields for ``confidence``; ``mode``: the default
    ``confidence_mode`` of the reference's block."""
    return {name: spec for name, spec in fields.items() if name != "confidence"} | {
        "confidence_mode": FieldSpec(default=mode, choices=("best", "default", "custom")),
        "custom_confidence": replace(fraction(DEFAULT_CONFIDENCE), nullable=True),
    }


class ObjectDetectionModelBlockV3(ObjectDetectionModelBlock):
    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/roboflow_object_detection_model@v3",)
    fields = _with_confidence_mode(ObjectDetectionModelBlock.fields)
    Settings: ClassVar[type[BlockSettings]] = ObjectDetectionModelV3Settings


class InstanceSegmentationModelBlockV3(InstanceSegmentationModelBlock):
    # v4 drops v3's enforce_dense_masks_in_inference_models, which has no meaning here.
    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/roboflow_instance_segmentation_model@v3",
        "roboflow_core/roboflow_instance_segmentation_model@v4",
    )
    fields = _with_confidence_mode(InstanceSegmentationModelBlock.fields)
    Settings: ClassVar[type[BlockSettings]] = InstanceSegmentationModelV3Settings


class KeypointDetectionModelBlockV3(KeypointDetectionModelBlock):
    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/roboflow_keypoint_detection_model@v3",)
    fields = _with_confidence_mode(KeypointDetectionModelBlock.fields, mode="default")
    Settings: ClassVar[type[BlockSettings]] = KeypointDetectionModelV3Settings


class ClassificationModelBlockV3(ClassificationModelBlock):
    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/roboflow_classification_model@v3",)
    fields = _with_confidence_mode(ClassificationModelBlock.fields, mode="default")
    Settings: ClassVar[type[BlockSettings]] = ClassificationModelV3Settings


class MultiLabelClassificationModelBlockV3(MultiLabelClassificationModelBlock):
    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/roboflow_multi_label_classification_model@v3",
    )
    fields = _with_confidence_mode(MultiLabelClassificationModelBlock.fields)
    Settings: ClassVar[type[BlockSettings]] = ClassificationModelV3Settings
