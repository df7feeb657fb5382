"""What the reference's model blocks share: the step's model from the local registry
(held until the workflow closes), its image input, and its confidence threshold."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from ...errors import WorkflowCompilationError
from ...inference.registry import UnknownModel
from ...suggest import did_you_mean, shown
from .base import Block, BlockSettings, BuildContext, ModelSource, WorkflowImage, setting
from .fields import IMAGE, FieldSpec, Takes, fraction

__all__ = [
    "DEFAULT_CONFIDENCE",
    "MODEL_FIELDS",
    "ChosenConfidence",
    "ChosenConfidenceByDefault",
    "DecodeSettings",
    "FixedConfidence",
    "KeypointSettings",
    "MaskSettings",
    "ModelBlock",
    "ModelSettings",
    "acquire_model",
    "threshold",
]


def acquire_model(
    name: str, model_id: str, context: BuildContext, tasks: tuple[str, ...], hint: str = ""
):
    """The step's model from the registry, of one of ``tasks``; a 400 naming it otherwise
    (with ``hint``: how to get it, when it is missing)."""
    if not isinstance(model_id, str) or not model_id:
        raise WorkflowCompilationError(f"step '{name}': model_id must be a non-empty string")
    try:
        model = context.models.acquire(model_id)
    except UnknownModel:
        available = context.models.available()
        close = did_you_mean(model_id, available)
        raise WorkflowCompilationError(
            f"step '{name}': unknown model_id '{shown(model_id)}'"
            + (f"; {close}" if close else "")
            + f" (available: {', '.join(available[:10]) or 'none'}){hint}"
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


MODEL_FIELDS = {
    "images": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),
    "image": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),  # v1 name
}


def confidence_mode_field(default: str) -> FieldSpec:
    """v3's ``confidence_mode``, with the reference block's default."""
    return FieldSpec(default=default, choices=("best", "default", "custom"))


@dataclass(frozen=True, kw_only=True)
class ModelSettings(BlockSettings):
    model_id: str = setting(FieldSpec(type="string", description="a model of the models directory"))


@dataclass(frozen=True, kw_only=True)
class DecodeSettings(ModelSettings):
    """What a detector's results keep (the reference blocks' defaults)."""

    iou_threshold: float = setting(fraction(0.3))
    class_filter: list[Any] | None = setting(FieldSpec(default=None, type="list"))
    max_detections: int = setting(FieldSpec(default=300, type="integer", minimum=1))
    class_agnostic_nms: bool = setting(FieldSpec(default=False, type="boolean"))
    max_candidates: int = setting(FieldSpec(default=3000, type="integer", minimum=1))


@dataclass(frozen=True, kw_only=True)
class MaskSettings(BlockSettings):
    # Accepted as the reference spells them; masks are always decoded fully here.
    mask_decode_mode: Literal["accurate", "tradeoff", "fast"] = setting(
        FieldSpec(default="accurate", choices=("accurate", "tradeoff", "fast"))
    )
    tradeoff_factor: float = setting(fraction(0.0))


@dataclass(frozen=True, kw_only=True)
class KeypointSettings(BlockSettings):
    keypoint_confidence: float = setting(fraction(0.0))


@dataclass(frozen=True, kw_only=True)
class FixedConfidence(BlockSettings):
    """v1 and v2 blocks: the threshold is ``confidence``."""

    confidence: float = setting(fraction(DEFAULT_CONFIDENCE))


@dataclass(frozen=True, kw_only=True)
class ChosenConfidence(BlockSettings):
    """v3 (v4 for segmentation) model blocks: ``confidence_mode`` instead of ``confidence``.
    ``custom`` takes ``custom_confidence``; ``best`` (the reference's per-class F1-optimal
    thresholds from its training platform's evaluation, which an ONNX export does not carry)
    and ``default`` take the model's default, 0.4."""

    confidence_mode: Literal["best", "default", "custom"] = setting(confidence_mode_field("best"))
    custom_confidence: float | None = setting(replace(fraction(DEFAULT_CONFIDENCE), nullable=True))


@dataclass(frozen=True, kw_only=True)
class ChosenConfidenceByDefault(ChosenConfidence):
    """The v3 blocks whose ``confidence_mode`` is ``default`` unless chosen (the reference's
    keypoint and single-label classification blocks)."""

    confidence_mode: Literal["best", "default", "custom"] = setting(
        confidence_mode_field("default")
    )


def threshold(config: BlockSettings, step: str) -> float:
    """The confidence threshold a model step chose."""
    if isinstance(config, FixedConfidence):
        return float(config.confidence)
    assert isinstance(config, ChosenConfidence)
    if config.confidence_mode != "custom":
        return DEFAULT_CONFIDENCE
    if config.custom_confidence is None:
        raise WorkflowCompilationError(
            f"step '{step}': custom_confidence is required when confidence_mode is custom"
        )
    return float(config.custom_confidence)


class ModelBlock(Block):
    """One of our models on the frame: the image input (``images``, or v1's ``image``) and
    the model, which must do one of ``tasks``."""

    tasks: tuple[str, ...]
    holds_when_still = True  # a model's answer on the same pixels is the same answer

    @classmethod
    def check_bindings(cls, name: str, bound: set[str]) -> None:
        if not bound & {"images", "image"}:
            raise WorkflowCompilationError(f"step '{name}': field 'images' is required")

    def __init__(self, name: str, config: ModelSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.model_id = self.model_of(config)
        self.model = acquire_model(name, self.model_id, context, self.tasks, self.missing_hint)

        self._models: ModelSource | None = context.models  # released once, on close
        try:
            self.configure(name, config)
        except BaseException:
            self.close()  # a block that is never built is never closed: release it here
            raise

    missing_hint: ClassVar[str] = ""
    """Said when the step's model is not in the models directory."""

    def model_of(self, config: ModelSettings) -> str:
        """The model the step runs (its ``model_id``, unless the block has a fixed one)."""
        return config.model_id

    def configure(self, name: str, config: ModelSettings) -> None:
        """The subclass's own fields, checked once the model is held."""

    def close(self) -> None:
        models, self._models = self._models, None
        if models is not None:
            models.release(self.model.name)

    @staticmethod
    def image(inputs: dict[str, Any]) -> WorkflowImage:
        return inputs["images"] if inputs.get("images") is not None else inputs["image"]
