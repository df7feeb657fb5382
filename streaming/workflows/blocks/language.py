"""Steps that ask a vision-language model (``streaming.language``): what they share (the
server's providers, asking on the caller's thread in a run or in the background in a live
stream), and ``roboflow_core/openai_compatible@v1``.

In a live stream (``BuildContext.live``) a step never makes a frame wait: it sends a
question when none of its own is in flight (at most every ``VISIONSTREAM_VLM_LIVE_MIN_INTERVAL_S``)
and each frame carries its last answer, with ``answer_age_s``; in an HTTP run each image
waits for its own answer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import WorkflowCompilationError
from ...language import Answer, Prompt, ProviderError, Providers
from ...language.client import ProviderClient
from ...language.holding import Held, Holder, asked
from .base import Block, BlockSettings, BuildContext, FrameState, WorkflowImage, setting
from .email import MessageTemplate, jpeg
from .fields import ANY, SECRET, FieldSpec, Takes

__all__ = ["LANGUAGE_MODEL_OUTPUT", "AskingBlock", "OpenAICompatibleBlock", "image_parts"]

LANGUAGE_MODEL_OUTPUT = "language_model_output"


class AskingBlock(Block):
    """A step that asks a model: ``ask`` gives the answer (or why there is none), waited
    for in a run, held in a live stream."""

    def __init__(self, name: str, config: BlockSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._owned: Providers | None = None
        providers = context.language
        if providers is None:
            if context.settings is None:
                raise WorkflowCompilationError(
                    f"step '{name}' asks a vision-language model: this workflow runs without "
                    "the server's settings, which name the providers"
                )
            providers = self._owned = Providers(context.settings.vlm, pin=context.pin)
        self.providers = providers
        self._holder: Holder | None = None
        if context.live:
            self._holder = Holder(providers.executor, providers.settings.live_min_interval_s)

    def ask(self, element: int, client: ProviderClient, prompt: Callable[[], Prompt]) -> Held:
        """``client``'s answer to the prompt ``prompt`` makes: now, or in a live stream the
        last one held (the prompt, and its image's encoding, made only when one is sent)."""

        def prepared() -> Callable[[], Answer]:
            made = prompt()
            return lambda: client.describe(made)

        if self._holder is None:
            return asked(prepared())
        return self._holder.answer(element, prepared)

    def close(self) -> None:
        if self._holder is not None:
            self._holder.close()
        if self._owned is not None:
            self._owned.close()


def image_parts(values: dict[str, Any]) -> tuple[dict[str, Any], list[WorkflowImage | bytes]]:
    """A step's parameters split: images (a ``WorkflowImage``, JPEG bytes, or a list of
    either) become image parts, in order (``encoded`` when sent); everything else stays a
    text parameter."""
    texts: dict[str, Any] = {}
    images: list[WorkflowImage | bytes] = []
    for name, value in values.items():
        items = value if isinstance(value, list) else [value]
        found = [i for i in items if isinstance(i, WorkflowImage | bytes)]
        if not found:
            texts[name] = value
            continue
        images += found
    return texts, images


def encoded(images: list[WorkflowImage | bytes]) -> tuple[bytes, ...]:
    return tuple(jpeg(i) if isinstance(i, WorkflowImage) else i for i in images)


@dataclass(frozen=True, kw_only=True)
class OpenAICompatibleSettings(BlockSettings):
    prompt_parameters: dict[str, Any] = setting(FieldSpec(default={}, takes=Takes.ENTRIES))
    prompt_parameters_operations: dict[str, Any] = setting(FieldSpec(default={}, type="object"))
    max_tokens: int = setting(FieldSpec(default=500, type="integer", above=1))
    extra_body: dict[str, Any] | None = setting(FieldSpec(default=None, type="object"))


class OpenAICompatibleBlock(AskingBlock):
    """``prompt`` (``{{ $parameters.name }}`` replaced by ``prompt_parameters``, images among
    them sent as image parts) to ``model_name`` at ``base_url``: any OpenAI-compatible
    server (Ollama, llama.cpp, vLLM, LM Studio). ``base_url`` passes the egress policy when
    compiled (a literal or a parameter) and on every connection. ``output`` is the answer,
    ``error_status`` why there is none ("" when there is)."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/openai_compatible@v1",)
    inputs = {
        "base_url": FieldSpec(("string", ANY), takes=Takes.FRAME_OR_LITERAL),
        "model_name": FieldSpec(("string", ANY), takes=Takes.FRAME_OR_LITERAL),
        "api_key": FieldSpec((ANY, SECRET), default=None, takes=Takes.FRAME_OR_LITERAL),
        "system_prompt": FieldSpec(("string", ANY), default=None, takes=Takes.FRAME_OR_LITERAL),
        "prompt": FieldSpec(("string", ANY), takes=Takes.FRAME_OR_LITERAL),
        "temperature": FieldSpec(
            ("float", ANY), default=None, takes=Takes.FRAME_OR_LITERAL, minimum=0.0, maximum=2.0
        ),
    }
    Settings: ClassVar[type[BlockSettings]] = OpenAICompatibleSettings
    url_fields: ClassVar[tuple[str, ...]] = ("base_url",)
    outputs = {"output": LANGUAGE_MODEL_OUTPUT, "error_status": "string", "answer_age_s": "float"}

    def __init__(self, name: str, config: OpenAICompatibleSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._config = config
        self._template = MessageTemplate(name, config, field="prompt")

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return self.run_batch([inputs], frame)[0]

    def run_batch(self, batch: list[dict[str, Any]], frame: FrameState) -> list[dict[str, Any]]:
        return [self._one(i, inputs, frame) for i, inputs in enumerate(batch)]

    def _one(self, element: int, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        texts, images = image_parts(self._template.parameters(inputs, frame))
        # An image named in the prompt travels as an image part only: its placeholder goes.
        shown = {
            **texts,
            **{n: "" for n in inputs.get("prompt_parameters") or {} if n not in texts},
        }
        text = self._template.text(shown, str(inputs.get("prompt") or "")).strip()
        try:
            client = self.providers.at(str(inputs.get("base_url") or ""))
        except (ValueError, ProviderError) as exc:  # a base URL of the wrong shape
            return {"output": "", "error_status": _first_line(exc), "answer_age_s": None}
        held = self.ask(
            element,
            client,
            lambda: Prompt(
                text=text,
                images=encoded(images),
                system=inputs.get("system_prompt") or None,
                max_tokens=self._config.max_tokens,
                temperature=inputs.get("temperature"),
                model=str(inputs.get("model_name") or ""),
                extra=self._config.extra_body,
                api_key=inputs.get("api_key") or None,
            ),
        )
        return {
            "output": held.text or "",
            "error_status": held.error or "",
            "answer_age_s": held.age(),
        }


def _first_line(exc: Exception) -> str:
    """An error as one line (pydantic's are several)."""
    return " ".join(str(exc).split())
