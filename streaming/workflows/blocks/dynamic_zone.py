"""``dynamic_zone``: a zone drawn by a segmentation model (a road, a shelf, a table top):
each mask's outline simplified to a polygon of ``required_number_of_vertices`` (its convex
hull, Douglas-Peucker with the tolerance bisected until the count is met), optionally its
sides refitted to the outline by least squares (``apply_least_squares``, on the middle
``midpoint_fraction`` of each side), scaled about its centroid by ``scale_ratio``; the
polygons as ``zones`` (for ``time_in_zone``, ``polygon_zone_visualization``...) and the
detections with the polygon as their mask."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar

import cv2
import numpy as np
import supervision as sv

from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import SEGMENTATION, FieldSpec, Takes, fraction

__all__ = ["DynamicZoneBlock", "least_squares_polygon", "simplified_polygon"]

_MAX_STEPS = 1000


def simplified_polygon(contour: np.ndarray, vertices: int) -> np.ndarray:
    """The hull of ``contour`` (N x 2) with ``vertices`` corners, or as near as bisection
    gets (then a count off by some)."""
    hull = cv2.convexHull(contour.astype(np.int32).reshape(-1, 1, 2), clockwise=True)
    low, high = 1e-7, cv2.arcLength(hull, True)
    epsilon = low + high / 2
    polygon = cv2.approxPolyDP(hull, epsilon, True)
    for _ in range(_MAX_STEPS):
        if len(polygon) == vertices:
            break
        if len(polygon) > vertices:
            low = epsilon
        else:
            high = epsilon
        epsilon = low + (high - low) / 2
        polygon = cv2.approxPolyDP(hull, epsilon, True)
    return polygon.reshape(-1, 2)


def least_squares_polygon(contour: np.ndarray, polygon: np.ndarray, middle: float) -> np.ndarray:
    """Each side refitted (y = a x + b) to the outline points between its two corners, the
    corners moved to where neighbouring sides meet; a corner whose sides are parallel (or a
    side with under two points) keeps its place."""

    def nearest(point: np.ndarray) -> int:
        return int(np.argmin(np.linalg.norm(contour - point, axis=1)))

    lines: list[tuple[float, float] | None] = []
    for start, end in zip(np.roll(polygon, 1, axis=0), polygon, strict=True):
        i, j = nearest(start), nearest(end)
        points = contour[i : j + 1] if i <= j else np.concatenate([contour[i:], contour[: j + 1]])
        if middle < 1 and round(len(points) * middle) > 2:
            cut = (len(points) - round(len(points) * middle)) // 2
            points = points[cut : len(points) - cut]
        if len(points) < 2 or np.ptp(points[:, 0]) == 0:
            lines.append(None)
            continue
        a, b = np.polyfit(points[:, 0].astype(float), points[:, 1].astype(float), 1)
        lines.append((float(a), float(b)))
    corners = []
    for k in range(len(lines)):
        first, second = lines[k], lines[(k + 1) % len(lines)]
        if first is None or second is None or np.isclose(first[0], second[0]):
            corners.append(polygon[k].astype(float))
            continue
        x = (second[1] - first[1]) / (first[0] - second[0])
        corners.append(np.array([x, first[0] * x + first[1]]))
    return np.array(corners).round().astype(np.int32)


def _scaled(polygon: np.ndarray, scale: float) -> np.ndarray:
    moments = cv2.moments(polygon.astype(np.int32))
    if scale == 1 or moments["m00"] == 0:
        return polygon
    centre = np.array([moments["m10"], moments["m01"]]) / moments["m00"]
    return ((polygon - centre) * scale + centre).round().astype(np.int32)


@dataclass(frozen=True, kw_only=True)
class DynamicZoneSettings(BlockSettings):
    required_number_of_vertices: int = setting(FieldSpec(type="integer", minimum=3))
    scale_ratio: float = setting(FieldSpec(default=1.0, type="number", above=0))
    apply_least_squares: bool = setting(FieldSpec(default=False, type="boolean"))
    midpoint_fraction: float = setting(fraction(1.0))


class DynamicZoneBlock(Block):
    """``zones`` (a polygon per mask), ``predictions`` (each with its polygon as mask) and
    ``simplification_converged`` (every polygon has the count asked for)."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/dynamic_zone@v1", "DynamicZone")
    inputs = {"predictions": FieldSpec((SEGMENTATION,), takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = DynamicZoneSettings
    outputs = {
        "zones": "list_of_values",
        "predictions": SEGMENTATION,
        "simplification_converged": "boolean",
    }

    def __init__(self, name: str, config: DynamicZoneSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.config = config

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        detections: sv.Detections = inputs["predictions"]
        if detections.mask is None:
            return {"zones": [], "predictions": None, "simplification_converged": False}
        c = self.config
        wanted = c.required_number_of_vertices
        zones: list[list[Any]] = []
        masks: list[np.ndarray] = []
        converged = True
        for mask in np.asarray(detections.mask):
            outlines = sv.mask_to_polygons(mask)
            if not outlines:
                converged = False
                zones.append([])
                masks.append(np.zeros(mask.shape, bool))
                continue
            outline = max(outlines, key=len)
            polygon = simplified_polygon(outline, wanted)
            if c.apply_least_squares:
                polygon = least_squares_polygon(outline, polygon, c.midpoint_fraction)
            if len(polygon) != wanted:  # the reference pads with the last corner, or cuts
                converged = False
                polygon = np.concatenate(
                    [polygon, np.repeat(polygon[-1:], max(0, wanted - len(polygon)), 0)]
                )[:wanted]
            polygon = _scaled(polygon, c.scale_ratio)
            zones.append(polygon.tolist())
            masks.append(sv.polygon_to_mask(polygon, mask.shape[::-1]).astype(bool))
        shaped = copy.copy(detections)
        shaped.mask = np.array(masks)
        return {"zones": zones, "predictions": shaped, "simplification_converged": converged}
