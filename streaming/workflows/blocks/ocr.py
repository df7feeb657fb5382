"""The reference's OCR blocks (``ocr_model``, DocTR there; ``pp_ocr``) on our PP-OCRv4 model:
on the frame, or on every crop of it at once (one recognition run for all their text)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from ...inference.ocr import TextLine, TextReader
from ...inference.ocr_model import OCR_MODEL_ID
from .base import BlockSettings, FrameState, WorkflowImage, setting
from .detection import stamped
from .fields import DETECTIONS, IMAGE, FieldSpec, Takes
from .model_block import ModelBlock, ModelSettings

__all__ = ["OcrModelBlock", "PpOcrBlock"]

_SIZES = ("none", "tiny", "small", "medium")


@dataclass(frozen=True, kw_only=True)
class OcrSettings(BlockSettings):
    pass


@dataclass(frozen=True, kw_only=True)
class PpOcrSettings(BlockSettings):
    text_detection: Literal["none", "tiny", "small", "medium"] = setting(
        FieldSpec(default="small", choices=_SIZES)
    )
    text_recognition: Literal["none", "tiny", "small", "medium"] = setting(
        FieldSpec(default="small", choices=_SIZES)
    )


class OcrModelBlock(ModelBlock):
    """Text in the image: ``result`` (every line, in reading order, joined by spaces) and
    ``predictions`` (a box per line of text, its text as the class name)."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/ocr_model@v1", "OCRModel")
    inputs = {
        "images": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),
        "image": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = OcrSettings
    outputs = {
        "result": "string",
        "predictions": DETECTIONS,
        "parent_id": "string",
        "root_parent_id": "string",
        "prediction_type": "string",
    }
    tasks: tuple[str, ...] = ("ocr",)
    missing_hint = f"; the OCR model is fetched by `visionstream models pull {OCR_MODEL_ID}`"
    detect_text = True
    recognise_text = True

    def model_of(self, config: ModelSettings) -> str:
        return OCR_MODEL_ID  # the reference's blocks name no model: every OCR id is ours

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return self.run_batch([inputs], frame)[0]

    def run_batch(self, batch: list[dict[str, Any]], frame: FrameState) -> list[dict[str, Any]]:
        reader = self.model
        if not isinstance(reader, TextReader):
            raise TypeError(f"model '{self.model_id}' does not read text")
        images = [self.image(inputs) for inputs in batch]
        pixels = [i.numpy for i in images]
        if self.recognise_text:
            found = reader.read_many(pixels, frame.timer, detect=self.detect_text)
        else:
            found = [reader.locate(p) for p in pixels]
        return [self.result(i, lines) for i, lines in zip(images, found, strict=True)]

    def result(self, image: WorkflowImage, lines: list[TextLine]) -> dict[str, Any]:
        if lines:
            detections = sv.Detections(
                xyxy=np.array([line.xyxy for line in lines], np.float32),
                confidence=np.array([line.confidence for line in lines], np.float32),
                class_id=np.zeros(len(lines), int),
                data={"class_name": np.array([line.text or "text" for line in lines])},
            )
        else:
            detections = sv.Detections.empty()
            detections.data["class_name"] = np.array([], dtype=str)
        detections.metadata["prediction_type"] = "ocr"
        return {
            "result": " ".join(line.text for line in lines if line.text),
            "predictions": stamped(image, detections),
            "parent_id": image.parent_id,
            "root_parent_id": image.root_id or image.parent_id,
            "prediction_type": "ocr",
            "inference_id": str(uuid.uuid4()),
        }


class PpOcrBlock(OcrModelBlock):
    """PaddleOCR's two stages, each of which may be left out: ``text_detection: none`` reads
    the whole image as one line (a crop of a plate), ``text_recognition: none`` only finds
    where text is. Every size the reference offers runs our one PP-OCRv4 mobile pair."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/pp_ocr@v1",)
    inputs = OcrModelBlock.inputs | {}
    Settings: ClassVar[type[BlockSettings]] = PpOcrSettings

    def configure(self, name: str, config: ModelSettings) -> None:
        super().configure(name, config)
        assert isinstance(config, PpOcrSettings)
        if config.text_detection == "none" and config.text_recognition == "none":
            raise WorkflowCompilationError(
                f"step '{name}': text_detection and text_recognition cannot both be none"
            )
        self.detect_text = config.text_detection != "none"
        self.recognise_text = config.text_recognition != "none"
