"""Frames -> network input: letterbox (keep the aspect ratio, pad) or stretch, scale,
optionally normalise per channel, reorder to NCHW; and the mapping back to the frame."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import cv2
import numpy as np

if TYPE_CHECKING:
    from .manifest import ModelManifest

__all__ = [
    "Letterbox",
    "Normalization",
    "aligned_offsets",
    "fitting_input",
    "letterbox",
    "letterboxed_canvas",
    "prepare",
]


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
        self,
        masks: np.ndarray,
        network: tuple[int, int],
        image: tuple[int, int],
        boxes: np.ndarray,
    ) -> np.ndarray:
        """``[N, mh, mw]`` mask probabilities on the network input's grid (``network``:
        width, height) -> ``[N, h, w]`` booleans on the image (``image``: width, height).
        A mask is zero outside its box (``boxes``, image pixels), so only the box is
        resampled: one affine warp from the grid straight onto the box's pixels."""
        count, height, width = masks.shape
        image_w, image_h = image
        out = np.zeros((count, image_h, image_w), dtype=bool)
        # Image pixel -> grid cell: through the letterbox onto the network input, then
        # down to the grid (pixel centres at +0.5, as cv2.resize samples them).
        kx, ky = self.scale * width / network[0], self.sy * height / network[1]
        ox, oy = self.pad_x * width / network[0], self.pad_y * height / network[1]
        for i, (x1, y1, x2, y2) in enumerate(boxes):
            left, top = max(0, int(x1)), max(0, int(y1))
            right, bottom = min(image_w, int(np.ceil(x2))), min(image_h, int(np.ceil(y2)))
            if right <= left or bottom <= top:
                continue
            warp = np.array(
                [[kx, 0, (left + 0.5) * kx + ox - 0.5], [0, ky, (top + 0.5) * ky + oy - 0.5]],
                np.float32,
            )
            patch = cv2.warpAffine(
                masks[i],
                warp,
                (right - left, bottom - top),
                flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
            )
            out[i, top:bottom, left:right] = patch > 0.5
        return out


def letterbox(
    image: np.ndarray,
    width: int,
    height: int,
    *,
    fill: int = 128,
    scale: float = 1.0 / 255.0,
    swap_rb: bool = True,
    main: tuple[int, int] | None = None,
    stride: int = 32,
) -> tuple[np.ndarray, Letterbox]:
    """BGR uint8 HxWx3 -> float32 [1, 3, height, width] blob and the mapping back. The
    image is scaled to fit and centred; on one of a network's input variants (``main``: the
    main input's width and height) it is scaled as for the main input and placed where
    ``aligned_offsets`` says, so the network sees what the main input would show it."""
    canvas, box = letterboxed_canvas(image, width, height, fill=fill, main=main, stride=stride)
    return cv2.dnn.blobFromImage(canvas, scalefactor=scale, swapRB=swap_rb), box


def letterboxed_canvas(
    image: np.ndarray,
    width: int,
    height: int,
    *,
    fill: int = 128,
    main: tuple[int, int] | None = None,
    stride: int = 32,
) -> tuple[np.ndarray, Letterbox]:
    """``letterbox``'s first half: the BGR uint8 height x width x 3 canvas, not yet a blob."""
    h, w = image.shape[:2]
    main_w, main_h = main or (width, height)
    ratio = min(main_w / w, main_h / h)
    new_w, new_h = max(1, round(w * ratio)), max(1, round(h * ratio))
    pads = aligned_offsets((new_w, new_h), (width, height), (main_w, main_h), stride)
    if pads is None:
        raise ValueError(f"a {w}x{h} image does not fit the {width}x{height} input")
    pad_x, pad_y = pads
    canvas = np.full((height, width, 3), fill, dtype=np.uint8)
    canvas[pad_y : pad_y + new_h, pad_x : pad_x + new_w] = cv2.resize(
        image, (new_w, new_h), interpolation=cv2.INTER_LINEAR
    )
    return canvas, Letterbox(ratio, pad_x, pad_y)


@dataclass(frozen=True)
class Normalization:
    """What turns a BGR uint8 canvas into the network's input after the resize: channel
    order, scale, and the per-channel mean and std in the network's channel order. A session
    that does it on its device takes canvases instead of blobs
    (``InferenceSession.takes_canvases``): a quarter of the bytes to copy up."""

    swap_rb: bool
    scale: float
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    @classmethod
    def of(cls, m: ModelManifest) -> Normalization:
        swap = m.channel_order == "RGB"
        if m.mean is None and m.std is None:
            return cls(swap, m.scale)
        # Given in RGB order; the network's channels may be the other way round.
        mean, std = list(m.mean or (0.0, 0.0, 0.0)), list(m.std or (1.0, 1.0, 1.0))
        if not swap:
            mean, std = mean[::-1], std[::-1]
        return cls(swap, m.scale, tuple(mean), tuple(std))


def aligned_offsets(
    scaled: tuple[int, int], size: tuple[int, int], main: tuple[int, int], stride: int
) -> tuple[int, int] | None:
    """Where a scaled image (width, height) goes on an input of ``size``: centred on the
    main input (``size == main``); on a variant, at the main input's offset modulo the
    network's ``stride``, as near the centre as that allows. A detector's grid repeats
    every ``stride`` pixels, so an image placed in the same phase gives the main input's
    detections (measured: within 0.03 of score and 1 px), where merely centring it on the
    smaller input shifts it by up to half a cell and changes them as much as moving it
    would. None when the image does not fit."""
    offsets = []
    for scaled_n, size_n, main_n in zip(scaled, size, main, strict=True):
        room, phase = size_n - scaled_n, ((main_n - scaled_n) // 2) % stride
        if room < phase:
            return None
        steps = min(max(0, round((room // 2 - phase) / stride)), (room - phase) // stride)
        offsets.append(phase + steps * stride)
    return offsets[0], offsets[1]


def fitting_input(image: tuple[int, int], inputs: list[tuple[int, int]], stride: int = 32) -> int:
    """Which of a network's input sizes (width, height; the main one first) an image of
    ``image``'s size runs on: the one with the fewest pixels that holds it scaled as for
    the main input and placed as ``aligned_offsets`` says. So a 16:9 frame takes a 416x288
    rectangle where the main input is 416x416 (the detections do not change; 64 % of the
    CPU), while a 4:3 frame, which does not fit 288 rows at that scale, stays on the square."""
    width, height = image
    main_w, main_h = inputs[0]
    ratio = min(main_w / width, main_h / height)
    scaled = max(1, round(width * ratio)), max(1, round(height * ratio))
    best = 0
    for index, (w, h) in enumerate(inputs):
        fits = aligned_offsets(scaled, (w, h), inputs[0], stride) is not None
        if fits and w * h < inputs[best][0] * inputs[best][1]:
            best = index
    return best


def prepare(
    image: np.ndarray,
    manifest: ModelManifest,
    main: tuple[int, int] | None = None,
    canvas: bool = False,
) -> tuple[np.ndarray, Letterbox]:
    """A frame as ``manifest``'s network wants it, and the mapping back (``main``: the
    main input's size, where ``manifest`` is one of its input variants); with ``canvas``,
    resized only: ``[1, height, width, 3]`` BGR uint8, for a session that normalises
    (``Normalization``) on its device."""
    m = manifest
    if m.resize == "stretch":
        h, w = image.shape[:2]
        resized = cv2.resize(image, (m.input_width, m.input_height), interpolation=cv2.INTER_LINEAR)
        box = Letterbox(m.input_width / w, 0, 0, scale_y=m.input_height / h)
    else:
        resized, box = letterboxed_canvas(
            image,
            m.input_width,
            m.input_height,
            fill=m.letterbox_fill,
            main=main,
            stride=m.input_stride,
        )
    if canvas:
        return resized[None], box
    norm = Normalization.of(m)
    blob = cv2.dnn.blobFromImage(resized, scalefactor=norm.scale, swapRB=norm.swap_rb)
    if norm.mean is not None and norm.std is not None:
        mean, std = np.array(norm.mean, np.float32), np.array(norm.std, np.float32)
        blob = (blob - mean[None, :, None, None]) / std[None, :, None, None]
    return blob, box
