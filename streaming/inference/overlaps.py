"""One object, one box: what per-class NMS leaves of one object in two boxes.

NMS drops a box that overlaps a better one by IoU. Two boxes of one object can stay apart
by that measure: YOLOv3-tiny finds a walking person at 230 px tall as a 92x230 box and a
38x163 box inside it (IoU 0.29), and a horse as a "cow" and a "horse" (IoU 0.82, different
classes: per-class NMS never compares them). Each then becomes a track of its own, and a
line counter counts the person twice. Two rules, each a setting of the model (its
manifest), off unless set:

- ``nested_overlap``: a box whose intersection with a better box **of its class** covers at
  least this fraction of the smaller box's area is the same object.
- ``class_overlap_iou``: a box overlapping a better box **of another class** by at least
  this IoU is the same object, claimed twice.

Boxes are taken best first; each kept box removes the worse ones it claims.
"""

from __future__ import annotations

import numpy as np
import supervision as sv

__all__ = ["one_box_per_object"]


def one_box_per_object(
    detections: sv.Detections, nested_overlap: float | None, class_overlap_iou: float | None
) -> sv.Detections:
    """``detections`` less the boxes a better box claims (see the module's rules)."""
    count = len(detections)
    if count < 2 or (nested_overlap is None and class_overlap_iou is None):
        return detections
    confidence = detections.confidence if detections.confidence is not None else np.ones(count)
    order = np.argsort(-confidence, kind="stable")
    boxes = detections.xyxy[order].astype(np.float64)
    classes = (
        detections.class_id[order] if detections.class_id is not None else np.zeros(count, int)
    )
    area = (boxes[:, 2] - boxes[:, 0]).clip(0) * (boxes[:, 3] - boxes[:, 1]).clip(0)
    corner = np.maximum(boxes[:, None, :2], boxes[None, :, :2])
    far_corner = np.minimum(boxes[:, None, 2:], boxes[None, :, 2:])
    inter = (far_corner - corner).clip(0).prod(axis=2)
    same = classes[:, None] == classes[None, :]
    claims = np.zeros((count, count), dtype=bool)
    if nested_overlap is not None:
        smaller = np.minimum(area[:, None], area[None, :])
        claims |= same & (inter >= nested_overlap * np.maximum(smaller, 1e-9))
    if class_overlap_iou is not None:
        union = area[:, None] + area[None, :] - inter
        claims |= ~same & (inter >= class_overlap_iou * np.maximum(union, 1e-9))
    keep = np.ones(count, dtype=bool)
    for better in range(count):
        if keep[better]:
            keep[better + 1 :] &= ~claims[better, better + 1 :]
    kept = detections[np.sort(order[keep])]
    assert isinstance(kept, sv.Detections)  # an index array selects detections
    return kept
