"""Frames -> network input: letterbox (keep the aspect ratio, pad) or stretch, scale,
optionally normalise per channel, reorder to NCHW; and the mapping back to the frame."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import cv2
import numpy as np

if TYPE_CHECKING:
    from .manifest import ModelManifest

__all__ = ["Letterbox", "letterbox", "prepare"]


@dataclass(frozen=True)
class Letterbox:
    """How network-input pixels map back to the original image."""

    scale: float
    pad_x: int
    pad_y: int
    scale_y: float | None = None
    """The vertical scale when it differs from ``scale`` (a stretched input)."""

    @property
    def sy(self) -> float:
        return self.scale if self.scale_y is None else self.scale_y

    def to_image(self, xyxy: np.ndarray) -> np.ndarray:
        out = xyxy.copy()
        out[:, [0, 2]] = (out[:, [0, 2]] - self.pad_x) / self.scale
        out[:, [1, 3]] = (out[:, [1, 3]] - self.pad_y) / self.sy
        return out

    def points_to_image(self, xy: np.ndarray) -> np.ndarray:
        """``[..., 2]`` points (keypoints) in network pixels -> image pixels."""
        out = xy.astype(np.float32, copy=True)
        out[..., 0] = (out[..., 0] - self.pad_x) / self.scale
        out[..., 1] = (out[..., 1] - self.pad_y) / self.sy
        return out

    def masks_to_image(
        self, masks: np.ndarray, network: tuple[int, int], image: tuple[int, int]
    ) -> np.ndarray:
        """``[N, mh, mw]`` mask probabilities on the network input's grid (``network``:
        width, height) -> ``[N, h, w]`` booleans on the image (``image``: width, height):
        the padding cut away at the masks' own resolution, then one resize each."""
        count, height, width = masks.shape
        image_w, image_h = image
        if count == 0:
            return np.zeros((0, image_h, image_w), dtype=bool)
        gx, gy = width / network[0], height / network[1]
        x1, y1 = round(self.pad_x * gx), round(self.pad_y * gy)
        x2 = max(x1 + 1, round((self.pad_x + image_w * self.scale) * gx))
        y2 = max(y1 + 1, round((self.pad_y + image_h * self.sy) * gy))
        out = np.empty((count, image_h, image_w), dtype=bool)
        for i in range(count):
            resized = cv2.resize(masks[i, y1:y2, x1:x2], (image_w, image_h))
            out[i] = resized > 0.5
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


def prepare(image: np.ndarray, manifest: ModelManifest) -> tuple[np.ndarray, Letterbox]:
    """A frame as ``manifest``'s network wants it, and the mapping back."""
    m = manifest
    swap = m.channel_order == "RGB"
    if m.resize == "stretch":
        h, w = image.shape[:2]
        resized = cv2.resize(image, (m.input_width, m.input_height), interpolation=cv2.INTER_LINEAR)
        blob = cv2.dnn.blobFromImage(resized, scalefactor=m.scale, swapRB=swap)
        box = Letterbox(m.input_width / w, 0, 0, scale_y=m.input_height / h)
    else:
        blob, box = letterbox(
            image, m.input_width, m.input_height, fill=m.letterbox_fill, scale=m.scale, swap_rb=swap
        )
    if m.mean is not None or m.std is not None:
        # Given in RGB order; the blob's channels are in the network's order.
        mean = np.array(m.mean or (0.0, 0.0, 0.0), np.float32)
        std = np.array(m.std or (1.0, 1.0, 1.0), np.float32)
        if not swap:
            mean, std = mean[::-1], std[::-1]
        blob = (blob - mean[None, :, None, None]) / std[None, :, None, None]
    return blob, box
