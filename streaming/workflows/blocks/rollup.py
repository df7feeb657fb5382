"""``detections_list_rollup``: what a second model found on each crop (one list per frame,
through ``dimension_collapse``) brought back onto the frame, where the crops came from
(``parent_detection``), and merged: per class, detections that overlap (touch, at
``overlap_threshold`` 0; else IoU above it) become one, their boxes' union (masks' union;
for keypoints, detections whose keypoints lie within ``keypoint_merge_threshold`` pixels on
average, their mean), with the ``confidence_strategy`` of their confidences."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import supervision as sv

from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import ANY, DETECTION_KINDS, DETECTIONS, FieldSpec, Takes, fraction
from .slicing import placed

__all__ = ["DetectionsListRollupBlock", "rolled_up"]

_COMBINE: dict[str, Callable[[np.ndarray], Any]] = {"max": np.max, "mean": np.mean, "min": np.min}


def _groups(xyxy: np.ndarray, threshold: float) -> list[list[int]]:
    """Connected groups of boxes that touch (``threshold`` 0) or overlap above it."""
    n = len(xyxy)
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    if n > 1:
        width = np.minimum(xyxy[:, None, 2], xyxy[None, :, 2]) - np.maximum(
            xyxy[:, None, 0], xyxy[None, :, 0]
        )
        height = np.minimum(xyxy[:, None, 3], xyxy[None, :, 3]) - np.maximum(
            xyxy[:, None, 1], xyxy[None, :, 1]
        )
        if threshold <= 0:
            joined = (width >= 0) & (height >= 0)
        else:
            joined = np.nan_to_num(sv.box_iou_batch(xyxy, xyxy)) > threshold
        for i, j in zip(*np.nonzero(np.triu(joined, 1)), strict=True):
            parent[root(int(i))] = root(int(j))
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def _keypoint_groups(points: np.ndarray, threshold: float) -> list[list[int]]:
    """Greedy groups of detections whose keypoints lie within ``threshold`` on average."""
    used: set[int] = set()
    groups = []
    for i in range(len(points)):
        if i in used:
            continue
        group = [i]
        used.add(i)
        for j in range(i + 1, len(points)):
            if j not in used and np.linalg.norm(points[i] - points[j], axis=-1).mean() < threshold:
                group.append(j)
                used.add(j)
        groups.append(group)
    return groups


def _merged(same: sv.Detections, group: list[int], strategy: str) -> sv.Detections:
    """One detection of a group of one class."""
    box = same.xyxy[group]
    data: dict[str, Any] = {k: np.asarray(v)[group[:1]] for k, v in same.data.items()}
    data["detection_id"] = np.array([str(uuid.uuid4())])
    if "keypoints_xy" in data:
        points = np.asarray(same.data["keypoints_xy"], float)[group]
        data["keypoints_xy"] = points.mean(axis=0)[None]
        extent = box.mean(axis=0)
    else:
        extent = np.array([box[:, 0].min(), box[:, 1].min(), box[:, 2].max(), box[:, 3].max()])
    mask = None
    if same.mask is not None:
        mask = np.any(np.asarray(same.mask)[group], axis=0, keepdims=True)
    confidence = None
    if same.confidence is not None:
        values = np.asarray(same.confidence, float)[group]
        confidence = np.array([float(_COMBINE[strategy](values))])
    class_id = np.asarray(same.class_id)[group[:1]] if same.class_id is not None else None
    return sv.Detections(
        xyxy=extent[None].astype(np.float32),
        mask=mask,
        confidence=confidence,
        class_id=class_id,
        data=data,
    )


def rolled_up(
    children: list[sv.Detections],
    size: tuple[int, int],
    strategy: str,
    overlap: float,
    keypoint_threshold: float,
) -> sv.Detections:
    """Every crop's detections on the frame (``size``: width, height), merged."""
    pieces = [placed(c, size) for c in children if c is not None and len(c)]
    if not pieces:
        empty = sv.Detections.empty()
        empty.data["class_name"] = np.array([], dtype=str)
        return empty
    every = sv.Detections.merge(pieces)
    merged: list[sv.Detections] = []
    for class_id in dict.fromkeys(every.class_id.tolist() if every.class_id is not None else [0]):
        same = every[every.class_id == class_id] if every.class_id is not None else every
        assert isinstance(same, sv.Detections)
        if "keypoints_xy" in same.data:
            groups = _keypoint_groups(
                np.asarray(same.data["keypoints_xy"], float), keypoint_threshold
            )
        else:
            groups = _groups(same.xyxy, overlap)
        merged.extend(_merged(same, group, strategy) for group in groups)
    out = sv.Detections.merge(merged)
    out.metadata["image_size"] = size
    return out


def _frame_size(parents: sv.Detections, children: list[Any]) -> tuple[int, int]:
    """The frame's size where the parents do not say: from where a crop lay, else the
    boxes' extent."""
    for child in children:
        origin = child.metadata.get("parent_origin") if child is not None else None
        if origin is not None:
            return origin.width, origin.height
    return (int(parents.xyxy[:, 2].max(initial=1)), int(parents.xyxy[:, 3].max(initial=1)))


@dataclass(frozen=True, kw_only=True)
class RollupSettings(BlockSettings):
    confidence_strategy: Literal["max", "mean", "min"] = setting(
        FieldSpec(default="max", choices=("max", "mean", "min"))
    )
    overlap_threshold: float = setting(fraction(0.0))
    keypoint_merge_threshold: float = setting(FieldSpec(default=10.0, type="number", minimum=0))


class DetectionsListRollupBlock(Block):
    """``rolled_up_detections`` on the frame, and ``crop_zones`` (each parent box's corners)."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/detections_list_rollup@v1",
        "DetectionsListRollUp",
    )
    inputs = {
        "parent_detection": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME),
        "child_detections": FieldSpec((ANY,), takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = RollupSettings
    outputs = {"rolled_up_detections": DETECTIONS, "crop_zones": "list_of_values"}

    def __init__(self, name: str, config: RollupSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.name = name
        self.config = config

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        parents: sv.Detections = inputs["parent_detection"]
        children = inputs["child_detections"]
        if not isinstance(children, list) or len(children) != len(parents):
            raise ValueError(
                f"step '{self.name}': child_detections must be one list of detections per "
                f"parent detection ({len(parents)}), as dimension_collapse gives them"
            )
        size = parents.metadata.get("image_size") or _frame_size(parents, children)
        c = self.config
        zones = [
            [
                (float(x1), float(y1)),
                (float(x2), float(y1)),
                (float(x2), float(y2)),
                (float(x1), float(y2)),
            ]
            for x1, y1, x2, y2 in parents.xyxy
        ]
        found = rolled_up(
            children,
            tuple(size),
            c.confidence_strategy,
            c.overlap_threshold,
            c.keypoint_merge_threshold,
        )
        return {"rolled_up_detections": found, "crop_zones": zones}
