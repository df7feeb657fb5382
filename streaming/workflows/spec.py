"""The workflow JSON (reference §7.1) as typed models, and its selectors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import WorkflowCompilationError

__all__ = [
    "BATCH_INPUT_TYPES",
    "IMAGE_INPUT_TYPES",
    "InputSpec",
    "OutputSpec",
    "Selector",
    "StepSpec",
    "WorkflowSpec",
    "parse_selector",
    "parse_spec",
]

IMAGE_INPUT_TYPES = {"WorkflowImage", "InferenceImage"}
PARAMETER_INPUT_TYPES = {"WorkflowParameter", "InferenceParameter"}
VIDEO_METADATA_INPUT_TYPES = {"WorkflowVideoMetadata"}
BATCH_INPUT_TYPES = {"WorkflowBatchInput"}

_INPUT_SELECTOR = re.compile(r"^\$inputs\.([A-Za-z0-9_-]+)$")
_STEP_SELECTOR = re.compile(r"^\$steps\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+|\*)$")


class InputSpec(BaseModel):
    """A workflow input (an image, video metadata, a parameter or a batch of values)."""

    model_config = ConfigDict(extra="ignore")
    type: str
    name: str = Field(min_length=1)
    default_value: Any = None
    kind: list[Any] = Field(default_factory=list)
    """The kinds it declares: names, or the reference's ``{"name": ...}`` objects."""
    dimensionality: int = Field(default=1, ge=1, le=4)
    """A ``WorkflowBatchInput``'s nesting: 1, one value per image (or frame)."""

    def kind_names(self) -> list[str]:
        names = [k.get("name") if isinstance(k, dict) else k for k in self.kind]
        return [n.removeprefix("Batch[").removesuffix("]") for n in names if isinstance(n, str)]

    @property
    def is_image(self) -> bool:
        """An image input: ``WorkflowImage``, or a batch input of the image kind."""
        if self.type in IMAGE_INPUT_TYPES:
            return True
        return self.type in BATCH_INPUT_TYPES and "image" in self.kind_names()

    @property
    def is_batch(self) -> bool:
        """Fed one value per image or frame (the reference's batch-oriented inputs)."""
        return self.type in BATCH_INPUT_TYPES and not self.is_image


class StepSpec(BaseModel):
    """A workflow step: its block type, name and fields (any extra key is a field)."""

    # Blocks take their own fields; we keep them all and let each block decide.
    model_config = ConfigDict(extra="allow")
    type: str
    name: str = Field(min_length=1)

    def fields(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class OutputSpec(BaseModel):
    """A workflow output: a name and the selector it reads."""

    model_config = ConfigDict(extra="ignore")
    type: str = "JsonField"
    name: str = Field(min_length=1)
    selector: str
    coordinates_system: str = "parent"


class WorkflowSpec(BaseModel):
    """A workflow specification in the reference's JSON shape."""

    model_config = ConfigDict(extra="ignore")
    version: str | None = None
    inputs: list[InputSpec] = Field(default_factory=list)
    """May be empty: the reference runs a workflow of constants and parameters too."""
    steps: list[StepSpec] = Field(default_factory=list)
    outputs: list[OutputSpec] = Field(min_length=1)


@dataclass(frozen=True)
class Selector:
    """``$inputs.name`` (step is None) or ``$steps.step.output`` (output may be ``*``)."""

    raw: str
    step: str | None
    name: str


def parse_selector(value: object) -> Selector | None:
    """A Selector if ``value`` is a selector string, None for literals."""
    if not isinstance(value, str) or not value.startswith("$"):
        return None
    if m := _INPUT_SELECTOR.match(value):
        return Selector(value, None, m.group(1))
    if m := _STEP_SELECTOR.match(value):
        return Selector(value, m.group(1), m.group(2))
    raise WorkflowCompilationError(f"invalid selector '{value}'")


def parse_spec(data: object) -> WorkflowSpec:
    if not isinstance(data, dict):
        raise WorkflowCompilationError("workflow_specification must be a JSON object")
    # Some tools wrap the spec as {"specification": {...}}.
    if "specification" in data and "steps" not in data:
        data = data["specification"]
    try:
        spec = WorkflowSpec.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise WorkflowCompilationError(f"invalid workflow specification: {problems}") from None
    for kind, names in (
        ("input", [i.name for i in spec.inputs]),
        ("step", [s.name for s in spec.steps]),
        ("output", [o.name for o in spec.outputs]),
    ):
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise WorkflowCompilationError(f"duplicate {kind} name '{name}'")
            seen.add(name)
    return spec
