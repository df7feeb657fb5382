"""Letterbox preprocessing: keep the aspect ratio, pad, scale, reorder to NCHW."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

__all__ = ["Letterbox", "letterbox"]


@dataclass(frozen=True)
class Letterbox:
    """How network-input pixels map back to the original image."""

    scale: float
    pad_x: int
    pad_y: int

    def to_image(self, xyxy: np.ndarray) -> np.ndarray:
        out = xyxy.copy()
        out[:, [0, 2]] = (out[:, [0, 2]] - self.pad_x) / self.scale
        out[:, [1, 3]] = (out[:, [1, 3]] - self.pad_y) / self.scale
        return out


def letterbox(
    image: np.ndarray,
    width: int,
    height: int,
    *,
    fill: int = 128,
    scale: float = 1.0 / 255.0,
    swap_rb: bool = True,
) -> tuple[np.ndarray, Letterbox]:
    """BGR uint8 HxWx3 -> float32 [1, 3, height, width] blob and the mapping back."""
    h, w = image.shape[:2]
    ratio = min(width / w, height / h)
    new_w, new_h = max(1, round(w * ratio)), max(1, round(h * ratio))
    pad_x, pad_y = (width - new_w) // 2, (height - new_h) // 2
    canvas = np.full((height, width, 3), fill, dtype=np.uint8)
    canvas[pad_y : pad_y + new_h, pad_x : pad_x + new_w] = cv2.resize(
        image, (new_w, new_h), interpolation=cv2.INTER_LINEAR
    )
    blob = cv2.dnn.blobFromImage(canvas, scalefactor=scale, swapRB=swap_rb)
    return blob, Letterbox(ratio, pad_x, pad_y)
