"""``detections_consensus``: several models' (or steps') detections of one image voted on.

Each detection looks, in every other source, for the not-yet-used detection it overlaps
most (IoU above ``iou_threshold``; of its class when ``class_aware``). With at least
``required_votes - 1`` such partners the group merges into one detection: its class by
majority (``average``) or from the most or least confident member, its box the mean, the
largest or the smallest, its mask the union, intersection, largest or smallest, its
confidence the mean, max or min; kept when that reaches ``confidence``.
``object_present`` and ``presence_confidence`` (per class, or ``any_object``) say whether
the consensus holds what ``required_objects`` asks (a count, or a count per class)."""

from __future__ import annotations

import statistics
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import DETECTION_KINDS, DETECTIONS, FieldSpec, Takes, fraction

__all__ = ["DetectionsConsensusBlock", "consensus"]

Mode = Literal["average", "max", "min"]
_MODES = ("average", "max", "min")
_AGGREGATE: dict[str, Callable[[list[float]], float]] = {
    "average": statistics.mean,
    "max": max,
    "min": min,
}


def _at(detections: sv.Detections, index: int | np.ndarray) -> sv.Detections:
    """One detection (or those a mask picks) as Detections (the stubs allow other types)."""
    picked = detections[index : index + 1] if isinstance(index, int) else detections[index]
    return cast(sv.Detections, picked)


@dataclass(frozen=True)
class Vote:
    """How a consensus is reached and merged (the step's fields)."""

    required_votes: int
    class_aware: bool = True
    iou_threshold: float = 0.3
    confidence: float = 0.0
    classes_to_consider: tuple[str, ...] | None = None
    required_objects: int | dict[str, int] | None = None
    presence_confidence_aggregation: Mode = "max"
    confidence_aggregation: Mode = "average"
    coordinates_aggregation: Mode = "average"
    mask_aggregation: Literal["union", "intersection", "max", "min"] = "union"


def _names(detections: sv.Detections) -> np.ndarray:
    return np.asarray(detections.data.get("class_name", np.array([""] * len(detections))))


def _merged(group: list[sv.Detections], vote: Vote) -> sv.Detections:
    """One detection of a group (each member a one-detection Detections)."""
    confidences = [float(d.confidence[0]) if d.confidence is not None else 0.0 for d in group]
    areas = [float(d.area[0]) for d in group]
    if vote.confidence_aggregation == "average":
        counts = Counter((str(_names(d)[0]), int(d.class_id[0])) for d in group)  # type: ignore[index]
        class_name, class_id = counts.most_common(1)[0][0]
    else:
        pick = confidences.index(
            (max if vote.confidence_aggregation == "max" else min)(confidences)
        )
        class_name, class_id = str(_names(group[pick])[0]), int(group[pick].class_id[0])  # type: ignore[index]
    mask = None
    shapes = [d.mask.shape[1:] for d in group if d.mask is not None]
    if shapes:
        masks = np.stack(
            [d.mask[0] if d.mask is not None else np.zeros(shapes[0], bool) for d in group]
        )
        chosen = {
            "union": lambda: masks.any(axis=0),
            "intersection": lambda: masks.all(axis=0),
            "max": lambda: masks[int(np.argmax(areas))],
            "min": lambda: masks[int(np.argmin(areas))],
        }[vote.mask_aggregation]()
        mask = chosen[None]
        xyxy = sv.mask_to_xyxy(mask).astype(np.float64)
    elif vote.coordinates_aggregation == "average":
        xyxy = np.mean([d.xyxy[0] for d in group], axis=0)[None]
    else:
        pick = int(np.argmax(areas) if vote.coordinates_aggregation == "max" else np.argmin(areas))
        xyxy = group[pick].xyxy.astype(np.float64)
    first = group[0]
    merged = sv.Detections(
        xyxy=xyxy,
        mask=mask,
        confidence=np.array([_AGGREGATE[vote.confidence_aggregation](confidences)]),
        class_id=np.array([class_id]),
        data={
            "class_name": np.array([class_name]),
            "detection_id": np.array([str(uuid.uuid4())]),
            "parent_id": np.asarray(first.data.get("parent_id", np.array([""])))[:1],
        },
    )
    merged.metadata.update(first.metadata)
    return merged


def _presence(found: sv.Detections, vote: Vote) -> tuple[bool, dict[str, float]]:
    if not len(found):
        return False, {}
    required = vote.required_objects or 0
    if isinstance(required, dict) and not vote.class_aware:
        required = sum(required.values())
    if isinstance(required, int) and len(found) < required:
        return False, {}
    aggregate = _AGGREGATE[vote.presence_confidence_aggregation]
    confidences = [float(c) for c in (found.confidence if found.confidence is not None else [])]
    if not vote.class_aware:
        return True, {"any_object": aggregate(confidences)}
    names = _names(found)
    per_class = {
        str(n): [c for c, m in zip(confidences, names, strict=True) if m == n]
        for n in dict.fromkeys(names.tolist())
    }
    if isinstance(required, dict) and any(
        len(per_class.get(name, [])) < count for name, count in required.items()
    ):
        return False, {}
    return True, {name: aggregate(values) for name, values in per_class.items()}


def consensus(sources: list[sv.Detections], vote: Vote) -> tuple[sv.Detections, bool, dict]:
    """The merged detections, whether the objects asked for are present, and how sure."""
    if all(len(s) == 0 for s in sources):
        return sv.Detections.empty(), False, {}
    if vote.classes_to_consider:
        sources = [_at(s, np.isin(_names(s), vote.classes_to_consider)) for s in sources]
    used: set[tuple[int, int]] = set()
    merged: list[sv.Detections] = []
    for s, source in enumerate(sources):
        for i in range(len(source)):
            if (s, i) in used:
                continue
            one = _at(source, i)
            best: dict[int, tuple[int, float]] = {}
            for o, other in enumerate(sources):
                if o == s or not len(other):
                    continue
                ious = sv.box_iou_batch(one.xyxy, other.xyxy)[0]
                for j, iou in enumerate(np.nan_to_num(ious)):
                    if (o, j) in used or iou <= vote.iou_threshold:
                        continue
                    if vote.class_aware and _names(other)[j] != _names(one)[0]:
                        continue
                    if o not in best or best[o][1] < iou:
                        best[o] = (j, float(iou))
            if len(best) < vote.required_votes - 1:
                continue
            members = [(s, i)] + [(o, j) for o, (j, _) in best.items()]
            group = _merged([_at(sources[a], b) for a, b in members], vote)
            if float(group.confidence[0]) < vote.confidence:  # type: ignore[index]
                continue
            merged.append(group)
            used.update(members)
    found = sv.Detections.merge(merged) if merged else sv.Detections.empty()
    if not merged:
        found.data["class_name"] = np.array([], dtype=str)
    present, confidence = _presence(found, vote)
    return found, present, confidence


@dataclass(frozen=True, kw_only=True)
class ConsensusSettings(BlockSettings):
    predictions_batches: int | None = setting(
        FieldSpec(DETECTION_KINDS, default=None, takes=Takes.LIST)
    )
    predictions: int | None = setting(
        FieldSpec(DETECTION_KINDS, default=None, takes=Takes.LIST)
    )  # the alias
    required_votes: int = setting(FieldSpec(type="integer", minimum=1))
    class_aware: bool = setting(FieldSpec(default=True, type="boolean"))
    iou_threshold: float = setting(fraction(0.3))
    confidence: float = setting(fraction(0.0))
    classes_to_consider: list[Any] | None = setting(FieldSpec(default=None, type="list"))
    required_objects: Any = setting(FieldSpec(default=None))
    presence_confidence_aggregation: Mode = setting(FieldSpec(default="max", choices=_MODES))
    detections_merge_confidence_aggregation: Mode = setting(
        FieldSpec(default="average", choices=_MODES)
    )
    detections_merge_coordinates_aggregation: Mode = setting(
        FieldSpec(default="average", choices=_MODES)
    )
    detections_merge_mask_aggregation: Literal["union", "intersection", "max", "min"] = setting(
        FieldSpec(default="union", choices=("union", "intersection", "max", "min"))
    )


def _required_objects(step: str, value: Any) -> int | dict[str, int] | None:
    positive = isinstance(value, int) and not isinstance(value, bool) and value > 0
    if value is None or positive:
        return value
    if isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v > 0
        for k, v in value.items()
    ):
        return dict(value)
    raise WorkflowCompilationError(
        f"step '{step}': required_objects must be a positive count or an object of counts "
        f"per class, got {value!r}"
    )


class DetectionsConsensusBlock(Block):
    """``predictions_batches`` (or ``predictions``): the sources, each a selector."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/detections_consensus@v1",
        "DetectionsConsensus",
    )
    Settings: ClassVar[type[BlockSettings]] = ConsensusSettings
    outputs = {
        "predictions": DETECTIONS,
        "object_present": "boolean",
        "presence_confidence": "dictionary",
    }

    @classmethod
    def check_bindings(cls, name: str, bound: set[str]) -> None:
        if not bound & {"predictions_batches", "predictions"}:
            raise WorkflowCompilationError(
                f"step '{name}': field 'predictions_batches' is required"
            )

    def __init__(self, name: str, config: ConsensusSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        classes = config.classes_to_consider
        if classes is not None and not all(isinstance(c, str) for c in classes):
            raise WorkflowCompilationError(
                f"step '{name}': classes_to_consider must be a list of class names"
            )
        self.vote = Vote(
            required_votes=config.required_votes,
            class_aware=config.class_aware,
            iou_threshold=config.iou_threshold,
            confidence=config.confidence,
            classes_to_consider=tuple(classes) if classes else None,
            required_objects=_required_objects(name, config.required_objects),
            presence_confidence_aggregation=config.presence_confidence_aggregation,
            confidence_aggregation=config.detections_merge_confidence_aggregation,
            coordinates_aggregation=config.detections_merge_coordinates_aggregation,
            mask_aggregation=config.detections_merge_mask_aggregation,
        )

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        given = inputs.get("predictions_batches") or inputs.get("predictions") or []
        sources = [d if d is not None else sv.Detections.empty() for d in given]
        found, present, confidence = consensus(sources, self.vote)
        return {"predictions": found, "object_present": present, "presence_confidence": confidence}
