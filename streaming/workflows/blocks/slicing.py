"""Small objects (SAHI): slice each image into overlapping tiles (``image_slicer``, which
raises the dimension: a list of slices per image), run a detector on every slice at once,
and stitch the slices' detections back onto the image (``detections_stitch``), overlaps
removed by NMS or merged by NMM."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from .base import Block, BlockSettings, BuildContext, FrameState, WorkflowImage, setting
from .fields import DETECTIONS, IMAGE, SEGMENTATION, FieldSpec, Takes, fraction
from .images import Origin

__all__ = [
    "DetectionsStitchBlock",
    "ImageSlicerBlock",
    "ImageSlicerV2Block",
    "slice_count",
    "slice_offsets",
]


def slice_offsets(
    size: tuple[int, int], tile: tuple[int, int], overlap: tuple[float, float], centred: bool
) -> list[tuple[int, int, int, int]]:
    """The ``(x1, y1, x2, y2)`` of each slice of an image of ``size`` (width, height), row
    by row. v1 (``centred`` False) starts a slice every stride and clips the last ones to
    the image; v2 moves the last ones back inside so every slice has the tile's size (as
    far as the image allows), each region once."""
    width, height = size
    tile_w, tile_h = (min(tile[0], width), min(tile[1], height)) if centred else tile
    stride_w = max(1, tile_w - int(overlap[0] * tile_w))
    stride_h = max(1, tile_h - int(overlap[1] * tile_h))
    xs: np.ndarray = np.arange(0, width, stride_w)
    ys: np.ndarray = np.arange(0, height, stride_h)
    if centred:
        xs = xs - np.clip(xs + tile_w - width, 0, tile_w)
        ys = ys - np.clip(ys + tile_h - height, 0, tile_h)
    boxes = (
        (x, y, min(x + tile_w, width), min(y + tile_h, height))
        for y in ys.tolist()
        for x in xs.tolist()
    )
    return list(dict.fromkeys(boxes))  # each region once, in order


def slice_count(
    size: tuple[int, int], tile: tuple[int, int], overlap: tuple[float, float], centred: bool
) -> int:
    """How many slices ``slice_offsets`` makes at most, counted before making any."""
    counts = []
    for length, side, ratio in zip(size, tile, overlap, strict=True):
        side = min(side, length) if centred else side
        counts.append(-(-length // max(1, side - int(ratio * side))))
    return counts[0] * counts[1]


@dataclass(frozen=True, kw_only=True)
class ImageSlicerSettings(BlockSettings):
    slice_width: int = setting(FieldSpec(default=640, type="integer", minimum=1))
    slice_height: int = setting(FieldSpec(default=640, type="integer", minimum=1))
    overlap_ratio_width: float = setting(
        FieldSpec(default=0.2, type="number", minimum=0.0, below=1.0)
    )
    overlap_ratio_height: float = setting(
        FieldSpec(default=0.2, type="number", minimum=0.0, below=1.0)
    )


class ImageSlicerBlock(Block):
    """Overlapping tiles of each image (v1: the last row and column clipped to the image)."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/image_slicer@v1",)
    inputs = {
        "image": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),
        "images": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),  # the reference's alias
    }
    Settings: ClassVar[type[BlockSettings]] = ImageSlicerSettings
    outputs = {"slices": IMAGE}
    output_dimension = 1
    centred: ClassVar[bool] = False

    @classmethod
    def check_bindings(cls, name: str, bound: set[str]) -> None:
        if not bound & {"image", "images"}:
            raise WorkflowCompilationError(f"step '{name}': field 'image' is required")

    def __init__(self, name: str, config: ImageSlicerSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.tile = (config.slice_width, config.slice_height)
        self.overlap = (config.overlap_ratio_width, config.overlap_ratio_height)
        self.limits = context.limits

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image: WorkflowImage = (
            inputs["image"] if inputs.get("image") is not None else inputs["images"]
        )
        height, width = image.numpy.shape[:2]
        self.limits.check_elements(
            self.name, slice_count((width, height), self.tile, self.overlap, self.centred), "slices"
        )
        slices: list[WorkflowImage | None] = []
        for x1, y1, x2, y2 in slice_offsets((width, height), self.tile, self.overlap, self.centred):
            piece = image.crop(x1, y1, x2, y2, f"image_slicer.{uuid.uuid4()}")
            slices.append(piece if piece.numpy.size else None)
        return {"slices": slices}


class ImageSlicerV2Block(ImageSlicerBlock):
    """v2: every slice the tile's size, the last ones moved back inside the image."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/image_slicer@v2",)
    centred = True


@dataclass(frozen=True, kw_only=True)
class DetectionsStitchSettings(BlockSettings):
    overlap_filtering_strategy: Literal["none", "nms", "nmm"] = setting(
        FieldSpec(default="nms", choices=("none", "nms", "nmm"))
    )
    iou_threshold: float = setting(fraction(0.3))


class DetectionsStitchBlock(Block):
    """Each slice's (or crop's) detections moved back onto the image they were cut from
    and merged into one set: overlaps suppressed (``nms``), merged (``nmm``) or kept."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/detections_stitch@v1",)
    passes_kind = "predictions"
    inputs = {
        "reference_image": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "predictions": FieldSpec((DETECTIONS, SEGMENTATION), takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = DetectionsStitchSettings
    outputs = {"predictions": DETECTIONS}
    input_offsets = {"predictions": 1}
    dimension_reference = "reference_image"

    def __init__(self, name: str, config: DetectionsStitchSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.strategy = config.overlap_filtering_strategy
        self.iou = config.iou_threshold

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image: WorkflowImage = inputs["reference_image"]
        height, width = image.numpy.shape[:2]
        parts = [
            placed(d, (width, height))
            for d in inputs["predictions"]
            if isinstance(d, sv.Detections) and len(d)
        ]
        if any(p.mask is None for p in parts) and any(p.mask is not None for p in parts):
            raise ValueError("detections_stitch: some slices' detections have masks, some not")
        merged = sv.Detections.merge(parts) if parts else sv.Detections.empty()
        if len(merged) and self.strategy == "nms":
            merged = merged.with_nms(threshold=self.iou)
        elif len(merged) and self.strategy == "nmm":
            merged = merged.with_nmm(threshold=self.iou)
        merged.data["parent_id"] = np.array([image.parent_id] * len(merged))
        merged.metadata = {"image_size": (width, height)}
        return {"predictions": merged}


def placed(detections: sv.Detections, size: tuple[int, int]) -> sv.Detections:
    """Detections made on a slice or crop, in the coordinates of the image it was cut from
    (``parent_origin`` in their metadata: where the piece lay), clipped to ``size``."""
    origin: Origin | None = detections.metadata.get("parent_origin")
    x, y = (origin.offset_x, origin.offset_y) if origin is not None else (0, 0)
    width, height = size
    xyxy = detections.xyxy + np.array([x, y, x, y], dtype=detections.xyxy.dtype)
    xyxy[:, [0, 2]] = xyxy[:, [0, 2]].clip(0, width)
    xyxy[:, [1, 3]] = xyxy[:, [1, 3]].clip(0, height)
    mask = None
    if detections.mask is not None:
        pieces = np.asarray(detections.mask)
        mask = np.zeros((len(pieces), height, width), dtype=bool)
        h = min(pieces.shape[1], height - y)
        w = min(pieces.shape[2], width - x)
        mask[:, y : y + h, x : x + w] = pieces[:, :h, :w]
    data = dict(detections.data)
    if "keypoints_xy" in data:
        data["keypoints_xy"] = np.asarray(data["keypoints_xy"]) + np.array([x, y])
    return replace(detections, xyxy=xyxy, mask=mask, data=data, metadata={})
