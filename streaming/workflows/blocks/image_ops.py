"""Image operations the reference's workflows put before a model: grey
(``convert_grayscale``), resize, rotate or flip (``image_preprocessing``), contrast
stretched (``contrast_enhancement``) and morphology (``morphological_transformation``);
and the colour most of an image is (``dominant_color``).
Each gives a new image in the old one's place (a crop stays a crop, with its origin)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import cv2
import numpy as np

from .base import Block, BlockSettings, BuildContext, FrameState, WorkflowImage, setting
from .fields import IMAGE, FieldSpec, Takes

__all__ = [
    "ContrastEnhancementBlock",
    "ConvertGrayscaleBlock",
    "DominantColorBlock",
    "ImagePreprocessingBlock",
    "MorphologicalTransformationBlock",
    "MorphologicalTransformationV2Block",
    "grey",
    "rotated",
    "stretched",
]


def grey(pixels: np.ndarray) -> np.ndarray:
    """One channel of grey (an image already grey as it is)."""
    return pixels if pixels.ndim == 2 else np.asarray(cv2.cvtColor(pixels, cv2.COLOR_BGR2GRAY))


class ConvertGrayscaleBlock(Block):
    """The image in grey. Unlike the reference's one-channel array, the grey is kept in
    three equal channels, so every block and the returned video take it as they take any
    frame (it looks and encodes the same)."""

    type_ids = ("roboflow_core/convert_grayscale@v1",)
    inputs = {"image": FieldSpec((IMAGE,), takes=Takes.FRAME)}
    outputs = {"image": IMAGE}

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image: WorkflowImage = inputs["image"]
        return {"image": image.derived(cv2.cvtColor(grey(image.numpy), cv2.COLOR_GRAY2BGR))}


_FLIPS = {"vertical": 0, "horizontal": 1, "both": -1}


@dataclass(frozen=True, kw_only=True)
class ImagePreprocessingSettings(BlockSettings):
    task_type: Literal["resize", "rotate", "flip"] = setting(
        FieldSpec(choices=("resize", "rotate", "flip"))
    )
    width: int | None = setting(FieldSpec(default=640, type="integer", minimum=1, nullable=True))
    height: int | None = setting(FieldSpec(default=640, type="integer", minimum=1, nullable=True))
    rotation_degrees: int = setting(
        FieldSpec(default=90, type="integer", minimum=-360, maximum=360)
    )
    flip_type: Literal["vertical", "horizontal", "both"] = setting(
        FieldSpec(default="vertical", choices=tuple(_FLIPS))
    )


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


def _resize_target(pixels: np.ndarray, width: int | None, height: int | None) -> tuple[int, int]:
    """``width`` x ``height``; one of them None keeps the aspect ratio, both the size."""
    current_height, current_width = pixels.shape[:2]
    if width is None and height is None:
        return current_width, current_height
    if width is None:
        assert height is not None
        return max(1, int(current_width * height / current_height)), height
    if height is None:
        return width, max(1, int(current_height * width / current_width))
    return width, height


def _resized(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    if (height, width) == pixels.shape[:2]:
        return pixels.copy()
    return cv2.resize(pixels, (width, height), interpolation=cv2.INTER_AREA)


class ImagePreprocessingBlock(Block):
    """One of: ``resize`` (to ``width`` x ``height``, area interpolation; a null one keeps
    the aspect ratio), ``rotate`` (by ``rotation_degrees``, the canvas grown to fit) or
    ``flip`` (``vertical``, ``horizontal`` or ``both``)."""

    type_ids = ("roboflow_core/image_preprocessing@v1",)
    inputs = {"image": FieldSpec((IMAGE,), takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = ImagePreprocessingSettings
    outputs = {"image": IMAGE}

    def __init__(
        self, name: str, config: ImagePreprocessingSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        self.config = config
        self.limits = context.limits
        if config.task_type == "resize" and config.width and config.height:
            self.limits.check_pixels(name, config.width, config.height, compiling=True)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image: WorkflowImage = inputs["image"]
        c = self.config
        if c.task_type == "resize":
            width, height = _resize_target(image.numpy, c.width, c.height)
            self.limits.check_pixels(self.name, width, height)
            pixels = _resized(image.numpy, width, height)
        elif c.task_type == "rotate":
            side = sum(image.numpy.shape[:2])  # the grown canvas fits in side x side
            self.limits.check_pixels(self.name, side, side)
            pixels = rotated(image.numpy, c.rotation_degrees)
        else:
            pixels = cv2.flip(image.numpy, _FLIPS[c.flip_type])
        return {"image": image.derived(pixels)}


@dataclass(frozen=True, kw_only=True)
class ContrastSettings(BlockSettings):
    clip_limit: int = setting(FieldSpec(default=0, type="integer", minimum=0, maximum=50))
    contrast_multiplier: float = setting(
        FieldSpec(default=1.0, type="number", minimum=0.1, maximum=5.0)
    )
    normalize_brightness: bool = setting(FieldSpec(default=False, type="boolean"))


def stretched(
    pixels: np.ndarray, clip_percent: float, multiplier: float, gamma: float
) -> np.ndarray:
    """Each channel stretched to 0-255 between its ``clip_percent`` and ``100 -
    clip_percent`` percentiles (its extremes at 0), scaled about 128 by ``multiplier``,
    then through ``gamma``; a flat channel is left as it is."""
    out = pixels.astype(np.float32)
    channels = out[..., None] if out.ndim == 2 else out
    for c in range(channels.shape[2]):
        channel = channels[..., c]
        if clip_percent > 0:
            low, high = np.quantile(channel, [clip_percent / 100, 1 - clip_percent / 100])
        else:
            low, high = channel.min(), channel.max()
        if high <= low:
            continue
        value = (channel - low) / (high - low) * 255.0
        if multiplier != 1.0:
            value = 128.0 + (value - 128.0) * multiplier
        if gamma != 1.0:
            value = np.power(np.clip(value, 0, 255) / 255.0, gamma) * 255.0
        channels[..., c] = np.clip(value, 0, 255)
    return out.astype(np.uint8)


class ContrastEnhancementBlock(Block):
    """Contrast stretched channel by channel: ``clip_limit`` percent of the darkest and
    brightest pixels clipped, ``contrast_multiplier`` about mid-grey, and midtones
    brightened (gamma 1/1.3) when ``normalize_brightness``."""

    type_ids = ("roboflow_core/contrast_enhancement@v1",)
    inputs = {"image": FieldSpec((IMAGE,), takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = ContrastSettings
    outputs = {"image": IMAGE}

    def __init__(self, name: str, config: ContrastSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        gamma = 1.0 / 1.3 if config.normalize_brightness else 1.0
        self.stretch = (float(config.clip_limit), config.contrast_multiplier, gamma)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image: WorkflowImage = inputs["image"]
        return {"image": image.derived(stretched(image.numpy, *self.stretch))}


_MORPHOLOGY = {
    "Opening": cv2.MORPH_OPEN,
    "Closing": cv2.MORPH_CLOSE,
    "Gradient": cv2.MORPH_GRADIENT,
    "Top Hat": cv2.MORPH_TOPHAT,
    "Black Hat": cv2.MORPH_BLACKHAT,
}


def morphology(pixels: np.ndarray, kernel_size: int, operation: str) -> np.ndarray:
    kernel = np.ones((kernel_size, kernel_size), np.uint8)
    if operation == "Erosion":
        return cv2.erode(pixels, kernel, iterations=1)
    if operation == "Dilation":
        return cv2.dilate(pixels, kernel, iterations=1)
    if operation == "Opening then Closing":
        opened = cv2.morphologyEx(pixels, cv2.MORPH_OPEN, kernel)
        return cv2.morphologyEx(opened, cv2.MORPH_CLOSE, kernel)
    return cv2.morphologyEx(pixels, _MORPHOLOGY[operation], kernel)


_OPERATIONS = (
    "Erosion",
    "Dilation",
    "Opening",
    "Closing",
    "Opening then Closing",
    "Gradient",
    "Top Hat",
    "Black Hat",
)
_OPERATIONS_V1 = tuple(o for o in _OPERATIONS if o != "Opening then Closing")


@dataclass(frozen=True, kw_only=True)
class MorphologySettings(BlockSettings):
    kernel_size: int = setting(FieldSpec(default=5, type="integer", minimum=1))
    operation: str = setting(FieldSpec(default="Opening then Closing", choices=_OPERATIONS))


@dataclass(frozen=True, kw_only=True)
class MorphologyV1Settings(MorphologySettings):
    operation: str = setting(FieldSpec(default="Closing", choices=_OPERATIONS_V1))


class MorphologicalTransformationV2Block(Block):
    """Erosion, dilation, opening, closing, both, gradient, top hat or black hat with a
    square kernel, on the colour image (v2)."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/morphological_transformation@v2",)
    inputs = {"image": FieldSpec((IMAGE,), takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = MorphologySettings
    outputs = {"image": IMAGE}
    grey: ClassVar[bool] = False

    def __init__(self, name: str, config: MorphologySettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        context.limits.check_kernel(name, "kernel_size", config.kernel_size)
        self.kernel_size, self.operation = config.kernel_size, config.operation

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image: WorkflowImage = inputs["image"]
        pixels = image.numpy
        if pixels.ndim == 2:
            pixels = cv2.cvtColor(pixels, cv2.COLOR_GRAY2BGR)
        if self.grey:  # v1 works on the grey image (kept in three channels, as ours is)
            pixels = cv2.cvtColor(cv2.cvtColor(pixels, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
        return {"image": image.derived(morphology(pixels, self.kernel_size, self.operation))}


class MorphologicalTransformationBlock(MorphologicalTransformationV2Block):
    """v1: on the grey image; its default is closing."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/morphological_transformation@v1",)
    Settings: ClassVar[type[BlockSettings]] = MorphologyV1Settings
    grey = True


@dataclass(frozen=True, kw_only=True)
class DominantColorSettings(BlockSettings):
    color_clusters: int = setting(FieldSpec(default=4, type="integer", minimum=1, maximum=10))
    max_iterations: int = setting(FieldSpec(default=100, type="integer", minimum=1, maximum=500))
    target_size: int = setting(FieldSpec(default=100, type="integer", minimum=1, maximum=250))


def dominant_color(pixels: np.ndarray, clusters: int, iterations: int) -> tuple[int, int, int]:
    """The centre of the largest of ``clusters`` k-means clusters of the pixels, as RGB
    (seeded: the same image gives the same colour)."""
    colour = pixels if pixels.ndim == 3 else cv2.cvtColor(pixels, cv2.COLOR_GRAY2BGR)
    points: np.ndarray = colour.reshape(-1, 3).astype(np.float32)
    rng = np.random.default_rng(0)
    clusters = min(clusters, len(points))
    centres = points[rng.choice(len(points), clusters, replace=False)]
    labels = np.zeros(len(points), int)
    for _ in range(iterations):
        labels = np.argmin(((points[:, None] - centres) ** 2).sum(axis=2), axis=1)
        moved = np.array(
            [
                points[labels == i].mean(axis=0)
                if (labels == i).any()
                else points[rng.integers(len(points))]  # an empty cluster starts afresh
                for i in range(clusters)
            ]
        )
        if np.allclose(centres, moved):
            break
        centres = moved
    counts = np.bincount(labels, minlength=clusters)
    b, g, r = (int(np.clip(round(float(v)), 0, 255)) for v in centres[int(np.argmax(counts))])
    return (r, g, b)


class DominantColorBlock(Block):
    """The colour most of the image is, as ``rgb_color`` ``(r, g, b)``: k-means with
    ``color_clusters`` clusters on the image sampled down to about ``target_size``."""

    type_ids = ("roboflow_core/dominant_color@v1",)
    inputs = {"image": FieldSpec((IMAGE,), takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = DominantColorSettings
    outputs = {"rgb_color": "rgb_color"}

    def __init__(self, name: str, config: DominantColorSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.config = config

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        pixels = inputs["image"].numpy
        c = self.config
        step = max(1, min(pixels.shape[:2]) // c.target_size)
        sampled = pixels[::step, ::step]
        return {"rgb_color": dominant_color(sampled, c.color_clusters, c.max_iterations)}
