"""An HTTP workflow run's ``inputs`` as the reference assembles them: the images the run goes
over, each image's own values, and the parameters every image shares.

The batch-oriented inputs (image inputs and ``WorkflowBatchInput``s) are each one value, or
a list of one value per image; the run's size is the longest list, and every other list must
be that long or of length one (the reference's ``RuntimeInputError`` otherwise). The frames'
image input is the images run in order, as a session's frames; another image input or a batch
input given as a list gives each image its own value (``FrameState.inputs``); a still image
or a single value is the same for every image.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..egress import EgressPolicy
from ..errors import InvalidRequest
from ..request_images import ImageLimits, load_images
from ..workflows.blocks.base import WorkflowImage
from ..workflows.inputs import batch_value, unset
from ..workflows.spec import InputSpec

__all__ = ["RunInputs", "frames_input", "run_inputs"]

_NO_IMAGE = np.zeros((1, 1, 3), np.uint8)
"""The frame of a workflow that declares no image input: it runs once, reading none."""


@dataclass
class RunInputs:
    images: list[np.ndarray]
    """What the run goes over, one frame each."""
    parameters: dict[str, Any]
    per_image: list[dict[str, Any]] = field(default_factory=list)
    """Each image's own values of the inputs given one per image (empty: none are)."""

    @property
    def batched(self) -> frozenset[str]:
        return frozenset(self.per_image[0]) if self.per_image else frozenset()


def frames_input(declared: list[InputSpec]) -> str | None:
    """The image input the run's images go to: ``image`` if declared, else the first image
    input (each other one is a still image, or one per image)."""
    names = [i.name for i in declared if i.is_image and i.dimensionality == 1]
    if not names:
        return None
    return "image" if "image" in names else names[0]


async def run_inputs(
    declared: list[InputSpec], given: dict[str, Any], limits: ImageLimits, egress: EgressPolicy
) -> RunInputs:
    """The run's images, per-image values and parameters; a 400 naming the input at fault."""
    frames = frames_input(declared)
    if frames is None:
        images = [_NO_IMAGE]
    elif given.get(frames) is None:
        raise unset(next(i for i in declared if i.name == frames)).error()
    else:
        images = await load_images(given[frames], f"inputs.{frames}", limits, egress)
    batch = [
        i
        for i in declared
        if (i.is_image or i.is_batch)
        and i.name != frames
        and (i.is_batch or i.dimensionality > 1 or isinstance(given.get(i.name), list))
    ]
    values: dict[str, list[Any]] = {}
    for spec_input in batch:
        value = given.get(spec_input.name)
        if value is None:
            raise unset(spec_input).error()
        values[spec_input.name] = await _values(spec_input, value, limits, egress)
    size = max([len(images), *map(len, values.values())])
    images = _broadcast(frames or "image", images, size)
    per_image = [
        {name: _broadcast(name, listed, size)[i] for name, listed in values.items()}
        for i in range(size)
    ]
    parameters = {k: v for k, v in given.items() if k != frames and k not in values}
    return RunInputs(images, parameters, per_image if values else [])


async def _values(
    spec_input: InputSpec, value: Any, limits: ImageLimits, egress: EgressPolicy
) -> list[Any]:
    """One value per image (a single one: for every image); for dimensionality 2, one list
    per image."""
    if spec_input.dimensionality == 1:
        return await _elements(spec_input, value, f"inputs.{spec_input.name}", limits, egress)
    if not isinstance(value, list) or not all(isinstance(v, list) for v in value):
        raise InvalidRequest(
            f"Workflow input `{spec_input.name}` is declared to be nested batch with "
            "dimensionality `2`. Input data does not define batch at the 2 dimensionality "
            "level: give a list of lists, one list per image"
        )
    return [
        await _elements(spec_input, listed, f"inputs.{spec_input.name}[{i}]", limits, egress)
        if listed
        else []
        for i, listed in enumerate(value)
    ]


async def _elements(
    spec_input: InputSpec, value: Any, where: str, limits: ImageLimits, egress: EgressPolicy
) -> list[Any]:
    """Each element of ``value`` (a list, or one value) as blocks take it."""
    name = spec_input.name
    if spec_input.is_image:
        pixels = await load_images(value, where, limits, egress)
        return [WorkflowImage(p, name) for p in pixels]
    listed = value if isinstance(value, list) else [value]
    if len(listed) > limits.max_images:
        raise InvalidRequest(
            f"{where}: {len(listed)} values; a run takes at most {limits.max_images} "
            "(VISIONSTREAM_MAX_IMAGES_PER_REQUEST)"
        )
    return [batch_value(spec_input, v, f"{where}[{i}]") for i, v in enumerate(listed)]


def _broadcast(name: str, values: list[Any], size: int) -> list[Any]:
    if len(values) == size:
        return values
    if len(values) == 1:
        return values * size
    raise InvalidRequest(
        "Expected all batch-oriented workflow inputs be the same length, or of length 1 - but "
        f"parameter: {name} provided with batch size {len(values)}, where expected batch size "
        f"based on remaining parameters is: {size}."
    )
