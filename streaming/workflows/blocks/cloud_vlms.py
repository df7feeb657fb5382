"""The reference's cloud VLM blocks, every version: ``open_ai`` (v2-v7), ``anthropic_claude``
(v1-v5), ``google_gemini`` (v1-v6), ``llama_3_2_vision`` / ``llama_vision``, ``openrouter``
(v1-v3) and the model makers' blocks on OpenRouter (``google_gemma`` v1-v4,
``kimi_openrouter`` v1-v3, ``qwen3_5_openrouter``, ``qwen3_6_openrouter``), with their task
types (``language.tasks``), fields and defaults.

Each asks the provider configured under its cloud's name (``VISIONSTREAM_VLM_PROVIDERS``:
``openai``, ``anthropic``, ``gemini``, ``openrouter``), which may be any server of that API
(a local Ollama playing ``openai``); else the cloud itself with the step's own key. A
Roboflow proxy key (``rf_key:account``, the newer versions' default) is refused by name:
this server proxies nothing. The newest versions (``open_ai@v7``, ``anthropic_claude@v5``,
``google_gemini@v6``, ``openrouter@v3``) also read the answer into ``predictions`` as the
reference does, and the versions that say what an answer cost have ``input_tokens`` and
``output_tokens``. Every version adds ``error_message`` (why there is no answer, "" when there
is) and ``answer_age_s`` (how old the answer a live stream's frame carries is).

The versions are declared in one table (``VERSIONS``); the classes are made from it."""

from __future__ import annotations

import uuid
from dataclasses import make_dataclass
from typing import Any, ClassVar

import cv2

from ...errors import WorkflowCompilationError
from ...language import Prompt, decoding
from ...language.tasks import question, requirement
from .base import BlockSettings, BuildContext, FrameState, WorkflowImage, setting
from .detection import stamped
from .email import jpeg
from .fields import ANY, CLASSIFICATION, DETECTIONS, IMAGE, SECRET, FieldSpec, Takes
from .language import LANGUAGE_MODEL_OUTPUT, AskingBlock
from .vlm_formatters import as_detections
from .vlm_versions import VERSIONS, Version, literal

__all__ = ["VERSIONS", "CloudVlmBlock"]

DEFAULT_MAX_TOKENS = 1024
"""What a step whose ``max_tokens`` is unset asks for (Anthropic's API needs a number)."""


def _frame(default: Any = None, *kinds: str, **bounds: Any) -> FieldSpec:
    return FieldSpec(kinds or (ANY,), default=default, takes=Takes.FRAME_OR_LITERAL, **bounds)


class CloudVlmBlock(AskingBlock):
    """A cloud VLM block (one ``Version``): each image, with its task's question, to the
    cloud's provider; the answer as ``output``, the step's ``classes`` passed on."""

    version: ClassVar[Version]

    def __init__(self, name: str, config: BlockSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._task: str = config.task_type  # type: ignore[attr-defined]
        self._structure: dict[str, str] | None = config.output_structure  # type: ignore[attr-defined]
        tokens = config.max_tokens  # type: ignore[attr-defined]
        self._max_tokens = int(tokens) if tokens is not None else DEFAULT_MAX_TOKENS

    @classmethod
    def check_given(cls, name: str, given: dict[str, Any]) -> None:
        task = given.get("task_type", "unconstrained")
        if isinstance(task, str) and (problem := requirement(task, given)) is not None:
            raise WorkflowCompilationError(f"step '{name}': {problem}")

    @classmethod
    def outputs_of(cls, given: dict[str, Any]) -> dict[str, str]:
        if not cls.version.decodes:
            return cls.outputs
        task = given.get("task_type", "unconstrained")
        kind = DETECTIONS if task == "object-detection" else CLASSIFICATION
        return {**cls.outputs, "predictions": kind}

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return self.run_batch([inputs], frame)[0]

    def run_batch(self, batch: list[dict[str, Any]], frame: FrameState) -> list[dict[str, Any]]:
        return [self._one(i, inputs) for i, inputs in enumerate(batch)]

    def _one(self, element: int, inputs: dict[str, Any]) -> dict[str, Any]:
        version = self.version
        image, classes = inputs["images"], inputs.get("classes")
        key = inputs.get(version.key[0]) if version.key else None
        client = self.providers.cloud(version.cloud, self.name, key)  # unusable: a 400
        asked = question(
            self._task,
            prompt=inputs.get("prompt"),
            classes=[str(c) for c in classes] if isinstance(classes, list) else None,
            output_structure=self._structure,
        )
        model = str(inputs.get(version.model[0]) or "")
        held = self.ask(
            element,
            client,
            lambda: Prompt(
                asked.text,
                (self._upload(image, inputs),),
                system=asked.system,
                max_tokens=self._max_tokens,
                temperature=inputs.get("temperature"),
                model=client.spec.model or (version.models or {}).get(model, model),
                api_key=None if client.spec.api_key else key,
            ),
        )
        outputs: dict[str, Any] = {
            "output": held.text or "",
            "classes": classes,
            "error_message": held.error or "",
            "answer_age_s": held.age(),
        }
        if version.thinking:
            outputs["thinking"] = None
        if version.tokens:
            usage = held.usage
            outputs["input_tokens"] = usage.input_tokens if usage else None
            outputs["output_tokens"] = usage.output_tokens if usage else None
        if version.decodes:
            outputs |= self._decoded(held.text, image, classes)
        return outputs

    def _upload(self, image: WorkflowImage, inputs: dict[str, Any]) -> bytes:
        """The image as sent: Claude's steps shrink it to ``max_image_size`` first."""
        edge = inputs.get(self.version.shrinks_to) if self.version.shrinks_to else None
        pixels = image.numpy
        if isinstance(edge, int) and edge > 0 and max(pixels.shape[:2]) > edge:
            scale = edge / max(pixels.shape[:2])
            size = (max(round(pixels.shape[1] * scale), 1), max(round(pixels.shape[0] * scale), 1))
            return jpeg(WorkflowImage(cv2.resize(pixels, size, interpolation=cv2.INTER_AREA), ""))
        return jpeg(image)

    def _decoded(self, text: str | None, image: WorkflowImage, classes: Any) -> dict[str, Any]:
        inference_id = str(uuid.uuid4())
        names = [str(c) for c in classes] if isinstance(classes, list) else []
        predictions = None
        if text is not None and self._task in ("classification", "multi-label-classification"):
            height, width = image.numpy.shape[:2]
            predictions = decoding.classification(
                text,
                width=width,
                height=height,
                parent_id=image.parent_id,
                classes=names,
                inference_id=inference_id,
            )
        elif text is not None and self._task == "object-detection":
            predictions = _detections(text, image, names, self.version.cloud)
        else:
            return {"predictions": None, "error_status": text is None, "inference_id": inference_id}
        return {
            "predictions": predictions,
            "error_status": predictions is None,
            "inference_id": inference_id,
        }


def _detections(text: str, image: WorkflowImage, classes: list[str], cloud: str) -> Any:
    """Boxes as asked for (fractions), or in the cloud's own convention where the model
    answered in it (Gemini's [y, x, y, x] on 0-1000; pixels elsewhere); None: unreadable."""
    error, payload = decoding.extract_json(text)
    if error:
        return None
    own = decoding.yxyx_1000 if cloud == "gemini" else decoding.CONVENTIONS["absolute"]
    height, width = image.numpy.shape[:2]
    try:
        boxes = decoding.read_boxes(
            payload,
            lambda e, w, h: (own if "box_2d" in e else decoding.normalized)(e, w, h),
            width,
            height,
            classes,
            skip_malformed=False,
        )
    except (KeyError, TypeError, ValueError):
        return None
    return stamped(image, as_detections(boxes))


def _declare(name: str, version: Version) -> type[CloudVlmBlock]:
    """The block class of one version: its fields (per frame, and its Settings) and
    outputs, as the reference's manifest declares them."""
    model_field, model_default = version.model
    inputs: dict[str, FieldSpec] = {
        "images": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "prompt": _frame(None, "string", ANY),
        "classes": _frame(None, "list_of_values", ANY),
        model_field: _frame(model_default, "string", ANY),
        "temperature": _frame(
            version.temperature, "float", ANY, minimum=0.0, maximum=version.temperature_max
        ),
        **{extra: _frame(None) for extra in version.frame_extras},
    }
    if version.key is not None:
        inputs[version.key[0]] = _frame(version.key[1], ANY, SECRET)
    if version.shrinks_to is not None:
        inputs[version.shrinks_to] = _frame(1024, "integer", ANY, minimum=1)
    fields = [
        ("task_type", str, setting(FieldSpec(default="unconstrained", choices=version.tasks))),
        ("output_structure", Any, setting(literal(None, type="object", nullable=True))),
        ("max_tokens", Any, setting(version.max_tokens)),
        (
            "max_concurrent_requests",
            Any,
            setting(literal(None, type="integer", minimum=1, nullable=True)),
        ),
        *((extra, Any, setting(spec)) for extra, spec in version.literal_extras),
    ]
    settings = make_dataclass(
        f"{name}Settings", fields, bases=(BlockSettings,), frozen=True, kw_only=True
    )
    outputs = {
        "output": LANGUAGE_MODEL_OUTPUT,
        "classes": "list_of_values",
        "error_message": "string",
        "answer_age_s": "float",
    }
    if version.thinking:
        outputs["thinking"] = "string"
    if version.tokens:
        outputs |= {"input_tokens": "integer", "output_tokens": "integer"}
    if version.decodes:
        outputs |= {
            "predictions": CLASSIFICATION,
            "error_status": "boolean",
            "inference_id": "string",
        }
    return type(
        f"{name}Block",
        (CloudVlmBlock,),
        {
            "__doc__": f"{', '.join(version.type_ids)}: asks {version.cloud}.",
            "__module__": __name__,
            "type_ids": version.type_ids,
            "version": version,
            "inputs": inputs,
            "Settings": settings,
            "outputs": outputs,
        },
    )


for _name, _version in VERSIONS.items():
    _made = _declare(_name, _version)
    globals()[_made.__name__] = _made
    __all__.append(_made.__name__)
