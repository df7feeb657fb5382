"""A workflow's inputs as the compiler resolves ``$inputs.<name>``, with the reference's
semantics: a definition is valid without its inputs' values, and a run says which one it
lacks.

- The frames' image input (``image_input_name``) is each frame; another image input is one
  still image for every frame, or over HTTP a list of images, one per image run.
- A ``WorkflowParameter`` is its value in the run's inputs, else its ``default_value``, else
  ``Unset``: a field that has a default of its own takes that (the reference passes None),
  a field that needs a value fails the run naming the input.
- A ``WorkflowBatchInput`` (``kind``, ``dimensionality`` 1) is one value per image run over
  HTTP (a list in ``inputs``, one element per image, or one value for all), and a stream's
  ``workflows_parameters`` value for every frame. A batch of images is an image input. Values
  of a prediction kind are the reference's serialised predictions, read by supervision.
- ``dimensionality`` 2 is a list per image (crops fed in as inputs): its values live one
  level below the frame, as a step's crops do, with a lineage of their own (``deep``, named
  ``$inputs.<name>``); given over HTTP, a list of lists.
- When validating (``POST /workflows/validate``, ``describe_interface``), nothing is given:
  every input without a default is ``Unset`` and no run needs it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import supervision as sv

from ..errors import WorkflowCompilationError
from .blocks.base import WorkflowImage
from .blocks.fields import ANY, DETECTION_KINDS, IMAGE, VIDEO_METADATA
from .dimensions import Dim
from .spec import PARAMETER_INPUT_TYPES, VIDEO_METADATA_INPUT_TYPES, InputSpec, WorkflowSpec
from .values import Const, Ref, Source, Unset

__all__ = ["VALUE", "InputResolver", "batch_value", "deep_name", "unset"]

VALUE = "value"
"""The one output of an input of dimensionality 2, as the engine holds it."""


def deep_name(name: str) -> str:
    """What the engine calls an input of dimensionality 2: no step can be named so."""
    return f"$inputs.{name}"


def unset(spec_input: InputSpec) -> Unset:
    kinds = spec_input.kind_names() or ([IMAGE] if spec_input.is_image else [])
    return Unset(spec_input.name, spec_input.type, tuple(kinds))


def _kind_of(spec_input: InputSpec) -> str:
    """The one kind the compiler checks a batch input's value by (ANY: several, or one that
    is taken as it comes)."""
    known = [k for k in spec_input.kind_names() if k in DETECTION_KINDS]
    return known[0] if len(known) == 1 and len(spec_input.kind_names()) == 1 else ANY


def batch_value(spec_input: InputSpec, value: Any, where: str) -> Any:
    """One element of a batch input as blocks take it: predictions of a prediction kind as
    ``sv.Detections`` (from the reference's JSON), anything else as it came."""
    if _kind_of(spec_input) in DETECTION_KINDS and isinstance(value, dict):
        try:
            return sv.Detections.from_inference(value)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise WorkflowCompilationError(
                f"{where}: not predictions in the reference's JSON ({exc})"
            ) from None
    return value


class InputResolver:
    """``$inputs.<name>`` for one compile: the run's values (``parameters``), the names given
    per image (``batched``: lists over HTTP), and whether only the definition is checked."""

    def __init__(
        self,
        spec: WorkflowSpec,
        frames: str,
        video_metadata: str,
        parameters: dict[str, Any],
        *,
        batched: frozenset[str] = frozenset(),
        validating: bool = False,
    ) -> None:
        self._inputs = {i.name: i for i in spec.inputs}
        self._frames, self._video_metadata = frames, video_metadata
        self._parameters, self._batched, self._validating = parameters, batched, validating
        image = self._inputs.get(frames)
        # A workflow that reads no image at all (only parameters) runs on each frame too.
        reads_images = any(i.is_image and i.dimensionality == 1 for i in spec.inputs)
        if (image is None and reads_images) or (image is not None and not image.is_image):
            raise WorkflowCompilationError(
                f"workflow has no image input named '{frames}' (image_input_name)"
            )
        for declared in spec.inputs:
            if declared.type in VIDEO_METADATA_INPUT_TYPES | PARAMETER_INPUT_TYPES:
                continue
            if declared.dimensionality > 2:
                raise WorkflowCompilationError(
                    f"input '{declared.name}' ({declared.type}) has dimensionality "
                    f"{declared.dimensionality}: this server feeds batch inputs of "
                    "dimensionality 1 (one value per image) or 2 (a list per image)"
                )
        self.deep = {
            deep_name(i.name): Dim((deep_name(i.name),))
            for i in spec.inputs
            if i.dimensionality == 2 and (i.is_image or i.is_batch)
        }
        """Where each input of dimensionality 2 lives: one level below the frame."""

    def resolve(self, name: str, raw: str, where: str) -> tuple[Source, str]:
        """The value source of ``$inputs.<name>`` and its kind."""
        spec_input = self._inputs.get(name)
        if spec_input is None:
            raise WorkflowCompilationError(f"{where}: selector '{raw}' names no workflow input")
        if spec_input.is_image:
            return self._image(spec_input, where), IMAGE
        if spec_input.type in VIDEO_METADATA_INPUT_TYPES:
            return Ref(None, self._video_metadata), VIDEO_METADATA
        if spec_input.type in PARAMETER_INPUT_TYPES:
            if name in self._parameters:
                return Const(self._parameters[name]), ANY
            if "default_value" in spec_input.model_fields_set:
                return Const(spec_input.default_value), ANY
            return Const(unset(spec_input)), ANY
        if spec_input.is_batch:
            return self._batch(spec_input, where), _kind_of(spec_input)
        raise WorkflowCompilationError(
            f"{where}: input '{name}' has unsupported type '{spec_input.type}' (inputs are "
            "WorkflowImage, WorkflowVideoMetadata, WorkflowParameter or WorkflowBatchInput)"
        )

    def _deep(self, spec_input: InputSpec, where: str) -> Source:
        """A list per image: given per image over HTTP, or left to the run when validating."""
        if spec_input.name in self._batched or self._validating:
            return Ref(deep_name(spec_input.name), VALUE)
        raise WorkflowCompilationError(
            f"{where}: input '{spec_input.name}' has dimensionality 2 (a list per image): it "
            "is given over HTTP as a list of lists, one list per image; a stream has none"
        )

    def _image(self, spec_input: InputSpec, where: str) -> Source:
        name = spec_input.name
        if deep_name(name) in self.deep:
            return self._deep(spec_input, where)
        if name == self._frames or name in self._batched:
            return Ref(None, name)
        still = self._parameters.get(name)
        if isinstance(still, np.ndarray) and still.ndim in (2, 3) and still.dtype == np.uint8:
            # A second image (a template to find): one still image for every frame.
            pixels = still if still.ndim == 3 else np.repeat(still[:, :, None], 3, axis=2)
            return Const(WorkflowImage(pixels, name))
        if self._validating:
            return Const(unset(spec_input))
        raise unset(spec_input).error(where)

    def _batch(self, spec_input: InputSpec, where: str) -> Source:
        name = spec_input.name
        if deep_name(name) in self.deep:
            return self._deep(spec_input, where)
        if name in self._batched:
            return Ref(None, name)
        if name in self._parameters:  # a stream's: one value for every frame
            return Const(batch_value(spec_input, self._parameters[name], where))
        if self._validating:
            return Const(unset(spec_input))
        raise unset(spec_input).error(where)

    def declared(self, name: str) -> InputSpec:
        return self._inputs[name]
