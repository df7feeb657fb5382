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
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

import cv2
import numpy as np
import supervision as sv

if TYPE_CHECKING:
    from .manifest import ModelManifest

__all__ = ["DECODERS", "DecodeOptions", "Decoder", "get_decoder"]


@dataclass(frozen=True)
class DecodeOptions:
    """Per-call post-processing: thresholds, class filter, NMS and how many detections to keep."""

    confidence: float = 0.25
    iou_threshold: float = 0.45
    class_filter: frozenset[int] | None = None
    max_detections: int = 300
    class_agnostic_nms: bool = False
    max_candidates: int = 3000


class Decoder(ABC):
    """Turns a model's raw outputs into detections for one output layout (yolov3, yolov5/v8,
    SSD, DETR-style)."""

    outputs: int = 1
    """How many model outputs the decoder reads (at least)."""

    def __init__(self, manifest: ModelManifest) -> None:
        self.manifest = manifest

    @abstractmethod
    def decode(self, outputs: list[np.ndarray], options: DecodeOptions) -> sv.Detections:
        """One image's outputs -> detections in network-input pixels."""

    def check(self, shapes: list[tuple[int | str | None, ...]]) -> None:
        """Raise ``ValueError`` when the model's output shapes (batch first) cannot be decoded."""
        if len(shapes) < self.outputs:
            raise ValueError(
                f"the {self.name} decoder needs {self.outputs} outputs, got {len(shapes)}"
            )

    @property
    def name(self) -> str:
        return self.manifest.decoder


def _select(
    xywh: np.ndarray, class_id: np.ndarray, confidence: np.ndarray, options: DecodeOptions
) -> sv.Detections:
    """Threshold, class filter, candidate cap and NMS on centre-format boxes."""
    keep = confidence > options.confidence
    if options.class_filter is not None:
        keep &= np.isin(class_id, list(options.class_filter))
    xywh, class_id, confidence = xywh[keep], class_id[keep], confidence[keep]
    if len(xywh) > options.max_candidates:
        top = np.argsort(-confidence)[: options.max_candidates]
        xywh, class_id, confidence = xywh[top], class_id[top], confidence[top]
    if len(xywh) == 0:
        return sv.Detections.empty()
    corner = np.column_stack(
        [xywh[:, 0] - xywh[:, 2] / 2, xywh[:, 1] - xywh[:, 3] / 2, xywh[:, 2:4]]
    )
    nms_classes = np.zeros_like(class_id) if options.class_agnostic_nms else class_id
    nms_kept = cv2.dnn.NMSBoxesBatched(
        corner.tolist(),
        confidence.tolist(),
        nms_classes.tolist(),
        options.confidence,
        options.iou_threshold,
    )
    kept = np.asarray(nms_kept, dtype=int).reshape(-1)[: options.max_detections]
    xyxy = corner[kept].copy()
    xyxy[:, 2:] += xyxy[:, :2]
    return sv.Detections(
        xyxy=xyxy.astype(np.float32),
        confidence=confidence[kept].astype(np.float32),
        class_id=class_id[kept].astype(int),
    )


class YoloV3Decoder(Decoder):
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


class YoloV8Decoder(Decoder):
    """Columns of cx, cy, w, h, class scores (YOLOv8, YOLOv11): no objectness."""

    def decode(self, outputs: list[np.ndarray], options: DecodeOptions) -> sv.Detections:
        output = outputs[0]
        width = 4 + len(self.manifest.class_names)
        rows = output.T if output.shape[0] == width and output.shape[1] != width else output
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
            [(boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2,
             boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]]
        )  # fmt: skip
    if manifest.normalized_boxes:
        boxes[:, [0, 2]] *= manifest.input_width
        boxes[:, [1, 3]] *= manifest.input_height
    return boxes


class SSDDecoder(Decoder):
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


class DETRDecoder(Decoder):
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


DECODERS: dict[str, type[Decoder]] = {
    "yolov3": YoloV3Decoder,
    "yolov5": YoloV3Decoder,
    "yolov8": YoloV8Decoder,
    "yolov11": YoloV8Decoder,
    "ssd": SSDDecoder,
    "detr": DETRDecoder,
}


def get_decoder(manifest: ModelManifest) -> Decoder:
    try:
        return DECODERS[manifest.decoder](manifest)
    except KeyError:
        known = ", ".join(DECODERS)
        raise ValueError(f"unknown decoder '{manifest.decoder}' (known: {known})") from None
