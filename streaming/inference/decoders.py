"""Output decoders: raw model output -> ``supervision.Detections`` in network-input pixels."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import cv2
import numpy as np
import supervision as sv

__all__ = ["DecodeOptions", "Decoder", "YoloV3Decoder", "get_decoder"]


@dataclass(frozen=True)
class DecodeOptions:
    confidence: float = 0.25
    iou_threshold: float = 0.45
    class_filter: frozenset[int] | None = None
    max_detections: int = 300
    class_agnostic_nms: bool = False
    max_candidates: int = 3000


class Decoder(ABC):
    @abstractmethod
    def decode(self, output: np.ndarray, options: DecodeOptions) -> sv.Detections:
        """One image's output (batch dimension removed) -> detections."""


class YoloV3Decoder(Decoder):
    """Rows of cx, cy, w, h, objectness, class probabilities; per-class NMS."""

    def decode(self, output: np.ndarray, options: DecodeOptions) -> sv.Detections:
        objectness = output[:, 4]
        # Cheap pre-filter: a box cannot score above its objectness.
        rows = output[objectness > options.confidence]
        scores = rows[:, 5:] * rows[:, 4:5]
        class_id = scores.argmax(axis=1)
        confidence = scores[np.arange(len(rows)), class_id]
        keep = confidence > options.confidence
        if options.class_filter is not None:
            keep &= np.isin(class_id, list(options.class_filter))
        rows, class_id, confidence = rows[keep], class_id[keep], confidence[keep]
        if len(rows) > options.max_candidates:
            top = np.argsort(-confidence)[: options.max_candidates]
            rows, class_id, confidence = rows[top], class_id[top], confidence[top]
        if len(rows) == 0:
            return sv.Detections.empty()
        xywh = np.column_stack(
            [rows[:, 0] - rows[:, 2] / 2, rows[:, 1] - rows[:, 3] / 2, rows[:, 2], rows[:, 3]]
        )
        nms_classes = np.zeros_like(class_id) if options.class_agnostic_nms else class_id
        kept = cv2.dnn.NMSBoxesBatched(
            xywh.tolist(),
            confidence.tolist(),
            nms_classes.tolist(),
            options.confidence,
            options.iou_threshold,
        )
        kept = np.asarray(kept, dtype=int).reshape(-1)[: options.max_detections]
        xyxy = xywh[kept].copy()
        xyxy[:, 2:] += xyxy[:, :2]
        return sv.Detections(
            xyxy=xyxy.astype(np.float32),
            confidence=confidence[kept].astype(np.float32),
            class_id=class_id[kept].astype(int),
        )


_DECODERS: dict[str, type[Decoder]] = {"yolov3": YoloV3Decoder}


def get_decoder(name: str) -> Decoder:
    try:
        return _DECODERS[name]()
    except KeyError:
        raise ValueError(f"unknown decoder '{name}' (known: {', '.join(_DECODERS)})") from None
