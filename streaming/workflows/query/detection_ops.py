"""Operations on detections (a whole ``sv.Detections``, or one detection) and classifications."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import supervision as sv

from ..blocks.base import select
from .values import PROPERTIES, Env

if TYPE_CHECKING:
    from .compiler import QueryCompiler
from .fields import (
    Builder,
    Op,
    as_detections,
    expect,
    read_choice,
    read_integer,
)

__all__ = [
    "DETECTION_OPERATIONS",
]


def _detections_property(node: dict[str, Any], q: QueryCompiler) -> Op:
    extract = PROPERTIES[read_choice(node, "property_name", tuple(PROPERTIES), q.where)]

    def run(value: Any, env: Env) -> list[Any]:
        detections = as_detections(value, "DetectionsPropertyExtract", q.where)
        return [extract((detections, i)) for i in range(len(detections))]

    return run


def _detection_property(node: dict[str, Any], q: QueryCompiler) -> Op:
    extract = PROPERTIES[read_choice(node, "property_name", tuple(PROPERTIES), q.where)]

    def run(value: Any, env: Env) -> Any:
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], sv.Detections):
            return extract(value)
        detections = as_detections(value, "ExtractDetectionProperty", q.where)
        if len(detections) != 1:
            raise q.where.error("ExtractDetectionProperty takes one detection")
        return extract((detections, 0))

    return run


def _to_dictionary(node: dict[str, Any], q: QueryCompiler) -> Op:
    # Imported here: serialization reads the blocks' types, which import this language.
    from ..serialization import serialize_detections

    return lambda v, env: serialize_detections(as_detections(v, "DetectionsToDictionary", q.where))


_CENTRE = sv.Position.CENTER


_SELECTIONS: dict[str, Callable[[sv.Detections], int]] = {
    "first": lambda d: 0,
    "last": lambda d: len(d) - 1,
    "left_most": lambda d: int(np.argmin(d.get_anchors_coordinates(_CENTRE)[:, 0])),
    "right_most": lambda d: int(np.argmax(d.get_anchors_coordinates(_CENTRE)[:, 0])),
    "top_confidence": lambda d: int(np.argmax(d.confidence)) if d.confidence is not None else 0,
}


def _selection(node: dict[str, Any], q: QueryCompiler) -> Op:
    pick = _SELECTIONS[read_choice(node, "mode", tuple(_SELECTIONS), q.where)]

    def run(value: Any, env: Env) -> sv.Detections:
        detections = as_detections(value, "DetectionsSelection", q.where)
        if len(detections) == 0:
            return detections
        return select(detections, np.array([pick(detections)]))

    return run


_SORT_KEYS: dict[str, Callable[[sv.Detections], Any]] = {
    "confidence": lambda d: d.confidence,
    "x_min": lambda d: d.xyxy[:, 0],
    "x_max": lambda d: d.xyxy[:, 2],
    "y_min": lambda d: d.xyxy[:, 1],
    "y_max": lambda d: d.xyxy[:, 3],
    "size": lambda d: d.box_area,
    "center_x": lambda d: (d.xyxy[:, 0] + d.xyxy[:, 2]) / 2,
    "center_y": lambda d: (d.xyxy[:, 1] + d.xyxy[:, 3]) / 2,
}


def _sort(node: dict[str, Any], q: QueryCompiler) -> Op:
    key = _SORT_KEYS[read_choice(node, "mode", tuple(_SORT_KEYS), q.where)]
    ascending = node.get("ascending", True)
    if not isinstance(ascending, bool):
        raise q.where.fail("SortDetections: ascending must be true or false")

    def run(value: Any, env: Env) -> sv.Detections:
        detections = as_detections(value, "SortDetections", q.where)
        keys = key(detections) if len(detections) else None
        if keys is None:
            return detections
        order = np.argsort(keys, kind="stable")
        return select(detections, order if ascending else order[::-1])

    return run


def _moved(
    name: str, keys: tuple[str, str], delta: Callable[[float, float], list[float]]
) -> Builder:
    def build(node: dict[str, Any], q: QueryCompiler) -> Op:
        dx, dy = (read_integer(node, k, q.where) for k in keys)
        change = np.array(delta(dx, dy), dtype=float)

        def run(value: Any, env: Env) -> sv.Detections:
            detections = as_detections(value, name, q.where)
            moved = select(detections, np.arange(len(detections)))  # a copy: the input stays
            moved.xyxy = detections.xyxy.astype(float) + change
            return moved

        return run

    return build


def _rename(node: dict[str, Any], q: QueryCompiler) -> Op:
    class_map, strict = node.get("class_map"), node.get("strict", True)
    offset = read_integer(node, "new_classes_id_offset", q.where, 1024)
    for key, value, kind in (("class_map", class_map, dict), ("strict", strict, bool)):
        if not isinstance(value, kind | str):
            raise q.where.fail(
                f"DetectionsRename: {key} must be a {kind.__name__} or the name "
                "of an operand holding one"
            )

    def resolve(value: Any, kind: type, key: str, env: Env) -> Any:
        if isinstance(value, str) and kind is not str:
            if value not in env.values:
                raise q.where.error(f"DetectionsRename: {key} names '{value}', which is not given")
            value = env.values[value]
        if not isinstance(value, kind):
            raise q.where.error(f"DetectionsRename: {key} must be a {kind.__name__}")
        return value

    def run(value: Any, env: Env) -> sv.Detections:
        detections = as_detections(value, "DetectionsRename", q.where)
        mapping = resolve(class_map, dict, "class_map", env)
        is_strict = resolve(strict, bool, "strict", env)
        renamed = select(detections, np.arange(len(detections)))
        names = [str(n) for n in detections.data.get("class_name", [])]
        if is_strict:
            missing = sorted({n for n in names if n not in mapping})
            if missing:
                raise q.where.error(f"DetectionsRename: class_map has no entry for {missing}")
            ids = {n: i for i, n in enumerate(sorted(set(mapping.values())))}
        else:
            old: Any = detections.class_id if detections.class_id is not None else []
            ids = {n: int(i) for n, i in zip(names, old, strict=False)}
            for i, new in enumerate(sorted({v for v in mapping.values() if v not in ids})):
                ids[new] = offset + i
        new_names = [mapping.get(n, n) for n in names]
        renamed.data["class_name"] = np.array(new_names, dtype=object)
        renamed.class_id = np.array([ids[n] for n in new_names], dtype=int)
        return renamed

    return run


def _by_parent(node: dict[str, Any], q: QueryCompiler) -> Op:
    parent = node.get("parent_class")
    if not isinstance(parent, str):
        raise q.where.fail("PickDetectionsByParentClass: parent_class must be a string")

    def run(value: Any, env: Env) -> sv.Detections:
        detections = as_detections(value, "PickDetectionsByParentClass", q.where)
        names = np.asarray(detections.data.get("class_name", np.array([], dtype=str)))
        is_parent = names == parent
        if not is_parent.any():
            return select(detections, np.zeros(len(detections), dtype=bool))
        parents = detections.xyxy[is_parent]
        centres = detections.get_anchors_coordinates(_CENTRE)
        x, y = centres[:, None, 0], centres[:, None, 1]
        inside = (
            (x >= parents[None, :, 0])
            & (x <= parents[None, :, 2])
            & (y >= parents[None, :, 1])
            & (y <= parents[None, :, 3])
        ).any(axis=1)
        return select(detections, is_parent | inside)

    return run


def _filter(node: dict[str, Any], q: QueryCompiler) -> Op:
    test = q.nested_detection_filter(node.get("filter_operation"))

    def run(value: Any, env: Env) -> sv.Detections:
        detections = as_detections(value, "DetectionsFilter", q.where)
        keep = np.array([test(env, (detections, i)) for i in range(len(detections))], dtype=bool)
        return select(detections, keep)

    return run


_CLASSIFICATION_PROPERTIES = (
    "top_class",
    "top_class_confidence",
    "top_class_confidence_single",
    "all_classes",
    "all_confidences",
)


def _classification(node: dict[str, Any], q: QueryCompiler) -> Op:
    prop = read_choice(node, "property_name", _CLASSIFICATION_PROPERTIES, q.where)

    def ranked(prediction: dict[str, Any]) -> list[tuple[str, float]]:
        every = prediction.get("predictions") or []
        if isinstance(every, list):  # single-label: ranked already
            return [(p["class"], p["confidence"]) for p in every]
        by_id = sorted(every.items(), key=lambda item: item[1]["class_id"])  # multi-label
        return [(name, value["confidence"]) for name, value in by_id]

    def run(value: Any, env: Env) -> Any:
        prediction = expect(
            value, dict, "a classification", "ClassificationPropertyExtract", q.where
        )
        chosen = prediction.get("predicted_classes", [])
        if prop == "top_class":
            return prediction.get("top", chosen)
        if prop in ("top_class_confidence", "top_class_confidence_single"):
            if "confidence" in prediction:
                return prediction["confidence"]
            confidences = [prediction["predictions"][c]["confidence"] for c in chosen]
            if prop == "top_class_confidence":
                return confidences
            return max(confidences, default=0.0)
        pairs = ranked(prediction)
        return [n for n, _ in pairs] if prop == "all_classes" else [c for _, c in pairs]

    return run


DETECTION_OPERATIONS: dict[str, Builder] = {
    "DetectionsFilter": _filter,
    "DetectionsSelection": _selection,
    "SortDetections": _sort,
    "DetectionsOffset": _moved(
        "DetectionsOffset", ("offset_x", "offset_y"), lambda x, y: [-x / 2, -y / 2, x / 2, y / 2]
    ),
    "DetectionsShift": _moved("DetectionsShift", ("shift_x", "shift_y"), lambda x, y: [x, y, x, y]),
    "DetectionsRename": _rename,
    "PickDetectionsByParentClass": _by_parent,
    "DetectionsPropertyExtract": _detections_property,
    "DetectionsToDictionary": _to_dictionary,
    "ExtractDetectionProperty": _detection_property,
    "ClassificationPropertyExtract": _classification,
}
