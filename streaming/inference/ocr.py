"""Reading text: PP-OCRv4's three networks (text detection, angle classification, text
recognition) on our own sessions, with the pre- and post-processing PaddleOCR describes.

Detection is a Differentiable Binarization map: the pixels above ``thresh`` form regions,
each region's rotated rectangle is kept when the map's mean inside it reaches ``box_thresh``,
then grown by ``unclip_ratio`` (the network predicts shrunk text kernels). Each region is
cut out upright, turned when the angle classifier says it is upside down, and read by CTC:
the best character per column, repeats and blanks dropped. All of a call's regions are read
in one recognition run (their widths padded to the widest).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import supervision as sv

from ..errors import ModelError
from .batcher import DynamicBatcher
from .decoders import DecodeOptions
from .manifest import ModelManifest
from .model import DetectionModel, StageTimer
from .session import InferenceSession

__all__ = ["TextLine", "TextReader", "charset_of", "ctc_decode", "text_regions"]

_DET_MIN_SIDE = 96
"""Small images (a crop of a plate) are scaled up until their short side has this many
pixels; rapidocr's 736 cost 8x the time here for the same text (measured on rendered text)."""
_DET_MAX_SIDE = 960
"""Large images are scaled down until their long side has this many (PaddleOCR's
``det_limit_side_len``); then both sides go to multiples of 32."""
_THRESH = 0.3
_BOX_THRESH = 0.5
_UNCLIP_RATIO = 1.6
_MIN_SIDE = 3
_MAX_REGIONS = 1000
_REC_HEIGHT = 48
_REC_MIN_WIDTH = 320
_REC_MAX_WIDTH = 3200
_CLS_SHAPE = (48, 192)
_CLS_THRESH = 0.9


@dataclass(frozen=True)
class TextLine:
    """One region of text: its corners in image pixels (clockwise from top left), what it
    says, and how sure the recogniser is (mean of its characters' probabilities)."""

    quad: np.ndarray
    text: str
    confidence: float

    @property
    def xyxy(self) -> tuple[float, float, float, float]:
        x, y = self.quad[:, 0], self.quad[:, 1]
        return float(x.min()), float(y.min()), float(x.max()), float(y.max())


def _normalised(image: np.ndarray) -> np.ndarray:
    """BGR uint8 HxWx3 -> float32 3xHxW in [-1, 1] (PaddleOCR's mean 0.5, std 0.5)."""
    return (image.astype(np.float32) / 127.5 - 1.0).transpose(2, 0, 1)


def _detection_input(image: np.ndarray) -> np.ndarray:
    h, w = image.shape[:2]
    ratio = max(1.0, _DET_MIN_SIDE / min(h, w))
    ratio = min(ratio, _DET_MAX_SIDE / max(h, w))
    size = (max(32, round(w * ratio / 32) * 32), max(32, round(h * ratio / 32) * 32))
    return _normalised(cv2.resize(image, size))[None]


def _ordered(points: np.ndarray) -> np.ndarray:
    """A rectangle's corners from top left, clockwise."""
    by_x = points[np.argsort(points[:, 0], kind="stable")]
    left = by_x[:2][np.argsort(by_x[:2, 1], kind="stable")]
    right = by_x[2:][np.argsort(by_x[2:, 1], kind="stable")]
    return np.array([left[0], right[0], right[1], left[1]], dtype=np.float32)


def _region_score(prob: np.ndarray, points: np.ndarray) -> float:
    """The map's mean inside the polygon (over its bounding window only)."""
    h, w = prob.shape
    x0, y0 = np.clip(np.floor(points.min(0)).astype(int), 0, [w - 1, h - 1])
    x1, y1 = np.clip(np.ceil(points.max(0)).astype(int), 0, [w - 1, h - 1])
    mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), np.uint8)
    cv2.fillPoly(mask, [(points - [x0, y0]).round().astype(np.int32)], 1)
    window = prob[y0 : y1 + 1, x0 : x1 + 1]
    return float(window[mask.astype(bool)].mean()) if mask.any() else 0.0


def text_regions(prob: np.ndarray, image_size: tuple[int, int]) -> list[tuple[np.ndarray, float]]:
    """A detection map (HxW probabilities) -> text quads in the image's pixels (``image_size``
    is width, height) with their scores, top to bottom, then left to right."""
    mask = cv2.dilate((prob > _THRESH).astype(np.uint8), np.ones((2, 2), np.uint8))
    contours, _ = cv2.findContours(mask, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    scale = np.array([image_size[0] / prob.shape[1], image_size[1] / prob.shape[0]])
    found: list[tuple[np.ndarray, float]] = []
    for contour in contours[:_MAX_REGIONS]:
        (cx, cy), (rw, rh), angle = cv2.minAreaRect(contour)
        if min(rw, rh) < _MIN_SIDE:
            continue
        score = _region_score(prob, cv2.boxPoints(((cx, cy), (rw, rh), angle)))
        if score < _BOX_THRESH:
            continue
        # Unclipping a rectangle by the polygon offset D = A * r / L grows each side by 2D.
        grow = 2 * rw * rh * _UNCLIP_RATIO / (2 * (rw + rh))
        rw, rh = rw + grow, rh + grow
        if min(rw, rh) < _MIN_SIDE + 2:
            continue
        quad = _ordered(cv2.boxPoints(((cx, cy), (rw, rh), angle))) * scale
        quad[:, 0] = quad[:, 0].clip(0, image_size[0])
        quad[:, 1] = quad[:, 1].clip(0, image_size[1])
        found.append((quad.round().astype(np.float32), score))
    # Reading order: by the top-left corner's row (within 10 pixels: one line), then column.
    found.sort(key=lambda region: (float(region[0][0, 1]), float(region[0][0, 0])))
    for i in range(len(found) - 1):
        for j in range(i, -1, -1):
            a, b = found[j][0][0], found[j + 1][0][0]
            if abs(b[1] - a[1]) < 10 and b[0] < a[0]:
                found[j], found[j + 1] = found[j + 1], found[j]
            else:
                break
    return found


def _upright_crop(image: np.ndarray, quad: np.ndarray) -> np.ndarray:
    """The quad's pixels as an upright rectangle; tall ones turned to read left to right."""
    width = int(max(np.linalg.norm(quad[0] - quad[1]), np.linalg.norm(quad[2] - quad[3])))
    height = int(max(np.linalg.norm(quad[0] - quad[3]), np.linalg.norm(quad[1] - quad[2])))
    width, height = max(width, 1), max(height, 1)
    target = np.array([[0, 0], [width, 0], [width, height], [0, height]], np.float32)
    crop = cv2.warpPerspective(
        image,
        cv2.getPerspectiveTransform(quad.astype(np.float32), target),
        (width, height),
        borderMode=cv2.BORDER_REPLICATE,
        flags=cv2.INTER_CUBIC,
    )
    if height / width >= 1.5:
        crop = np.rot90(crop)
    return np.ascontiguousarray(crop)


def _padded(crops: list[np.ndarray], height: int, width: int) -> np.ndarray:
    """Each crop scaled to ``height`` (its width kept in proportion, at most ``width``),
    normalised and padded with zeros on the right."""
    batch = np.zeros((len(crops), 3, height, width), np.float32)
    for i, crop in enumerate(crops):
        h, w = crop.shape[:2]
        scaled = min(width, max(1, math.ceil(height * w / h)))
        batch[i, :, :, :scaled] = _normalised(cv2.resize(crop, (scaled, height)))
    return batch


def ctc_decode(probabilities: np.ndarray, charset: list[str]) -> tuple[str, float]:
    """One line's TxC probabilities -> its text and mean confidence. Class 0 is CTC's blank;
    the characters follow, then a space."""
    best = probabilities.argmax(axis=1)
    kept = np.ones(len(best), bool)
    kept[1:] = best[1:] != best[:-1]
    kept &= best != 0
    if not kept.any():
        return "", 0.0
    letters = [charset[i - 1] if i - 1 < len(charset) else " " for i in best[kept]]
    return "".join(letters), float(probabilities.max(axis=1)[kept].mean())


class TextReader(DetectionModel):
    """PP-OCR in the registry: ``session`` detects text (what ``/models`` and the metrics
    report); the recogniser and angle classifier are its parts."""

    def __init__(
        self,
        manifest: ModelManifest,
        session: InferenceSession,
        recogniser: InferenceSession,
        angle: InferenceSession | None,
        charset: list[str],
        chunk: int = 16,
    ) -> None:
        """``chunk``: the most text regions one recognition run takes (the model's batch
        size, at most ``VISIONSTREAM_MAX_CROP_BATCH``)."""
        # Not DetectionModel's decoders: nothing here is letterboxed or decoded per box.
        self.manifest = manifest
        self.session = session
        self.batcher = DynamicBatcher(session, name=manifest.name)
        self.inputs = []  # its detector takes any size: no fixed network inputs
        self.recogniser = recogniser
        self.angle = angle
        self.charset = charset
        self.chunk = max(1, chunk)

    def detect_many(
        self, images: list[np.ndarray], options: DecodeOptions, timer: StageTimer | None = None
    ) -> list[sv.Detections]:
        raise TypeError(f"model '{self.name}' reads text: use an OCR block")

    def classify_many(
        self, images: list[np.ndarray], timer: StageTimer | None = None
    ) -> list[np.ndarray]:
        raise TypeError(f"model '{self.name}' reads text: use an OCR block")

    def read_many(
        self, images: list[np.ndarray], timer: StageTimer | None = None, detect: bool = True
    ) -> list[list[TextLine]]:
        """Each BGR image's lines of text; ``detect=False`` reads each image as one line."""
        t0 = time.perf_counter()
        regions: list[list[np.ndarray]] = []
        for image in images:
            h, w = image.shape[:2]
            if min(h, w) < 2:
                regions.append([])
            elif not detect:
                regions.append([np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32)])
            else:
                regions.append([line.quad for line in self.locate(image)])
        # A whole image is read as it is (recognition alone, as PaddleOCR does it); a found
        # region is cut out upright, a tall one turned (vertical text).
        crops = [
            _upright_crop(image, quad) if detect else np.ascontiguousarray(image)
            for image, quads in zip(images, regions, strict=True)
            for quad in quads
        ]
        read = self._read(self._turned(crops)) if crops else []
        if timer is not None:
            timer["inference"] = timer.get("inference", 0.0) + (time.perf_counter() - t0) * 1000
        lines: list[list[TextLine]] = []
        at = 0
        for quads in regions:
            found = [
                TextLine(q, read[at + i][0].strip(), read[at + i][1]) for i, q in enumerate(quads)
            ]
            at += len(quads)
            lines.append([line for line in found if line.text.strip()])
        return lines

    def locate(self, image: np.ndarray) -> list[TextLine]:
        """Where the image has text, unread (the region's score as its confidence)."""
        h, w = image.shape[:2]
        if min(h, w) < 2:
            return []
        prob = self.session.run(_detection_input(image))[0][0, 0]
        return [TextLine(quad, "", score) for quad, score in text_regions(prob, (w, h))]

    def _turned(self, crops: list[np.ndarray]) -> list[np.ndarray]:
        """Crops the angle classifier finds upside down, turned (PaddleOCR's ``use_cls``)."""
        if self.angle is None:
            return crops
        height, width = _CLS_SHAPE
        turned = list(crops)
        for start in range(0, len(crops), self.chunk):
            chunk = crops[start : start + self.chunk]
            scores = self.angle.run(_padded(chunk, height, width))[0]
            for i, score in enumerate(scores):
                if int(score.argmax()) == 1 and float(score[1]) > _CLS_THRESH:
                    turned[start + i] = np.ascontiguousarray(np.rot90(chunk[i], 2))
        return turned

    def _read(self, crops: list[np.ndarray]) -> list[tuple[str, float]]:
        """Every crop in as few recognition runs as widths allow (sorted by width so that a
        run pads little)."""
        ratios = [c.shape[1] / c.shape[0] for c in crops]
        order = np.argsort(ratios, kind="stable")
        out: list[tuple[str, float]] = [("", 0.0)] * len(crops)
        for start in range(0, len(order), self.chunk):
            chunk = order[start : start + self.chunk]
            widest = max(ratios[i] for i in chunk)
            width = min(_REC_MAX_WIDTH, max(_REC_MIN_WIDTH, math.ceil(_REC_HEIGHT * widest)))
            probs = self.recogniser.run(_padded([crops[i] for i in chunk], _REC_HEIGHT, width))[0]
            for i, line in zip(chunk, probs, strict=True):
                out[i] = ctc_decode(line, self.charset)
        return out

    def warm_up(self, runs: int = 1) -> None:
        image = np.full((64, 256, 3), 255, np.uint8)
        cv2.putText(image, "warm", (10, 45), cv2.FONT_HERSHEY_SIMPLEX, 1.2, (0, 0, 0), 2)
        for _ in range(runs):
            self.read_many([image])

    def close(self) -> None:
        super().close()
        self.recogniser.close()
        if self.angle is not None:
            self.angle.close()


def charset_of(directory: Path, manifest: ModelManifest) -> list[str]:
    """The recogniser's characters: the manifest's ``charset`` part, a JSON list."""
    if "charset" not in manifest.parts:
        raise ModelError(f"model '{manifest.name}' lacks its charset (manifest 'parts')")
    charset = json.loads((directory / manifest.parts["charset"]).read_text(encoding="utf-8"))
    if not isinstance(charset, list) or not all(isinstance(c, str) for c in charset):
        raise ModelError(f"model '{manifest.name}': its charset is not a list of strings")
    return charset
