"""One object, one box: what per-class NMS leaves of one object in two boxes.

NMS drops a box that overlaps a better one by IoU. Two boxes of one object can stay apart
by that measure: YOLOv3-tiny finds a walking person at 230 px tall as a 92x230 box and a
38x163 box inside it (IoU 0.29), and a horse as a "cow" and a "horse" (IoU 0.82, different
classes: per-class NMS never compares them). Each then becomes a track of its own, and a
line counter counts the person twice. Two rules, each a setting of the model (its
manifest), off unless set:

- ``class_overlap_iou``: a box overlapping a better box **of another class** by at least
  this IoU is the same object, claimed twice: the better stays (boxes taken best first).
- ``nested_overlap``: a box whose intersection with a larger box **of its class** covers at
  least this fraction of its own area is a part of that object: the larger box stays, with
  the better score of the two (boxes taken largest first).
"""

from __future__ import annotations

import numpy as np
import supervision as sv

__all__ = ["one_box_per_object"]


def one_box_per_object(
    detections: sv.Detections, nested_overlap: float | None, class_overlap_iou: float | None
) -> sv.Detections:
    """``detections`` less the boxes another box claims (see the module's rules)."""
    count = len(detections)
    if count < 2 or (nested_overlap is None and class_overlap_iou is None):
        return detections
    confidence = (
        detections.confidence.astype(np.float32)
        if detections.confidence is not None
        else np.ones(count, np.float32)
    )
    classes = detections.class_id if detections.class_id is not None else np.zeros(count, int)
    boxes = detections.xyxy.astype(np.float64)
    area = (boxes[:, 2] - boxes[:, 0]).clip(0) * (boxes[:, 3] - boxes[:, 1]).clip(0)
    corner = np.maximum(boxes[:, None, :2], boxes[None, :, :2])
    far_corner = np.minimum(boxes[:, None, 2:], boxes[None, :, 2:])
    inter = (far_corner - corner).clip(0).prod(axis=2)
    same = classes[:, None] == classes[None, :]
    keep = np.ones(count, dtype=bool)
    if class_overlap_iou is not None:  # two classes on one object: the better one stays
        union = area[:, None] + area[None, :] - inter
        claims = ~same & (inter >= class_overlap_iou * np.maximum(union, 1e-9))
        claiming = claims.any(axis=1)  # most boxes claim nothing: only these are walked
        for better in np.argsort(-confidence, kind="stable"):
            if claiming[better] and keep[better]:
                keep &= ~claims[better]
    if nested_overlap is not None:
        # A box inside another of its class: the outer one stays, with the better score of
        # the two. Which of the two scores better changes from frame to frame; keeping the
        # better one's box made a tracked person's box jump between 70 and 27 px wide.
        order = np.argsort(-area, kind="stable")
        rank = np.empty(count, int)
        rank[order] = np.arange(count)
        holds = (
            same
            & (rank[:, None] < rank[None, :])
            & (inter >= nested_overlap * np.maximum(area[None, :], 1e-9))
        )
        holding = holds.any(axis=1)
        for outer in order:
            if holding[outer] and keep[outer]:
                held = holds[outer] & keep
                if held.any():
                    keep &= ~held
                    confidence[outer] = max(confidence[outer], confidence[held].max())
    kept = detections[keep]
    assert isinstance(kept, sv.Detections)  # a boolean index selects detections
    if detections.confidence is not None:
        kept.confidence = confidence[keep]
    return kept
