"""Crops: one per detection (``dynamic_crop``, which raises the dimension: each frame's
crops are a list, and steps on them run once per crop), or one fixed region per image
(``absolute_static_crop``, ``relative_static_crop``). A crop keeps where it lies in its
parent and in the frame, so what is found in it can be put back."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import cv2
import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from .base import Block, BlockSettings, BuildContext, FrameState, WorkflowImage, select, setting
from .fields import DETECTION_KINDS, DETECTIONS, IMAGE, FieldSpec, Takes, fraction
from .images import Origin

__all__ = ["AbsoluteStaticCropBlock", "DynamicCropBlock", "RelativeStaticCropBlock", "bgr_color"]


def bgr_color(value: Any, where: str) -> tuple[int, int, int]:
    """A colour as the reference's crop and visualisation blocks take it (``#RRGGBB``,
    ``#RGB``, ``"(R, G, B)"`` or an ``[R, G, B]`` list), as BGR."""
    text = value.strip() if isinstance(value, str) else None
    try:
        if text is not None and text.startswith("#") and len(text) in (4, 7):
            digits = text[1:] if len(text) == 7 else "".join(c * 2 for c in text[1:])
            rgb = tuple(int(digits[i : i + 2], 16) for i in (0, 2, 4))
        elif text is not None and text.startswith("(") and text.endswith(")"):
            rgb = tuple(int(part) for part in text[1:-1].split(","))
        elif isinstance(value, list | tuple):
            rgb = tuple(int(part) for part in value)
        else:
            rgb = ()
    except (TypeError, ValueError):
        rgb = ()
    if len(rgb) != 3 or not all(0 <= c <= 255 for c in rgb):
        raise WorkflowCompilationError(
            f"{where} must be a colour: '#RRGGBB', '#RGB', '(R, G, B)' or [R, G, B], got {value!r}"
        )
    r, g, b = rgb
    return (b, g, r)


_IMAGES = {
    "images": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),
    "image": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),  # the reference's alias
}


def _image(inputs: dict[str, Any]) -> WorkflowImage:
    return inputs["images"] if inputs.get("images") is not None else inputs["image"]


def _check_image_bound(name: str, bound: set[str]) -> None:
    if not bound & {"images", "image"}:
        raise WorkflowCompilationError(f"step '{name}': field 'images' is required")


@dataclass(frozen=True, kw_only=True)
class DynamicCropSettings(BlockSettings):
    mask_opacity: float = setting(fraction(0.0))
    background_color: Any = setting(FieldSpec(default=(0, 0, 0)))


class DynamicCropBlock(Block):
    """A crop per detection (its box, rounded): ``crops`` and ``predictions`` (the detection,
    moved into the crop's coordinates) are lists, one element per detection; a box with
    no pixels gives no crop there (None). With ``mask_opacity`` above 0 and a segmentation,
    pixels outside the mask blend toward ``background_color``."""

    type_ids = ("roboflow_core/dynamic_crop@v1", "DynamicCrop", "Crop")
    inputs = {
        **_IMAGES,
        "predictions": FieldSpec(DETECTION_KINDS, default=None, takes=Takes.FRAME),
        "detections": FieldSpec(DETECTION_KINDS, default=None, takes=Takes.FRAME),  # alias
    }
    Settings: ClassVar[type[BlockSettings]] = DynamicCropSettings
    outputs = {"crops": IMAGE, "predictions": DETECTIONS}
    output_dimension = 1

    @classmethod
    def check_bindings(cls, name: str, bound: set[str]) -> None:
        _check_image_bound(name, bound)
        if not bound & {"predictions", "detections"}:
            raise WorkflowCompilationError(f"step '{name}': field 'predictions' is required")

    def __init__(self, name: str, config: DynamicCropSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.mask_opacity = config.mask_opacity
        self.background = bgr_color(config.background_color, f"step '{name}': background_color")
        self.limits = context.limits

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image = _image(inputs)
        detections: sv.Detections = (
            inputs["predictions"] if inputs.get("predictions") is not None else inputs["detections"]
        )
        self.limits.check_elements(self.name, len(detections), "crops")
        crops: list[WorkflowImage | None] = []
        moved: list[sv.Detections | None] = []
        ids = detections.data.get("detection_id")
        boxes: list[list[int]] = np.round(detections.xyxy).astype(int).tolist()
        for i, (x1, y1, x2, y2) in enumerate(boxes):
            crop_id = str(ids[i]) if ids is not None else str(uuid.uuid4())
            crop = image.crop(x1, y1, x2, y2, crop_id)
            if crop.numpy.size == 0:
                crops.append(None)
                moved.append(None)
                continue
            origin = crop.parent_origin
            assert origin is not None
            x, y = origin.offset_x, origin.offset_y
            h, w = crop.numpy.shape[:2]
            if self.mask_opacity > 0 and detections.mask is not None:
                crop = crop.derived(
                    self._blend(crop.numpy, detections.mask[i][y : y + h, x : x + w])
                )
            crops.append(crop)
            moved.append(_moved(select(detections, np.array([i])), origin, (h, w)))
        return {"crops": crops, "predictions": moved}

    def _blend(self, pixels: np.ndarray, mask: np.ndarray) -> np.ndarray:
        background = np.empty_like(pixels)
        background[:] = self.background
        inside = np.where(mask[..., None] > 0, pixels, background)
        return cv2.addWeighted(inside, self.mask_opacity, pixels, 1.0 - self.mask_opacity, 0)


def _window(mask: Any, x: int, y: int, width: int, height: int) -> np.ndarray | None:
    """Masks cut to a crop's window (supervision may hold them compacted)."""
    return None if mask is None else np.asarray(mask)[:, y : y + height, x : x + width]


def _moved(detection: sv.Detections, origin: Origin, size: tuple[int, ...]) -> sv.Detections:
    """A detection in its crop's coordinates (box, mask, keypoints, polygon), knowing where
    the crop lay (``parent_origin``: what ``detections_stitch`` moves it back by)."""
    height, width = size[0], size[1]
    x, y = origin.offset_x, origin.offset_y
    offset = np.array([x, y])
    moved = replace(
        detection,
        xyxy=detection.xyxy - np.array([x, y, x, y], dtype=detection.xyxy.dtype),
        mask=_window(detection.mask, x, y, width, height),
        data=dict(detection.data),
        metadata={**detection.metadata, "image_size": (width, height), "parent_origin": origin},
    )
    for key in ("keypoints_xy", "polygon"):
        if key in moved.data:
            moved.data[key] = np.asarray(moved.data[key]) - offset
    return moved


_PIXELS = FieldSpec(type="integer", minimum=1)
_SHARE = FieldSpec(type="number", minimum=0.0, maximum=1.0)


@dataclass(frozen=True, kw_only=True)
class AbsoluteStaticCropSettings(BlockSettings):
    x_center: int = setting(_PIXELS)
    y_center: int = setting(_PIXELS)
    width: int = setting(_PIXELS)
    height: int = setting(_PIXELS)


@dataclass(frozen=True, kw_only=True)
class RelativeStaticCropSettings(BlockSettings):
    x_center: float = setting(_SHARE)
    y_center: float = setting(_SHARE)
    width: float = setting(_SHARE)
    height: float = setting(_SHARE)


_REGION = ("x_center", "y_center", "width", "height")


class _StaticCropBlock(Block):
    """One region of every image (its centre and size); ``crops`` is None where the region
    falls outside the image."""

    kind: ClassVar[str]
    outputs = {"crops": IMAGE}

    @classmethod
    def check_bindings(cls, name: str, bound: set[str]) -> None:
        _check_image_bound(name, bound)

    def __init__(self, name: str, config: BlockSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.region: tuple[float, ...] = tuple(getattr(config, field) for field in _REGION)

    def pixels(self, image: WorkflowImage) -> tuple[float, ...]:
        """The region's centre and size in the image's pixels."""
        return self.region

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image = _image(inputs)
        x_center, y_center, width, height = self.pixels(image)
        x1, y1 = round(x_center - width / 2), round(y_center - height / 2)
        crop_id = f"{self.kind}.{uuid.uuid4()}"
        crop = image.crop(x1, y1, round(x1 + width), round(y1 + height), crop_id)
        return {"crops": crop if crop.numpy.size else None}


class AbsoluteStaticCropBlock(_StaticCropBlock):
    """A region in pixels."""

    type_ids = ("roboflow_core/absolute_static_crop@v1", "AbsoluteStaticCrop")
    kind = "absolute_static_crop"
    inputs = _IMAGES
    Settings: ClassVar[type[BlockSettings]] = AbsoluteStaticCropSettings


class RelativeStaticCropBlock(_StaticCropBlock):
    """A region as fractions of the image's size. Unlike the reference, a region reaching
    past the top or left edge is clipped there, not wrapped around by negative indexing."""

    type_ids = ("roboflow_core/relative_static_crop@v1", "RelativeStaticCrop")
    kind = "relative_static_crop"
    inputs = _IMAGES
    Settings: ClassVar[type[BlockSettings]] = RelativeStaticCropSettings

    def pixels(self, image: WorkflowImage) -> tuple[float, ...]:
        height, width = image.numpy.shape[:2]
        x, y, w, h = self.region
        return round(width * x), round(height * y), round(width * w), round(height * h)
