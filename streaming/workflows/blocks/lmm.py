"""The reference's first VLM blocks, from before task types: ``open_ai@v1`` ("OpenAI"),
``lmm@v1`` ("LMM") and ``lmm_for_classification@v1`` ("LMMForClassification"). Each sends
its prompt with each image to OpenAI's provider (``VISIONSTREAM_VLM_PROVIDERS``' ``openai``,
else OpenAI with the step's key) and answers ``raw_output``; where the step names a JSON
output format, each named field is read out of the answer (``not_detected`` where it is
absent or the answer no JSON; one object per fenced JSON block) into ``structured_output``
and an output of its own. ``error_message`` and ``answer_age_s`` are ours, as on every VLM
block. The reference's CogVLM (any ``lmm_type`` but ``gpt_4v``) is gone there too: refused."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import WorkflowCompilationError
from ...language import Prompt
from .base import BlockSettings, BuildContext, FrameState, WorkflowImage, setting
from .email import jpeg
from .fields import ANY, IMAGE, REQUIRED, SECRET, FieldSpec, Takes
from .language import LANGUAGE_MODEL_OUTPUT, AskingBlock

__all__ = ["LmmBlock", "LmmClassifierBlock", "OpenAIV1Block", "structured"]

NOT_DETECTED = "not_detected"
_FENCED = re.compile(r"```json\n([\s\S]*?)\n```")
_GPT_4V = "gpt_4v"
_LMM_CONFIG = {"max_tokens": 450, "gpt_image_detail": "auto", "gpt_model_version": "gpt-4o"}
_CLASSIFY = (
    "You are supposed to perform image classification task. You are given image that should be "
    "assigned one of the following classes: {classes}. "
    'Your response must be JSON in format: {{"top": "some_class"}}'
)


def structured(text: str, expected: dict[str, str]) -> dict[str, Any] | list[dict[str, Any]]:
    """The ``expected`` fields of an answer, as the reference reads them."""
    blocks = _FENCED.findall(text)
    if not blocks:
        return _fields(text, expected)
    found = [_fields(block, expected) for block in blocks]
    return found if len(found) > 1 else found[0]


def _fields(content: str, expected: dict[str, str]) -> dict[str, Any]:
    try:
        data = json.loads(content)
        return {key: data.get(key, NOT_DETECTED) for key in expected}
    except (ValueError, AttributeError, TypeError):
        return {key: NOT_DETECTED for key in expected}


def _frame(default: Any = None, *kinds: str, **bounds: Any) -> FieldSpec:
    return FieldSpec(kinds or (ANY,), default=default, takes=Takes.FRAME_OR_LITERAL, **bounds)


class _FirstLmm(AskingBlock):
    """What the three share: the question asked of OpenAI's provider, per image."""

    outputs = {
        "parent_id": "string",
        "root_parent_id": "string",
        "image": "image_metadata",
        "raw_output": LANGUAGE_MODEL_OUTPUT,
        "error_message": "string",
        "answer_age_s": "float",
    }

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return self.run_batch([inputs], frame)[0]

    def run_batch(self, batch: list[dict[str, Any]], frame: FrameState) -> list[dict[str, Any]]:
        return [self._one(i, inputs) for i, inputs in enumerate(batch)]

    def _one(self, element: int, inputs: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def answered(
        self, element: int, image: WorkflowImage, text: str, key: Any, model: str, tokens: int
    ) -> dict[str, Any]:
        client = self.providers.cloud("openai", self.name, key if isinstance(key, str) else None)
        held = self.ask(
            element,
            client,
            lambda: Prompt(
                text,
                (jpeg(image),),
                max_tokens=tokens,
                model=client.spec.model or model,
                api_key=None if client.spec.api_key else key,
            ),
        )
        height, width = image.numpy.shape[:2]
        return {
            "parent_id": image.parent_id,
            "root_parent_id": image.root_id or image.parent_id,
            "image": {"width": width, "height": height},
            "raw_output": held.text,
            "error_message": held.error or "",
            "answer_age_s": held.age(),
        }


def _with_format(prompt: str, expected: dict[str, str] | None) -> str:
    if not expected:
        return prompt
    return f"{prompt}\n\nVALID response format is JSON:\n{json.dumps(expected, indent=4)}"


def _read(outputs: dict[str, Any], expected: dict[str, str] | None) -> dict[str, Any]:
    text = outputs["raw_output"]
    if not expected:
        found: dict[str, Any] | list[dict[str, Any]] = {}
    elif text is None:
        found = {key: NOT_DETECTED for key in expected}
    else:
        found = structured(text, expected)
    spread = found if isinstance(found, dict) else {}
    return {**outputs, "structured_output": found, **spread}


def _named_outputs(cls: type[AskingBlock], given: dict[str, Any], field: str) -> dict[str, str]:
    expected = given.get(field)
    keys = expected if isinstance(expected, dict) else {}
    return {**cls.outputs, **{str(key): ANY for key in keys}}


@dataclass(frozen=True, kw_only=True)
class OpenAIV1Settings(BlockSettings):
    json_output_format: dict[str, str] | None = setting(
        FieldSpec(default=None, type="object", nullable=True)
    )
    max_tokens: int = setting(FieldSpec(default=450, type="integer", minimum=1))


class OpenAIV1Block(_FirstLmm):
    """``open_ai@v1``: ``prompt`` to ``openai_model`` with the step's ``openai_api_key``."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/open_ai@v1", "OpenAI")
    inputs = {
        "images": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "prompt": _frame(REQUIRED, "string", ANY),
        "openai_api_key": _frame(REQUIRED, ANY, SECRET),
        "openai_model": _frame("gpt-4o", "string", ANY),
        "image_detail": _frame("auto", "string", ANY),
    }
    Settings: ClassVar[type[BlockSettings]] = OpenAIV1Settings
    outputs = {**_FirstLmm.outputs, "structured_output": "dictionary"}

    def __init__(self, name: str, config: OpenAIV1Settings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._config = config

    @classmethod
    def outputs_of(cls, given: dict[str, Any]) -> dict[str, str]:
        return _named_outputs(cls, given, "json_output_format")

    def _one(self, element: int, inputs: dict[str, Any]) -> dict[str, Any]:
        expected = self._config.json_output_format
        text = _with_format(str(inputs.get("prompt") or ""), expected)
        model = str(inputs.get("openai_model") or "gpt-4o")
        outputs = self.answered(
            element,
            inputs["images"],
            text,
            inputs.get("openai_api_key"),
            model,
            self._config.max_tokens,
        )
        return _read(outputs, expected)


@dataclass(frozen=True, kw_only=True)
class LmmSettings(BlockSettings):
    lmm_config: dict[str, Any] = setting(FieldSpec(default=_LMM_CONFIG, type="object"))
    json_output: dict[str, str] | None = setting(
        FieldSpec(default=None, type="object", nullable=True)
    )


class LmmBlock(_FirstLmm):
    """``lmm@v1``: ``prompt`` to ``lmm_config.gpt_model_version`` (``lmm_type`` ``gpt_4v``)."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/lmm@v1", "LMM")
    inputs = {
        "images": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "prompt": _frame(REQUIRED, "string", ANY),
        "lmm_type": _frame(REQUIRED, "string", ANY),
        "remote_api_key": _frame(None, ANY, SECRET),
    }
    Settings: ClassVar[type[BlockSettings]] = LmmSettings
    outputs = {**_FirstLmm.outputs, "structured_output": "dictionary"}
    expected_field = "json_output"

    def __init__(self, name: str, config: LmmSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._lmm = {**_LMM_CONFIG, **(config.lmm_config or {})}
        self._expected = getattr(config, self.expected_field, None)

    @classmethod
    def check_given(cls, name: str, given: dict[str, Any]) -> None:
        kind = given.get("lmm_type")
        if isinstance(kind, str) and not kind.startswith("$") and kind != _GPT_4V:
            raise WorkflowCompilationError(
                f"step '{name}': lmm_type {kind!r} is not served (CogVLM is gone from the "
                f"reference too): use '{_GPT_4V}'"
            )

    @classmethod
    def outputs_of(cls, given: dict[str, Any]) -> dict[str, str]:
        return _named_outputs(cls, given, "json_output")

    def question(self, inputs: dict[str, Any]) -> str:
        return _with_format(str(inputs.get("prompt") or ""), self._expected)

    def _one(self, element: int, inputs: dict[str, Any]) -> dict[str, Any]:
        if inputs.get("lmm_type") != _GPT_4V:
            raise ValueError(f"lmm_type {inputs.get('lmm_type')!r} is not served: use 'gpt_4v'")
        outputs = self.answered(
            element,
            inputs["images"],
            self.question(inputs),
            inputs.get("remote_api_key"),
            str(self._lmm.get("gpt_model_version") or "gpt-4o"),
            int(self._lmm.get("max_tokens") or 450),
        )
        return self.read(outputs)

    def read(self, outputs: dict[str, Any]) -> dict[str, Any]:
        return _read(outputs, self._expected)


@dataclass(frozen=True, kw_only=True)
class LmmClassifierSettings(BlockSettings):
    lmm_config: dict[str, Any] = setting(FieldSpec(default=_LMM_CONFIG, type="object"))


class LmmClassifierBlock(LmmBlock):
    """``lmm_for_classification@v1``: which of ``classes`` the image is, as ``top``."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/lmm_for_classification@v1",
        "LMMForClassification",
    )
    inputs = {
        "images": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "lmm_type": _frame(REQUIRED, "string", ANY),
        "classes": _frame(REQUIRED, "list_of_values", ANY),
        "remote_api_key": _frame(None, ANY, SECRET),
    }
    Settings: ClassVar[type[BlockSettings]] = LmmClassifierSettings
    outputs = {**_FirstLmm.outputs, "top": "top_class", "prediction_type": "prediction_type"}
    expected_field = "top_only"

    @classmethod
    def outputs_of(cls, given: dict[str, Any]) -> dict[str, str]:
        return cls.outputs

    def question(self, inputs: dict[str, Any]) -> str:
        classes = inputs.get("classes")
        return _CLASSIFY.format(classes=list(classes) if isinstance(classes, list) else classes)

    def read(self, outputs: dict[str, Any]) -> dict[str, Any]:
        text = outputs["raw_output"]
        found = structured(text, {"top": ""}) if text is not None else {"top": NOT_DETECTED}
        top = found["top"] if isinstance(found, dict) else found[0]["top"]
        return {**outputs, "top": top, "prediction_type": "classification"}
