"""The reference's blocks that run a vision-language model on its own GPU: Qwen-VL
(``qwen25vl``, ``qwen3vl``, ``qwen3_5vl``), SmolVLM (``smolvlm2``), Moondream
(``moondream2``), Florence-2 (``florence_2``), Cosmos 3 (``cosmos3_edge``) and GLM-OCR
(``glm_ocr``). Here each model family runs on a provider
the operator maps it to (``VISIONSTREAM_VLM_FAMILIES``: Ollama and llama.cpp serve these
families), with the reference's outputs; a family left unmapped is a 400 naming the setting
when the workflow is compiled. The step's ``model_version`` names a Roboflow weight; the
mapping's model (else the provider's) is what answers here.

Florence-2's box tasks are asked as our detection question (fractions of the image) and
answered in Florence-2's own shape (``{"bboxes": [...], "labels": [...]}`` in pixels), so
``vlm_as_detector`` with ``model_type: florence-2`` reads them as it reads the reference's."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

import supervision as sv

from ...errors import WorkflowCompilationError
from ...language import Prompt, decoding
from ...language.holding import Held
from ...language.tasks import question
from .base import BlockSettings, BuildContext, FrameState, WorkflowImage, setting
from .detection import stamped
from .email import jpeg
from .fields import ANY, DETECTIONS, IMAGE, FieldSpec, Takes
from .language import LANGUAGE_MODEL_OUTPUT, AskingBlock
from .vlm_formatters import as_detections

__all__ = [
    "CosmosBlock",
    "FlorenceBlock",
    "GlmOcrBlock",
    "LocalAnswerBlock",
    "MoondreamBlock",
    "QwenBlock",
    "SmolVlmBlock",
]


def _frame(default: Any = None) -> FieldSpec:
    return FieldSpec(("string", ANY), default=default, takes=Takes.FRAME_OR_LITERAL)


def _answering(output: str) -> dict[str, str]:
    """The outputs of a step whose answer is text (``output``)."""
    return {output: LANGUAGE_MODEL_OUTPUT, "error_message": "string", "answer_age_s": "float"}


def _said(output: str, held: Held) -> dict[str, Any]:
    return {output: held.text or "", "error_message": held.error or "", "answer_age_s": held.age()}


class FamilyBlock(AskingBlock):
    """A step of a model family: its provider found when compiled."""

    family: ClassVar[str]

    def __init__(self, name: str, config: BlockSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        target = self.providers.family(self.family, name)
        self.client, self.model = target.client, target.model

    def answer(self, element: int, image: WorkflowImage, text: str, **prompt: Any) -> Any:
        return self.ask(
            element, self.client, lambda: Prompt(text, (jpeg(image),), model=self.model, **prompt)
        )

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return self.run_batch([inputs], frame)[0]

    def run_batch(self, batch: list[dict[str, Any]], frame: FrameState) -> list[dict[str, Any]]:
        return [self.one(i, inputs) for i, inputs in enumerate(batch)]

    def one(self, element: int, inputs: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class LocalAnswerSettings(BlockSettings):
    max_new_tokens: int | None = setting(
        FieldSpec(default=None, type="integer", minimum=1, nullable=True)
    )
    enable_thinking: bool = setting(FieldSpec(default=False, type="boolean"))


class LocalAnswerBlock(FamilyBlock):
    """A prompt (default "Describe what's in this image.") and an optional system prompt
    about each image; the answer as ``parsed_output``."""

    inputs = {
        "images": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "prompt": _frame(),
        "system_prompt": _frame(),
        "model_version": _frame("family default"),
    }
    Settings: ClassVar[type[BlockSettings]] = LocalAnswerSettings
    outputs = _answering("parsed_output")

    def __init__(self, name: str, config: LocalAnswerSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._tokens = config.max_new_tokens or 1024

    def one(self, element: int, inputs: dict[str, Any]) -> dict[str, Any]:
        held = self.answer(
            element,
            inputs["images"],
            inputs.get("prompt") or "Describe what's in this image.",
            system=inputs.get("system_prompt") or None,
            max_tokens=self._tokens,
        )
        return _said("parsed_output", held)


class QwenBlock(LocalAnswerBlock):
    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/qwen25vl@v1",
        "roboflow_core/qwen3vl@v1",
        "roboflow_core/qwen3_5vl@v1",
        "roboflow_core/qwen3_5vl@v2",
    )
    family = "qwen-vl"
    outputs = {**LocalAnswerBlock.outputs, "thinking": "string"}

    def one(self, element: int, inputs: dict[str, Any]) -> dict[str, Any]:
        return {**super().one(element, inputs), "thinking": ""}


class SmolVlmBlock(LocalAnswerBlock):
    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/smolvlm2@v1",)
    family = "smolvlm"


class MoondreamBlock(FamilyBlock):
    """Moondream's detection: every instance of what ``prompt`` names, as detections."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/moondream2@v1",)
    family = "moondream"
    inputs = {
        "images": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "prompt": _frame(),
        "model_version": _frame("moondream2/moondream2_2b_jul24"),
    }
    outputs = {"predictions": DETECTIONS, "error_message": "string", "answer_age_s": "float"}

    def one(self, element: int, inputs: dict[str, Any]) -> dict[str, Any]:
        image, target = inputs["images"], str(inputs.get("prompt") or "object")
        asked = question("object-detection", prompt=None, classes=[target], output_structure=None)
        held = self.answer(element, image, asked.text, system=asked.system)
        boxes = _boxes(held.text, image, [target]) if held.text else None
        return {
            "predictions": stamped(image, boxes if boxes is not None else sv.Detections.empty()),
            "error_message": held.error
            or ("" if boxes is not None else "the answer held no boxes"),
            "answer_age_s": held.age(),
        }


FLORENCE_TASKS = {
    "ocr": "<OCR>",
    "caption": "<CAPTION>",
    "detailed-caption": "<DETAILED_CAPTION>",
    "more-detailed-caption": "<MORE_DETAILED_CAPTION>",
    "object-detection": "<OD>",
    "open-vocabulary-object-detection": "<OPEN_VOCABULARY_DETECTION>",
    "phrase-grounded-object-detection": "<CAPTION_TO_PHRASE_GROUNDING>",
    "object-detection-and-caption": "<DENSE_REGION_CAPTION>",
    "region-proposal": "<REGION_PROPOSAL>",
    "custom": "",
}
"""The Florence-2 tasks run here, and each one's task token. Segmentation and the
box-grounded tasks are not: a model behind a chat API answers boxes, not polygons."""

_TEXT_QUESTIONS = {
    "ocr": "ocr",
    "caption": "caption",
    "detailed-caption": "detailed-caption",
    "more-detailed-caption": "detailed-caption",
}
_UNPROMPTED = "the prominent objects in the image, each named"
_LABELS_AS_CLASSES = (
    "object-detection",
    "object-detection-and-caption",
    "phrase-grounded-object-detection",
)
"""Tasks whose ``classes`` output is what the model named (the reference's)."""


@dataclass(frozen=True, kw_only=True)
class FlorenceSettings(BlockSettings):
    task_type: str = setting(
        FieldSpec(default="open-vocabulary-object-detection", choices=tuple(FLORENCE_TASKS))
    )
    grounding_selection_mode: str = setting(FieldSpec(default="first"))


class FlorenceBlock(FamilyBlock):
    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/florence_2@v1",
        "roboflow_core/florence_2@v2",
    )
    family = "florence-2"
    inputs = {
        "images": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "prompt": _frame(),
        "classes": FieldSpec(("list_of_values", ANY), default=None, takes=Takes.FRAME_OR_LITERAL),
        "grounding_detection": FieldSpec(default=None, takes=Takes.FRAME_OR_LITERAL),
        "model_version": _frame("florence-2-base"),
    }
    Settings: ClassVar[type[BlockSettings]] = FlorenceSettings
    outputs = {
        "raw_output": LANGUAGE_MODEL_OUTPUT,
        "parsed_output": "dictionary",
        "classes": "list_of_values",
        "error_message": "string",
        "answer_age_s": "float",
    }

    def __init__(self, name: str, config: FlorenceSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._task = config.task_type

    @classmethod
    def check_given(cls, name: str, given: dict[str, Any]) -> None:
        task = given.get("task_type", "open-vocabulary-object-detection")
        if task == "open-vocabulary-object-detection" and given.get("classes") is None:
            raise WorkflowCompilationError(
                f"step '{name}': `classes` parameter required to be set for task `{task}`"
            )
        if task == "phrase-grounded-object-detection" and given.get("prompt") is None:
            raise WorkflowCompilationError(
                f"step '{name}': `prompt` parameter required to be set for task `{task}`"
            )

    def one(self, element: int, inputs: dict[str, Any]) -> dict[str, Any]:
        image, classes = inputs["images"], inputs.get("classes")
        task = self._task
        if task == "custom" or task in _TEXT_QUESTIONS:
            asked = question(
                _TEXT_QUESTIONS.get(task, "unconstrained"),
                prompt=inputs.get("prompt") or "",
                classes=None,
                output_structure=None,
            )
            held = self.answer(element, image, asked.text, system=asked.system)
            data: Any = held.text
        else:
            wanted = _wanted(task, inputs)
            asked = question("object-detection", prompt=None, classes=wanted, output_structure=None)
            held = self.answer(element, image, asked.text, system=asked.system)
            found = _boxes(held.text, image, wanted) if held.text else None
            data = _florence_shape(task, found) if found is not None else None
            if isinstance(data, dict) and task in _LABELS_AS_CLASSES:
                classes = data.get("labels", [])
        return {
            "raw_output": json.dumps(data) if data is not None else None,
            "parsed_output": data if isinstance(data, dict) else None,
            "classes": classes,
            "error_message": held.error or ("" if data is not None else "the answer held no boxes"),
            "answer_age_s": held.age(),
        }


def _wanted(task: str, inputs: dict[str, Any]) -> list[str]:
    """What a box task asks for: the classes, the prompt's phrase, or what is prominent."""
    if task == "open-vocabulary-object-detection":
        return [str(c) for c in inputs.get("classes") or []]
    if task == "phrase-grounded-object-detection":
        return [str(inputs.get("prompt") or "")]
    if task == "region-proposal":
        return ["region of interest"]
    return [_UNPROMPTED]


def _florence_shape(task: str, found: sv.Detections) -> dict[str, Any]:
    """Detections as Florence-2's post-processor gives them for ``task``."""
    bboxes = found.xyxy.round(1).tolist()
    labels = [str(n) for n in found.data.get("class_name", [])]
    if task == "region-proposal":
        return {"bboxes": bboxes, "labels": [""] * len(bboxes)}
    if task == "open-vocabulary-object-detection":
        return {"bboxes": bboxes, "bboxes_labels": labels, "polygons": [], "polygons_labels": []}
    return {"bboxes": bboxes, "labels": labels}


def _boxes(text: str | None, image: WorkflowImage, classes: list[str]) -> sv.Detections | None:
    """An answer to our detection question as detections on ``image``; None: unreadable.
    A model that names what it sees rather than the class asked for keeps its own label."""
    error, payload = decoding.extract_json(text)
    if error:
        return None
    height, width = image.numpy.shape[:2]
    try:
        boxes = decoding.read_boxes(payload, decoding.normalized, width, height, classes)
    except (KeyError, TypeError, ValueError):
        return None
    return as_detections(boxes)


class CosmosBlock(FamilyBlock):
    """NVIDIA's Cosmos 3 Edge (``cosmos3_edge@v1``): a prompt (default "Describe what's in
    this image.") and an optional system prompt about each image; the answer as ``output``."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/cosmos3_edge@v1",)
    family = "cosmos"
    inputs = {
        "images": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "prompt": _frame(),
        "model_version": _frame("nvidia/cosmos-3-edge"),
        "system_prompt": _frame(),
    }
    outputs = _answering("output")

    def one(self, element: int, inputs: dict[str, Any]) -> dict[str, Any]:
        held = self.answer(
            element,
            inputs["images"],
            inputs.get("prompt") or "Describe what's in this image.",
            system=inputs.get("system_prompt") or None,
        )
        return _said("output", held)


GLM_OCR_TASKS = {
    "text-recognition": "Text Recognition:",
    "table-recognition": "Table Recognition:",
    "formula-recognition": "Formula Recognition:",
    "structured-answering": None,
    "custom": None,
}
"""GLM-OCR's tasks and each one's prompt, as the reference asks them."""
_GLM_STRUCTURED = (
    "You are supposed to produce responses in JSON wrapped in Markdown markers: "
    "```json\nyour-response\n```. Below is a dictionary with keys and values. "
    "Each key must be present in your response. Values represent descriptions "
    "for JSON fields to be generated. Provide only JSON Markdown in response.\n\n"
    "Specification of requirements regarding output fields:\n{output_structure}"
)


@dataclass(frozen=True, kw_only=True)
class GlmOcrSettings(BlockSettings):
    task_type: str = setting(FieldSpec(default="text-recognition", choices=tuple(GLM_OCR_TASKS)))
    output_structure: dict[str, str] | None = setting(
        FieldSpec(default=None, type="object", nullable=True)
    )
    max_new_tokens: int | None = setting(
        FieldSpec(default=None, type="integer", minimum=1, nullable=True)
    )


class GlmOcrBlock(FamilyBlock):
    """Zhipu's GLM-OCR (``glm_ocr@v1``): text, tables or formulas read, or values into the
    ``output_structure`` JSON (fenced, for ``json_parser``), or a custom ``prompt``; the
    answer as ``parsed_output``."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/glm_ocr@v1",)
    family = "glm-ocr"
    inputs = {
        "images": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "prompt": _frame(),
        "model_version": _frame("glm-ocr"),
    }
    Settings: ClassVar[type[BlockSettings]] = GlmOcrSettings
    outputs = _answering("parsed_output")

    def __init__(self, name: str, config: GlmOcrSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._config = config

    @classmethod
    def check_given(cls, name: str, given: dict[str, Any]) -> None:
        task = given.get("task_type", "text-recognition")
        if task == "structured-answering" and not given.get("output_structure"):
            raise WorkflowCompilationError(
                f"step '{name}': `output_structure` is required when task_type is '{task}'."
            )

    def one(self, element: int, inputs: dict[str, Any]) -> dict[str, Any]:
        config = self._config
        text = GLM_OCR_TASKS[config.task_type]
        if config.task_type == "structured-answering":
            text = _GLM_STRUCTURED.format(
                output_structure=json.dumps(config.output_structure, indent=4)
            )
        elif config.task_type == "custom":
            text = str(inputs.get("prompt") or "")
        if not text:  # a custom task's prompt, given per frame: none this frame
            return {
                "parsed_output": "",
                "error_message": "`prompt` is required when task_type is 'custom'.",
                "answer_age_s": None,
            }
        held = self.answer(
            element, inputs["images"], text, max_tokens=config.max_new_tokens or 1024
        )
        return _said("parsed_output", held)
