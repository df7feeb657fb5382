"""Image operations the reference's workflows put before a model: grey
(``convert_grayscale``) and resize, rotate or flip (``image_preprocessing``). Each gives a
new image in the old one's place (a crop stays a crop, with its origin)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import cv2
import numpy as np

from .base import IMAGE, Block, BlockSettings, BuildContext, FieldSpec, FrameState, WorkflowImage

__all__ = ["ConvertGrayscaleBlock", "ImagePreprocessingBlock", "rotated"]


class ConvertGrayscaleBlock(Block):
    """The image in grey. Unlike the reference's one-channel array, the grey is kept in
    three equal channels, so every block and the returned video take it as they take any
    frame (it looks and encodes the same)."""

    type_ids = ("roboflow_core/convert_grayscale@v1",)
    fields = {"image": FieldSpec((IMAGE,), per_frame=True)}
    outputs = {"image": IMAGE}

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image: WorkflowImage = inputs["image"]
        pixels = image.numpy
        grey = pixels if pixels.ndim == 2 else cv2.cvtColor(pixels, cv2.COLOR_BGR2GRAY)
        return {"image": image.derived(cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR))}


@dataclass(frozen=True, kw_only=True)
class ImagePreprocessingSettings(BlockSettings):
    task_type: Literal["resize", "rotate", "flip"]
    width: int | None
    height: int | None
    rotation_degrees: int
    flip_type: Literal["vertical", "horizontal", "both"]


def rotated(pixels: np.ndarray, degrees: int) -> np.ndarray:
    """Turned by ``degrees`` about the centre (OpenCV's sense: positive counter-clockwise,
    as the reference computes it), the canvas grown to hold all of it."""
    if degrees == 0:
        return pixels.copy()
    height, width = pixels.shape[:2]
    centre = (width // 2, height // 2)
    matrix = cv2.getRotationMatrix2D(centre, degrees, 1.0)
    cos, sin = abs(matrix[0, 0]), abs(matrix[0, 1])
    new_width = int(height * sin + width * cos)
    new_height = int(height * cos + width * sin)
    matrix[0, 2] += new_width / 2 - centre[0]
    matrix[1, 2] += new_height / 2 - centre[1]
    return cv2.warpAffine(pixels, matrix, (new_width, new_height))


def _resized(pixels: np.ndarray, width: int | None, height: int | None) -> np.ndarray:
    """To ``width`` x ``height``; one of them None keeps the aspect ratio."""
    if width is None and height is None:
        return pixels.copy()
    current_height, current_width = pixels.shape[:2]
    if width is None:
        assert height is not None
        width = int(current_width * height / current_height)
    elif height is None:
        height = int(current_height * width / current_width)
    return cv2.resize(pixels, (width, height), interpolation=cv2.INTER_AREA)


_FLIPS = {"vertical": 0, "horizontal": 1, "both": -1}


class ImagePreprocessingBlock(Block):
    """One of: ``resize`` (to ``width`` x ``height``, area interpolation; a null one keeps
    the aspect ratio), ``rotate`` (by ``rotation_degrees``, the canvas grown to fit) or
    ``flip`` (``vertical``, ``horizontal`` or ``both``)."""

    type_ids = ("roboflow_core/image_preprocessing@v1",)
    fields = {
        "image": FieldSpec((IMAGE,), per_frame=True),
        "task_type": FieldSpec(choices=("resize", "rotate", "flip")),
        "width": FieldSpec(default=640, type="integer", minimum=1, nullable=True),
        "height": FieldSpec(default=640, type="integer", minimum=1, nullable=True),
        "rotation_degrees": FieldSpec(default=90, type="integer", minimum=-360, maximum=360),
        "flip_type": FieldSpec(default="vertical", choices=tuple(_FLIPS)),
    }
    Settings: ClassVar[type[BlockSettings]] = ImagePreprocessingSettings
    outputs = {"image": IMAGE}

    def __init__(
        self, name: str, config: ImagePreprocessingSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        self.config = config

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image: WorkflowImage = inputs["image"]
        c = self.config
        if c.task_type == "resize":
            pixels = _resized(image.numpy, c.width, c.height)
        elif c.task_type == "rotate":
            pixels = rotated(image.numpy, c.rotation_degrees)
        else:
            pixels = cv2.flip(image.numpy, _FLIPS[c.flip_type])
        return {"image": image.derived(pixels)}
