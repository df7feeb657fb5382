"""Image transforms that need no model (``roboflow_core/image_blur@v1``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import cv2

from ...errors import WorkflowCompilationError
from .base import Block, BlockSettings, BuildContext, FrameState, WorkflowImage, setting
from .fields import IMAGE, FieldSpec, Takes

__all__ = ["ImageBlurBlock"]

_BLURS = {
    "average": lambda image, k: cv2.blur(image, (k, k)),
    "gaussian": lambda image, k: cv2.GaussianBlur(image, (k, k), 0),
    "median": lambda image, k: cv2.medianBlur(image, k),
    "bilateral": lambda image, k: cv2.bilateralFilter(image, k, 75, 75),
}


@dataclass(frozen=True, kw_only=True)
class ImageBlurSettings(BlockSettings):
    blur_type: Literal["average", "gaussian", "median", "bilateral"] = setting(
        FieldSpec(default="gaussian", choices=tuple(_BLURS))
    )
    kernel_size: int = setting(FieldSpec(default=5, type="integer", minimum=1))


class ImageBlurBlock(Block):
    """The reference's blur block: ``blur_type`` average | gaussian | median | bilateral."""

    type_ids = ("roboflow_core/image_blur@v1", "ImageBlur")
    inputs = {"image": FieldSpec((IMAGE,), takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = ImageBlurSettings
    outputs = {"image": IMAGE}

    def __init__(self, name: str, config: ImageBlurSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        blur_type, size = config.blur_type, config.kernel_size
        context.limits.check_kernel(name, "kernel_size", size)
        # Gaussian and median kernels must be odd (a rule a range cannot say).
        if size % 2 == 0:
            raise WorkflowCompilationError(
                f"step '{name}': kernel_size must be an odd positive integer, got {size!r}"
            )
        self.blur = _BLURS[blur_type]
        self.kernel_size = size

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        image: WorkflowImage = inputs["image"]
        blurred = self.blur(image.numpy, self.kernel_size)
        frame.add_time("transform", started)
        return {"image": image.derived(blurred)}
