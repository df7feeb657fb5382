"""``vlm_as_classifier`` and ``vlm_as_detector`` (v1, v2): a model's text answer read into a
classification or detections, as the reference reads each model's answers (its box
convention, fenced JSON, unknown classes at ``class_id`` -1, missing confidences at 1.0);
an answer that does not read is ``error_status: true``, never an error of the run."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from ...language import decoding
from ...language.decoding import Box, Convention
from .base import Block, BlockSettings, BuildContext, FrameState, WorkflowImage, setting
from .detection import stamped
from .fields import CLASSIFICATION, DETECTIONS, IMAGE, FieldSpec, Takes
from .language import LANGUAGE_MODEL_OUTPUT

__all__ = [
    "PARSERS",
    "VlmAsClassifierBlock",
    "VlmAsDetectorBlock",
    "VlmAsDetectorV1Block",
    "as_detections",
]

_ANSWER = FieldSpec((LANGUAGE_MODEL_OUTPUT, "string"), takes=Takes.FRAME)
_CLASSES = FieldSpec(("list_of_values", "*"), default=None, takes=Takes.FRAME_OR_LITERAL)


class VlmAsClassifierBlock(Block):
    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/vlm_as_classifier@v1",
        "roboflow_core/vlm_as_classifier@v2",
    )
    inputs = {
        "image": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "vlm_output": _ANSWER,
        "classes": FieldSpec(("list_of_values", "*"), takes=Takes.FRAME_OR_LITERAL),
    }
    outputs = {"error_status": "boolean", "predictions": CLASSIFICATION, "inference_id": "string"}

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        inference_id = str(uuid.uuid4())
        image, classes = inputs["image"], inputs.get("classes")
        prediction = None
        if isinstance(image, WorkflowImage) and isinstance(classes, list):
            height, width = image.numpy.shape[:2]
            prediction = decoding.classification(
                inputs.get("vlm_output"),
                width=width,
                height=height,
                parent_id=image.parent_id,
                classes=[str(c) for c in classes],
                inference_id=inference_id,
            )
        return {
            "error_status": prediction is None,
            "predictions": prediction,
            "inference_id": inference_id,
        }


def _either(box_2d: Convention, otherwise: Convention) -> Convention:
    """``box_2d`` entries read one way, named fields another (the reference's parsers)."""
    return lambda e, w, h: (box_2d if "box_2d" in e else otherwise)(e, w, h)


def _strict(convention: Convention) -> Convention:
    """An entry without its box is an error of the whole answer (the older parsers)."""

    def read(entry: dict[str, Any], width: int, height: int) -> list[float] | None:
        box = convention(entry, width, height)
        if box is None:
            raise ValueError("a detection without a box")
        return box

    return read


def _openai_style(uploaded: Any) -> Convention:
    """OpenAI's and Claude's: named fields on 0-1 (up to their v4), or ``box_2d`` in pixels of
    the image as the block uploaded it (their newest)."""
    return _either(decoding.absolute(uploaded), _strict(decoding.normalized))


_GEMINI = _either(decoding.yxyx_1000, _strict(decoding.normalized))
_MUSE_LABELS = ("label",)

PARSERS: dict[tuple[str, str], Convention | str] = {
    ("google-gemini", "object-detection"): _GEMINI,
    ("anthropic-claude", "object-detection"): _openai_style(decoding.anthropic_upload_size),
    ("openai", "object-detection"): _openai_style(decoding.max_edge_size(2048)),
    ("spacexai", "object-detection"): decoding.percent,
    ("qwen", "object-detection"): decoding.xyxy_1000,
    ("zai", "object-detection"): decoding.xyxy_1000,
    ("zai-flash", "object-detection"): decoding.xyxy_1000,
    ("muse", "object-detection"): decoding.named_1000,
    ("florence-2", "object-detection"): "<OD>",
    ("florence-2", "open-vocabulary-object-detection"): "<OPEN_VOCABULARY_DETECTION>",
    ("florence-2", "object-detection-and-caption"): "<DENSE_REGION_CAPTION>",
    ("florence-2", "phrase-grounded-object-detection"): "<CAPTION_TO_PHRASE_GROUNDING>",
    ("florence-2", "region-proposal"): "<REGION_PROPOSAL>",
    ("florence-2", "ocr-with-text-detection"): "<OCR_WITH_REGION>",
}
"""Each model's answers, by task: a box convention, or Florence-2's task token (its answers
are read by supervision's Florence-2 parser)."""

_V1_MODELS = ("google-gemini", "anthropic-claude", "florence-2")


@dataclass(frozen=True, kw_only=True)
class VlmAsDetectorSettings(BlockSettings):
    model_type: str = setting(FieldSpec(choices=tuple(sorted({m for m, _ in PARSERS}))))
    task_type: str = setting(FieldSpec(choices=tuple(sorted({t for _, t in PARSERS}))))


@dataclass(frozen=True, kw_only=True)
class VlmAsDetectorV1Settings(VlmAsDetectorSettings):
    model_type: str = setting(FieldSpec(choices=_V1_MODELS))


class VlmAsDetectorBlock(Block):
    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/vlm_as_detector@v2",)
    inputs = {
        "image": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "vlm_output": _ANSWER,
        "classes": _CLASSES,
    }
    Settings: ClassVar[type[BlockSettings]] = VlmAsDetectorSettings
    outputs = {"error_status": "boolean", "predictions": DETECTIONS, "inference_id": "string"}
    parsers: ClassVar[dict[tuple[str, str], Convention | str]] = PARSERS

    def __init__(self, name: str, config: VlmAsDetectorSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        key = (config.model_type, config.task_type)
        if key not in self.parsers:
            raise WorkflowCompilationError(
                f"step '{name}': Could not parse result of task {config.task_type} for model "
                f"{config.model_type}"
            )
        self._parser = self.parsers[key]
        self._model_type = config.model_type

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        inference_id = str(uuid.uuid4())
        image, classes = inputs["image"], inputs.get("classes")
        failed = {"error_status": True, "predictions": None, "inference_id": inference_id}
        if not isinstance(image, WorkflowImage):
            return failed
        if classes is None and self._model_type != "florence-2":
            return failed  # the reference refuses this when compiled; a selector may be None
        error, payload = decoding.extract_json(inputs.get("vlm_output"))
        if error and self._model_type == "muse":
            payload = decoding.loose_named_boxes(inputs.get("vlm_output"))
            error = not payload
        if error:
            return failed
        try:
            detections = self._detections(image, payload, [str(c) for c in classes or []])
        except (KeyError, TypeError, ValueError, IndexError):
            return failed
        detections.data["inference_id"] = np.array([inference_id] * len(detections))
        return {"error_status": False, "predictions": detections, "inference_id": inference_id}

    def _detections(self, image: WorkflowImage, payload: Any, classes: list[str]) -> sv.Detections:
        height, width = image.numpy.shape[:2]
        if isinstance(self._parser, str):
            return stamped(image, _florence(self._parser, payload, width, height, classes))
        boxes = decoding.read_boxes(payload, self._parser, width, height, classes)
        if self._model_type == "muse":  # its confidences are not calibrated: the reference's 1.0
            boxes = [Box(b.xyxy, b.class_name, b.class_id, 1.0) for b in boxes]
        return stamped(image, as_detections(boxes))


class VlmAsDetectorV1Block(VlmAsDetectorBlock):
    """v1: Gemini's, Claude's (read as Gemini's, as the reference's v1 reads them) and
    Florence-2's answers."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/vlm_as_detector@v1",)
    Settings: ClassVar[type[BlockSettings]] = VlmAsDetectorV1Settings
    parsers: ClassVar[dict[tuple[str, str], Convention | str]] = {
        **{key: parser for key, parser in PARSERS.items() if key[0] in _V1_MODELS},
        ("anthropic-claude", "object-detection"): _GEMINI,
    }


def as_detections(boxes: list[Box]) -> sv.Detections:
    """Boxes read from an answer, as detections (none: empty)."""
    if not boxes:
        return sv.Detections.empty()
    return sv.Detections(
        xyxy=np.array([b.xyxy for b in boxes], np.float32),
        confidence=np.array([b.confidence for b in boxes], np.float32),
        class_id=np.array([b.class_id for b in boxes], int),
        data={"class_name": np.array([b.class_name for b in boxes])},
    )


def _florence(
    task: str, payload: Any, width: int, height: int, classes: list[str]
) -> sv.Detections:
    """Florence-2's answer for ``task`` (its own JSON: ``bboxes`` and ``labels``), with the
    class ids the reference gives each task."""
    found = sv.Detections.from_vlm(
        sv.VLM.FLORENCE_2, {task: payload}, resolution_wh=(width, height)
    )
    names = list(found.data.get("class_name", ["unknown"] * len(found)))
    if task == "<REGION_PROPOSAL>":
        names = ["roi"] * len(found)
        found.data["class_name"] = np.array(names)
    if task in ("<OD>", "<CAPTION_TO_PHRASE_GROUNDING>"):
        ids = [_md5_id(n) for n in names]
    elif task == "<OPEN_VOCABULARY_DETECTION>":
        index = {n: i for i, n in enumerate(classes)}
        ids = [index.get(n, -1) for n in names]
    else:
        ids = [0] * len(found)
    found.class_id = np.array(ids, int)
    found.confidence = np.ones(len(found), np.float32)
    return found


def _md5_id(name: str) -> int:
    """The reference's stable id for a class Florence-2 names (4 digits of its MD5)."""
    return int(hashlib.md5(name.encode()).hexdigest()[:9], 16) % 10000
