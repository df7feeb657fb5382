"""``camera_focus``: how sharp the image is. v1 is Brenner's measure (the mean squared
two-pixel step) with its map as the image; v2 is Tenengrad (the mean squared Sobel
gradient), per detection too, over the image with a camera operator's aids: zebra stripes
where it is under- or over-exposed, focus peaking (the sharpest edges in green), a grid, a
centre mark and a panel with the value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import cv2
import numpy as np
import supervision as sv

from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import DETECTION_KINDS, IMAGE, FieldSpec, Takes
from .image_ops import grey as in_grey

__all__ = ["CameraFocusBlock", "CameraFocusV2Block", "brenner", "tenengrad"]

_GRIDS = {"None": 0, "2x2": 2, "3x3": 3, "4x4": 4, "5x5": 5}


def brenner(pixels: np.ndarray) -> tuple[np.ndarray, float]:
    """Brenner's measure per pixel (the larger of the rightward and downward two-pixel
    rises, squared) and its mean."""
    grey = in_grey(pixels).astype(np.int32)
    rise = np.zeros(grey.shape, np.int64)
    rise[:, :-2] = np.clip(grey[:, 2:] - grey[:, :-2], 0, None)
    down = np.zeros(grey.shape, np.int64)
    down[:-2, :] = np.clip(grey[2:, :] - grey[:-2, :], 0, None)
    measure = np.maximum(rise, down) ** 2
    return measure, float(measure.mean())


def tenengrad(pixels: np.ndarray) -> np.ndarray:
    """The squared Sobel gradient per pixel."""
    grey = in_grey(pixels)
    gx = cv2.Sobel(grey, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(grey, cv2.CV_32F, 0, 1, ksize=3)
    return gx * gx + gy * gy


class CameraFocusBlock(Block):
    """v1: ``focus_measure`` (Brenner's) and ``image``, its map with the value written."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/camera_focus@v1",)
    inputs = {"image": FieldSpec((IMAGE,), takes=Takes.FRAME)}
    outputs = {"image": IMAGE, "focus_measure": "float"}

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image = inputs["image"]
        measure, value = brenner(image.numpy)
        peak = float(measure.max())
        shown = (
            (measure / peak * 255).astype(np.uint8)
            if peak > 0
            else np.zeros_like(measure, np.uint8)
        )
        cv2.putText(
            shown, f"Focus value: {value:.2f}", (10, 30), cv2.FONT_HERSHEY_SIMPLEX, 1, 255, 2
        )
        return {
            "image": image.derived(cv2.cvtColor(shown, cv2.COLOR_GRAY2BGR)),
            "focus_measure": value,
        }


@dataclass(frozen=True, kw_only=True)
class FocusV2Settings(BlockSettings):
    underexposed_threshold_percent: float = setting(
        FieldSpec(default=3.0, type="number", minimum=0, maximum=100)
    )
    overexposed_threshold_percent: float = setting(
        FieldSpec(default=97.0, type="number", minimum=0, maximum=100)
    )
    show_zebra_warnings: bool = setting(FieldSpec(default=True, type="boolean"))
    grid_overlay: Literal["None", "2x2", "3x3", "4x4", "5x5"] = setting(
        FieldSpec(default="3x3", choices=tuple(_GRIDS))
    )
    show_hud: bool = setting(FieldSpec(default=True, type="boolean"))
    show_focus_peaking: bool = setting(FieldSpec(default=True, type="boolean"))
    show_center_marker: bool = setting(FieldSpec(default=True, type="boolean"))


class CameraFocusV2Block(Block):
    """v2: ``focus_measure`` (Tenengrad), ``bbox_focus_measures`` (the mean inside each of
    ``detections``' boxes; None for a box outside the image) and ``image`` with the aids
    asked for (the image itself when none is)."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/camera_focus@v2",)
    inputs = {
        "image": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "detections": FieldSpec(DETECTION_KINDS, default=None, takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = FocusV2Settings
    outputs = {"image": IMAGE, "focus_measure": "float", "bbox_focus_measures": "list_of_values"}

    def __init__(self, name: str, config: FocusV2Settings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.config = config

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image = inputs["image"]
        pixels = image.numpy
        measure = tenengrad(pixels)
        value = float(measure.mean())
        detections: sv.Detections | None = inputs.get("detections")
        height, width = measure.shape
        per_box: list[float | None] = []
        for x1, y1, x2, y2 in detections.xyxy.astype(int) if detections is not None else []:
            x1, y1, x2, y2 = max(0, x1), max(0, y1), min(width, x2), min(height, y2)
            per_box.append(float(measure[y1:y2, x1:x2].mean()) if x2 > x1 and y2 > y1 else None)
        shown = self._aids(pixels, measure, value)
        return {
            "image": image if shown is pixels else image.derived(shown),
            "focus_measure": value,
            "bbox_focus_measures": per_box,
        }

    def _aids(self, pixels: np.ndarray, measure: np.ndarray, value: float) -> np.ndarray:
        c = self.config
        grid = _GRIDS[c.grid_overlay]
        if not (
            c.show_zebra_warnings
            or c.show_hud
            or c.show_focus_peaking
            or c.show_center_marker
            or grid
        ):
            return pixels
        out = cv2.cvtColor(pixels, cv2.COLOR_GRAY2BGR) if pixels.ndim == 2 else pixels.copy()
        height, width = out.shape[:2]
        if c.show_zebra_warnings:
            grey = in_grey(pixels)
            y, x = np.ogrid[:height, :width]
            stripes = ((x + y) // 8) % 2 == 0
            for where, colour in (
                (grey < int(c.underexposed_threshold_percent * 255 / 100), (255, 0, 0)),
                (grey > int(c.overexposed_threshold_percent * 255 / 100), (0, 0, 255)),
            ):
                hit = where & stripes
                out[hit] = (out[hit] * 0.5 + np.array(colour) * 0.5).astype(np.uint8)
        if c.show_focus_peaking and measure.max() > 0:
            sharp = measure / measure.max() > 0.3
            out[sharp] = (out[sharp] * 0.4 + np.array((0, 255, 0)) * 0.6).astype(np.uint8)
        for i in range(1, grid):
            cv2.line(out, (width * i // grid, 0), (width * i // grid, height), (128, 128, 128), 1)
            cv2.line(out, (0, height * i // grid), (width, height * i // grid), (128, 128, 128), 1)
        scale = max(0.4, min(min(height, width) / 720, 2.5))
        if c.show_center_marker:
            size, thick = int(20 * scale), max(1, int(1.6 * scale))
            cx, cy = width // 2, height // 2
            cv2.line(out, (cx - size, cy), (cx + size, cy), (255, 255, 255), thick)
            cv2.line(out, (cx, cy - size), (cx, cy + size), (255, 255, 255), thick)
        if c.show_hud:
            text = f"Focus: {value:.1f}"
            origin = (int(14 * scale), int(30 * scale))
            thickness = max(1, int(2 * scale))
            for colour, width in (((0, 0, 0), thickness + 2), ((255, 255, 255), thickness)):
                # A black outline first, the white text on it: readable on any picture.
                cv2.putText(out, text, origin, cv2.FONT_HERSHEY_SIMPLEX, 0.6 * scale, colour, width)
        return out
