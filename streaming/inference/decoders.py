"""Output decoders: raw model outputs -> ``supervision.Detections`` in network-input pixels.

Each decoder gets one image's outputs (batch dimension removed), in the model's output order,
and the manifest (for box formats and class offsets). The layouts are the common ONNX exports:

- ``yolov3`` / ``yolov5``: ``[N, 5 + nc]`` rows of cx, cy, w, h, objectness, class scores.
- ``yolov8`` / ``yolov11``: ``[4 + nc, N]`` columns of cx, cy, w, h, class scores (no
  objectness); a ``[N, 4 + nc]`` export is accepted too (told apart by which side is 4 + nc).
- ``ssd``: boxes ``[N, 4]``, scores ``[N]``, classes ``[N]`` (and optionally a detection
  count), NMS already done inside the model.
- ``detr``: boxes ``[Q, 4]`` (normalized cx, cy, w, h) and logits ``[Q, nc (+1)]``; softmax
  with a trailing "no object" class (DETR) or sigmoid per class (RT-DETR style).
- ``yolov8-seg`` / ``yolov11-seg``: ``[4 + nc + nm, N]`` columns (boxes, class scores, mask
  coefficients) and prototypes ``[nm, mh, mw]``: each mask is the sigmoid of its coefficients
  times the prototypes, cut to its box (kept at the prototypes' resolution here; the model
  maps it onto the frame).
- ``yolov8-pose`` / ``yolov11-pose``: ``[4 + nc + 3K, N]`` columns: boxes, class scores, and
  K keypoints as x, y (network pixels) and confidence.
- ``classification``: ``[nc]`` logits (softmax, or sigmoid for multi-label) or probabilities.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from math import ceil
from typing import TYPE_CHECKING

import cv2
import numpy as np
import supervision as sv

if TYPE_CHECKING:
    from .manifest import ModelManifest

__all__ = [
    "DECODERS",
    "ClassificationDecoder",
    "DecodeOptions",
    "Decoder",
    "DetectionDecoder",
    "get_decoder",
]


@dataclass(frozen=True)
class DecodeOptions:
    """Per-call post-processing: thresholds, class filter, NMS and how many detections to keep."""

    confidence: float = 0.25
    iou_threshold: float = 0.45
    class_filter: frozenset[int] | None = None
    max_detections: int = 300
    class_agnostic_nms: bool = False
    max_candidates: int = 3000


class Decoder:
    """Reads a model's raw outputs for one output layout."""

    outputs: int = 1
    """How many model outputs the decoder reads (at least)."""

    def __init__(self, manifest: ModelManifest) -> None:
        self.manifest = manifest

    def check(self, shapes: list[tuple[int | str | None, ...]]) -> None:
        """Raise ``ValueError`` when the model's output shapes (batch first) cannot be decoded."""
        if len(shapes) < self.outputs:
            raise ValueError(
                f"the {self.name} decoder needs {self.outputs} outputs, got {len(shapes)}"
            )

    @property
    def name(self) -> str:
        return self.manifest.decoder


class DetectionDecoder(Decoder, ABC):
    """Outputs -> detections (boxes; masks or keypoints in ``data`` for those layouts)."""

    @abstractmethod
    def decode(self, outputs: list[np.ndarray], options: DecodeOptions) -> sv.Detections:
        """One image's outputs -> detections in network-input pixels."""


def _kept_rows(
    xywh: np.ndarray, class_id: np.ndarray, confidence: np.ndarray, options: DecodeOptions
) -> np.ndarray:
    """Threshold, class filter, candidate cap and NMS on centre-format boxes: the indexes of
    the rows kept, best first."""
    index = np.flatnonzero(confidence > options.confidence)
    if options.class_filter is not None:
        index = index[np.isin(class_id[index], list(options.class_filter))]
    if len(index) > options.max_candidates:
        index = index[np.argsort(-confidence[index])[: options.max_candidates]]
    if len(index) == 0:
        return index
    boxes = xywh[index]
    corner = np.column_stack(
        [boxes[:, 0] - boxes[:, 2] / 2, boxes[:, 1] - boxes[:, 3] / 2, boxes[:, 2:4]]
    )
    classes = class_id[index]
    nms_classes = np.zeros_like(classes) if options.class_agnostic_nms else classes
    nms_kept = cv2.dnn.NMSBoxesBatched(
        corner.tolist(),
        confidence[index].tolist(),
        nms_classes.tolist(),
        options.confidence,
        options.iou_threshold,
    )
    kept = np.asarray(nms_kept, dtype=int).reshape(-1)[: options.max_detections]
    return index[kept]


def _detections(
    xywh: np.ndarray, class_id: np.ndarray, confidence: np.ndarray, rows: np.ndarray
) -> sv.Detections:
    if len(rows) == 0:
        return sv.Detections.empty()
    boxes = xywh[rows]
    xyxy = np.column_stack([boxes[:, :2] - boxes[:, 2:4] / 2, boxes[:, :2] + boxes[:, 2:4] / 2])
    return sv.Detections(
        xyxy=xyxy.astype(np.float32),
        confidence=confidence[rows].astype(np.float32),
        class_id=class_id[rows].astype(int),
    )


def _select(
    xywh: np.ndarray, class_id: np.ndarray, confidence: np.ndarray, options: DecodeOptions
) -> sv.Detections:
    """Threshold, class filter, candidate cap and NMS on centre-format boxes."""
    return _detections(xywh, class_id, confidence, _kept_rows(xywh, class_id, confidence, options))


class YoloV3Decoder(DetectionDecoder):
    """Rows of cx, cy, w, h, objectness, class probabilities (YOLOv3, YOLOv5)."""

    def decode(self, outputs: list[np.ndarray], options: DecodeOptions) -> sv.Detections:
        output = outputs[0]
        # Cheap pre-filter: a box cannot score above its objectness.
        rows = output[output[:, 4] > options.confidence]
        scores = rows[:, 5:] * rows[:, 4:5]
        class_id = scores.argmax(axis=1)
        confidence = scores[np.arange(len(rows)), class_id]
        return _select(rows[:, :4], class_id, confidence, options)

    def check(self, shapes: list[tuple[int | str | None, ...]]) -> None:
        super().check(shapes)
        expected = 5 + len(self.manifest.class_names)
        if len(shapes[0]) != 3 or shapes[0][-1] != expected:
            raise ValueError(f"{self.name} expects output [batch, N, {expected}], got {shapes[0]}")


class YoloV8Decoder(DetectionDecoder):
    """Columns of cx, cy, w, h, class scores (YOLOv8, YOLOv11): no objectness."""

    def decode(self, outputs: list[np.ndarray], options: DecodeOptions) -> sv.Detections:
        output = outputs[0]
        rows = _columns(output, 4 + len(self.manifest.class_names))
        scores = rows[:, 4:]
        class_id = scores.argmax(axis=1)
        confidence = scores[np.arange(len(rows)), class_id]
        return _select(rows[:, :4], class_id, confidence, options)

    def check(self, shapes: list[tuple[int | str | None, ...]]) -> None:
        super().check(shapes)
        expected = 4 + len(self.manifest.class_names)
        if len(shapes[0]) != 3 or expected not in shapes[0][1:]:
            raise ValueError(
                f"{self.name} expects output [batch, {expected}, N] or [batch, N, {expected}], "
                f"got {shapes[0]}"
            )


def _to_pixels(boxes: np.ndarray, manifest: ModelManifest) -> np.ndarray:
    """Manifest box format -> centre x, y, width, height in network-input pixels."""
    boxes = boxes.astype(np.float32, copy=True)
    if manifest.box_format == "yxyx":
        boxes = boxes[:, [1, 0, 3, 2]]
    if manifest.box_format in ("xyxy", "yxyx"):
        boxes = np.column_stack(
            [
                (boxes[:, 0] + boxes[:, 2]) / 2,
                (boxes[:, 1] + boxes[:, 3]) / 2,
                boxes[:, 2] - boxes[:, 0],
                boxes[:, 3] - boxes[:, 1],
            ]
        )
    if manifest.normalized_boxes:
        boxes[:, [0, 2]] *= manifest.input_width
        boxes[:, [1, 3]] *= manifest.input_height
    return boxes


class SSDDecoder(DetectionDecoder):
    """Boxes, scores, classes (and optionally a count): the model did its own NMS."""

    outputs = 3

    def decode(self, outputs: list[np.ndarray], options: DecodeOptions) -> sv.Detections:
        boxes, scores, classes = (np.asarray(o) for o in outputs[:3])
        count = len(scores)
        if len(outputs) > 3:  # TF-style num_detections
            count = min(count, int(np.asarray(outputs[3]).reshape(-1)[0]))
        boxes = _to_pixels(boxes.reshape(-1, 4)[:count], self.manifest)
        confidence = scores.reshape(-1)[:count].astype(np.float32)
        class_id = classes.reshape(-1)[:count].astype(int) - self.manifest.class_id_offset
        keep = (confidence > options.confidence) & (class_id >= 0)
        keep &= class_id < len(self.manifest.class_names)
        if options.class_filter is not None:
            keep &= np.isin(class_id, list(options.class_filter))
        boxes, confidence, class_id = boxes[keep], confidence[keep], class_id[keep]
        order = np.argsort(-confidence)[: options.max_detections]
        xyxy = np.column_stack([boxes[:, :2] - boxes[:, 2:] / 2, boxes[:, :2] + boxes[:, 2:] / 2])
        if len(order) == 0:
            return sv.Detections.empty()
        return sv.Detections(
            xyxy=xyxy[order].astype(np.float32),
            confidence=confidence[order],
            class_id=class_id[order],
        )


class DETRDecoder(DetectionDecoder):
    """Queries of normalized boxes and class logits; no NMS (set prediction)."""

    outputs = 2

    def decode(self, outputs: list[np.ndarray], options: DecodeOptions) -> sv.Detections:
        boxes, logits = outputs[0].reshape(-1, 4), outputs[1]
        logits = logits.reshape(len(boxes), -1).astype(np.float32)
        if self.manifest.logits == "softmax":
            exp = np.exp(logits - logits.max(axis=1, keepdims=True))
            probabilities = (exp / exp.sum(axis=1, keepdims=True))[:, :-1]  # last: no object
        else:
            probabilities = 1.0 / (1.0 + np.exp(-logits))
        class_id = probabilities.argmax(axis=1)
        confidence = probabilities[np.arange(len(boxes)), class_id]
        pixels = _to_pixels(boxes, self.manifest)
        keep = confidence > options.confidence
        if options.class_filter is not None:
            keep &= np.isin(class_id, list(options.class_filter))
        pixels, class_id, confidence = pixels[keep], class_id[keep], confidence[keep]
        if len(pixels) == 0:
            return sv.Detections.empty()
        order = np.argsort(-confidence)[: options.max_detections]
        xyxy = np.column_stack(
            [pixels[:, :2] - pixels[:, 2:] / 2, pixels[:, :2] + pixels[:, 2:] / 2]
        )
        return sv.Detections(
            xyxy=xyxy[order].astype(np.float32),
            confidence=confidence[order].astype(np.float32),
            class_id=class_id[order].astype(int),
        )


def _columns(output: np.ndarray, width: int) -> np.ndarray:
    """A ``[width, N]`` (or ``[N, width]``) output as ``[N, width]`` rows."""
    return output.T if output.shape[0] == width and output.shape[1] != width else output


def _sigmoid(values: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-values))


class YoloV8SegDecoder(DetectionDecoder):
    """Boxes, class scores and mask coefficients, and the prototypes they weigh."""

    outputs = 2

    def decode(self, outputs: list[np.ndarray], options: DecodeOptions) -> sv.Detections:
        protos = outputs[1]
        classes = len(self.manifest.class_names)
        rows = _columns(outputs[0], 4 + classes + protos.shape[0])
        scores = rows[:, 4 : 4 + classes]
        class_id = scores.argmax(axis=1)
        confidence = scores[np.arange(len(rows)), class_id]
        kept = _kept_rows(rows[:, :4], class_id, confidence, options)
        detections = _detections(rows[:, :4], class_id, confidence, kept)
        channels, height, width = protos.shape
        coefficients = rows[kept, 4 + classes :].astype(np.float32)
        # Each mask only inside its box (in the prototypes' grid): nothing of it lies outside,
        # so only the box's cells are computed.
        masks = np.zeros((len(kept), height, width), np.float32)
        sx, sy = width / self.manifest.input_width, height / self.manifest.input_height
        for i, (x1, y1, x2, y2) in enumerate(detections.xyxy):
            left, right = max(0, ceil(x1 * sx)), min(width, ceil(x2 * sx))
            top, bottom = max(0, ceil(y1 * sy)), min(height, ceil(y2 * sy))
            if right <= left or bottom <= top:
                continue
            cells = protos[:, top:bottom, left:right].reshape(channels, -1)
            patch = _sigmoid(coefficients[i] @ cells.astype(np.float32, copy=False))
            masks[i, top:bottom, left:right] = patch.reshape(bottom - top, right - left)
        detections.data["proto_masks"] = masks.astype(np.float32)
        return detections

    def check(self, shapes: list[tuple[int | str | None, ...]]) -> None:
        super().check(shapes)
        if len(shapes[1]) != 4 or not isinstance(shapes[1][1], int):
            raise ValueError(f"{self.name} expects prototypes [batch, nm, mh, mw], got {shapes[1]}")
        expected = 4 + len(self.manifest.class_names) + shapes[1][1]
        if len(shapes[0]) != 3 or expected not in shapes[0][1:]:
            raise ValueError(
                f"{self.name} expects output [batch, {expected}, N] (4 + classes + "
                f"{shapes[1][1]} mask coefficients), got {shapes[0]}"
            )


class YoloV8PoseDecoder(DetectionDecoder):
    """Boxes, class scores and K keypoints (x, y, confidence) per row."""

    def decode(self, outputs: list[np.ndarray], options: DecodeOptions) -> sv.Detections:
        classes = len(self.manifest.class_names)
        points = len(self.manifest.keypoint_names)
        rows = _columns(outputs[0], 4 + classes + 3 * points)
        scores = rows[:, 4 : 4 + classes]
        class_id = scores.argmax(axis=1)
        confidence = scores[np.arange(len(rows)), class_id]
        kept = _kept_rows(rows[:, :4], class_id, confidence, options)
        detections = _detections(rows[:, :4], class_id, confidence, kept)
        keypoints = rows[kept, 4 + classes :].reshape(len(kept), points, 3).astype(np.float32)
        detections.data["keypoints_xy"] = keypoints[:, :, :2]
        detections.data["keypoints_confidence"] = keypoints[:, :, 2]
        return detections

    def check(self, shapes: list[tuple[int | str | None, ...]]) -> None:
        super().check(shapes)
        points = len(self.manifest.keypoint_names)
        expected = 4 + len(self.manifest.class_names) + 3 * points
        if len(shapes[0]) != 3 or expected not in shapes[0][1:]:
            raise ValueError(
                f"{self.name} expects output [batch, {expected}, N] (4 + classes + 3 x "
                f"{points} keypoints), got {shapes[0]}"
            )


class ClassificationDecoder(Decoder):
    """Class scores -> each class's probability."""

    def probabilities(self, outputs: list[np.ndarray]) -> np.ndarray:
        scores = np.asarray(outputs[0], np.float32).reshape(-1)
        if self.manifest.logits == "probabilities":
            return scores
        if self.manifest.logits == "sigmoid" or self.manifest.task != "classification":
            return _sigmoid(scores)  # multi-label: each class on its own
        exp = np.exp(scores - scores.max())
        return exp / exp.sum()

    def check(self, shapes: list[tuple[int | str | None, ...]]) -> None:
        super().check(shapes)
        classes = len(self.manifest.class_names)
        if shapes[0][1:] != (classes,):
            raise ValueError(f"{self.name} expects output [batch, {classes}], got {shapes[0]}")


DECODERS: dict[str, type[Decoder]] = {
    "yolov3": YoloV3Decoder,
    "yolov5": YoloV3Decoder,
    "yolov8": YoloV8Decoder,
    "yolov11": YoloV8Decoder,
    "ssd": SSDDecoder,
    "detr": DETRDecoder,
    "yolov8-seg": YoloV8SegDecoder,
    "yolov11-seg": YoloV8SegDecoder,
    "yolov8-pose": YoloV8PoseDecoder,
    "yolov11-pose": YoloV8PoseDecoder,
    "classification": ClassificationDecoder,
}


def get_decoder(manifest: ModelManifest) -> Decoder:
    try:
        return DECODERS[manifest.decoder](manifest)
    except KeyError:
        known = ", ".join(DECODERS)
        raise ValueError(f"unknown decoder '{manifest.decoder}' (known: {known})") from None
