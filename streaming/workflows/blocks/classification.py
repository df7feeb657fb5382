"""The reference's classification blocks on models from the local registry, single- and
multi-label, on the frame or on every crop of it at once (one model run, mostly)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import BlockSettings, FrameState, WorkflowImage
from .fields import CLASSIFICATION
from .model_block import (
    MODEL_FIELDS,
    ChosenConfidence,
    ChosenConfidenceByDefault,
    FixedConfidence,
    ModelBlock,
    ModelSettings,
    threshold,
)

__all__ = [
    "ClassificationModelBlock",
    "ClassificationModelBlockV3",
    "MultiLabelClassificationModelBlock",
    "MultiLabelClassificationModelBlockV3",
]


@dataclass(frozen=True, kw_only=True)
class ClassificationModelSettings(FixedConfidence, ModelSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class ClassificationModelV3Settings(ChosenConfidenceByDefault, ModelSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class MultiLabelClassificationModelV3Settings(ChosenConfidence, ModelSettings):
    pass


class ClassificationModelBlock(ModelBlock):
    """A classifier on the frame: ``predictions`` as the reference's classification response
    (every class with its confidence, best first; ``top`` and its ``confidence``)."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/roboflow_classification_model@v1",
        "roboflow_core/roboflow_classification_model@v2",
        "RoboflowClassificationModel",
        "ClassificationModel",
    )
    tasks: tuple[str, ...] = ("classification",)
    inputs = MODEL_FIELDS
    Settings: ClassVar[type[BlockSettings]] = ClassificationModelSettings
    outputs = {"predictions": CLASSIFICATION, "inference_id": "string", "model_id": "string"}

    def configure(self, name: str, config: ModelSettings) -> None:
        super().configure(name, config)
        self.confidence = threshold(config, name)
        self.class_names = list(self.model.manifest.class_names)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return self.run_batch([inputs], frame)[0]

    def run_batch(self, batch: list[dict[str, Any]], frame: FrameState) -> list[dict[str, Any]]:
        """Every crop of a frame in as few model runs as the model takes: one, mostly."""
        images = [self.image(inputs) for inputs in batch]
        found = self.model.classify_many([i.numpy for i in images], frame.timer)
        return [self.result(i, p) for i, p in zip(images, found, strict=True)]

    def result(self, image: WorkflowImage, probabilities: np.ndarray) -> dict[str, Any]:
        """The step's outputs for one image's class probabilities."""
        height, width = image.numpy.shape[:2]
        inference_id = str(uuid.uuid4())
        prediction = {
            "inference_id": inference_id,
            "image": {"width": width, "height": height},
            **self.describe(probabilities),
            "prediction_type": "classification",
            "parent_id": image.parent_id,
            "root_parent_id": image.root_id or image.parent_id,
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
        return {
            "predictions": ranked,
            "top": ranked[0]["class"],
            "confidence": ranked[0]["confidence"],
        }


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
        chosen = [
            n for n, p in zip(self.class_names, probabilities, strict=True) if p >= self.confidence
        ]
        return {"predictions": every, "predicted_classes": chosen}


class ClassificationModelBlockV3(ClassificationModelBlock):
    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/roboflow_classification_model@v3",)
    Settings: ClassVar[type[BlockSettings]] = ClassificationModelV3Settings


class MultiLabelClassificationModelBlockV3(MultiLabelClassificationModelBlock):
    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/roboflow_multi_label_classification_model@v3",
    )
    Settings: ClassVar[type[BlockSettings]] = MultiLabelClassificationModelV3Settings
