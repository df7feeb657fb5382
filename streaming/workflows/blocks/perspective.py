"""``perspective_correction``: a four-cornered region of the image (a floor, a pitch, a
document) mapped to a ``transformed_rect_width`` x ``transformed_rect_height`` rectangle,
as a top-down view: each detection's box, mask and keypoints moved into it, and the image
warped into it with ``warp_image``.

``perspective_polygons`` is one quadrilateral, a list (the largest is used), or a step's
output per frame (``dynamic_zone``'s ``zones``). Its corners are ordered as the reference
orders them: clockwise, from the one nearest the bottom left. With
``extend_perspective_polygon_by_detections_anchor`` (an anchor, or ``ALL``), the rectangle
grows until every detection's anchor lies inside it; here by mapping the anchors and
extending the target rectangle, which moves the same lines as the reference's extension of
the source polygon along its sides."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import cv2
import numpy as np
import supervision as sv

from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import ANY, DETECTION_KINDS, DETECTIONS, IMAGE, FieldSpec, Takes

__all__ = ["PerspectiveCorrectionBlock", "transform_for"]

ALL = "ALL"
_ANCHORS = ("", ALL, *(p.value for p in sv.Position))


def _largest(polygons: Any) -> np.ndarray:
    """The quadrilateral to map: the one given, or the largest of those given."""
    if not isinstance(polygons, list | tuple | np.ndarray) or len(polygons) == 0:
        raise ValueError("perspective_polygons must be a polygon of 4 points or a list of them")
    array = np.asarray(polygons, dtype=object)
    candidates = (
        [polygons]
        if array.ndim == 2 or (len(polygons) == 4 and np.ndim(polygons[0]) == 1)
        else polygons
    )
    quads = [np.asarray(p, np.float32) for p in candidates if np.shape(p) == (4, 2)]
    if not quads:
        raise ValueError("perspective_polygons has no polygon of exactly 4 points")
    return max(quads, key=lambda q: cv2.contourArea(q))


def _ordered(quad: np.ndarray) -> np.ndarray:
    """Clockwise (by angle about the bounding box's centre), from the corner nearest the
    bottom left."""
    cx = quad[:, 0].min() / 2 + quad[:, 0].max() / 2
    cy = quad[:, 1].min() / 2 + quad[:, 1].max() / 2
    clockwise = np.array(
        sorted(quad.tolist(), key=lambda p: math.atan2(cx - p[0], cy - p[1]), reverse=True),
        np.float32,
    )
    x0, y0, x1, y1 = quad[:, 0].min(), quad[:, 1].min(), quad[:, 0].max(), quad[:, 1].max()
    target = np.array([[x0, y1], [x0, y0], [x1, y0], [x1, y1]], np.float32)
    best = min(
        range(4),
        key=lambda s: (
            float(np.linalg.norm(np.roll(clockwise, s, axis=0) - target, axis=1).sum()),
            float(np.roll(clockwise, s, axis=0)[0][0]),
        ),
    )
    return np.roll(clockwise, best, axis=0)


def _anchors(detections: sv.Detections, anchor: str) -> np.ndarray:
    positions = list(sv.Position) if anchor == ALL else [sv.Position(anchor)]
    return np.concatenate([detections.get_anchors_coordinates(p) for p in positions])


def transform_for(
    polygon: Any, width: int, height: int, detections: sv.Detections | None, anchor: str
) -> tuple[np.ndarray, int, int]:
    """The homography, and the rectangle's width and height (grown to hold the anchors)."""
    source = _ordered(_largest(polygon))
    target = np.array(
        [[0, height - 1], [0, 0], [width - 1, 0], [width - 1, height - 1]], np.float32
    )
    matrix = cv2.getPerspectiveTransform(source, target)
    if not anchor or detections is None or not len(detections):
        return matrix, width, height
    mapped = cv2.perspectiveTransform(
        _anchors(detections, anchor)[None].astype(np.float32), matrix
    )[0]
    left, top = min(0.0, float(mapped[:, 0].min())), min(0.0, float(mapped[:, 1].min()))
    right = max(width - 1.0, float(mapped[:, 0].max()))
    bottom = max(height - 1.0, float(mapped[:, 1].max()))
    shift = np.array([[1, 0, -left], [0, 1, -top], [0, 0, 1]], np.float64)
    return shift @ matrix, round(right - left) + 1, round(bottom - top) + 1


def _moved(points: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    return cv2.perspectiveTransform(np.asarray(points, np.float32).reshape(1, -1, 2), matrix)[0]


def corrected(
    detections: sv.Detections, matrix: np.ndarray, size: tuple[int, int]
) -> sv.Detections:
    """Each box (as its four corners), mask (as its outline) and keypoint moved."""
    xyxy = np.zeros((len(detections), 4), np.float32)
    masks: list[np.ndarray] | None = [] if detections.mask is not None else None
    for i, (x1, y1, x2, y2) in enumerate(detections.xyxy):
        outline = np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]], np.float32)
        if masks is not None:
            outlines = sv.mask_to_polygons(np.asarray(detections.mask)[i])
            if outlines:
                moved = _moved(max(outlines, key=len), matrix).round().astype(np.int32)
                masks.append(sv.polygon_to_mask(moved, size).astype(bool))
                xyxy[i] = sv.polygon_to_xyxy(moved)
                continue
            masks.append(np.zeros((size[1], size[0]), bool))
        xyxy[i] = sv.polygon_to_xyxy(_moved(outline, matrix)).round()
    data = dict(detections.data)
    if "keypoints_xy" in data and len(detections):
        points = np.asarray(data["keypoints_xy"], np.float32)
        data["keypoints_xy"] = _moved(points, matrix).reshape(points.shape).round()
    mask = np.array(masks) if masks is not None else None
    out = replace(detections, xyxy=xyxy, mask=mask, data=data, metadata=dict(detections.metadata))
    out.metadata["image_size"] = size
    out.metadata.pop("parent_origin", None)
    return out


@dataclass(frozen=True, kw_only=True)
class PerspectiveSettings(BlockSettings):
    transformed_rect_width: int = setting(FieldSpec(default=1000, type="integer", minimum=1))
    transformed_rect_height: int = setting(FieldSpec(default=1000, type="integer", minimum=1))
    extend_perspective_polygon_by_detections_anchor: str = setting(
        FieldSpec(default="", choices=_ANCHORS)
    )
    warp_image: bool = setting(FieldSpec(default=False, type="boolean"))


class PerspectiveCorrectionBlock(Block):
    """``corrected_coordinates`` (the detections in the rectangle), ``warped_image`` (the
    image itself unless ``warp_image``) and the rectangle's ``extended_transformed_rect_*``."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/perspective_correction@v1",
        "PerspectiveCorrection",
    )
    passes_kind = "predictions"
    inputs = {
        "images": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),
        "image": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),  # the alias
        "predictions": FieldSpec(DETECTION_KINDS, default=None, takes=Takes.FRAME),
        "perspective_polygons": FieldSpec((ANY,), takes=Takes.FRAME_OR_LITERAL),
    }
    Settings: ClassVar[type[BlockSettings]] = PerspectiveSettings
    outputs = {
        "corrected_coordinates": DETECTIONS,
        "warped_image": IMAGE,
        "extended_transformed_rect_width": "integer",
        "extended_transformed_rect_height": "integer",
    }

    def __init__(self, name: str, config: PerspectiveSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.config = config
        self.limits = context.limits
        # The rectangle (warped image, masks) as written; grown by anchors, checked per frame.
        self.limits.check_pixels(
            name, config.transformed_rect_width, config.transformed_rect_height, compiling=True
        )

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        c = self.config
        image = inputs.get("images") or inputs.get("image")
        detections: sv.Detections | None = inputs.get("predictions")
        matrix, width, height = transform_for(
            inputs["perspective_polygons"],
            c.transformed_rect_width,
            c.transformed_rect_height,
            detections,
            c.extend_perspective_polygon_by_detections_anchor,
        )
        self.limits.check_pixels(self.name, width, height)
        warped = image
        if c.warp_image and image is not None:
            warped = image.derived(cv2.warpPerspective(image.numpy, matrix, (width, height)))
        return {
            "corrected_coordinates": corrected(detections, matrix, (width, height))
            if detections is not None
            else None,
            "warped_image": warped,
            "extended_transformed_rect_width": width,
            "extended_transformed_rect_height": height,
        }
