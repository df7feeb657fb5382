"""Every operation of the reference's query language, compiled once into a Python function of
``(value, env)``. Each reads its own fields at compile time (a bad field is a 400 naming the
step, the field and the operation) and checks the value it is given at run time (a wrong one
fails the frame with a ``QueryError``).

The operations, by what they take:
- strings: ``StringToLowerCase``, ``StringToUpperCase``, ``StringSubSequence``,
  ``StringMatches``, ``ToString``;
- numbers and booleans: ``ToNumber``, ``NumberRound``, ``Multiply``, ``Divide``,
  ``ToBoolean``, ``RandomNumber``;
- any value: ``LookupTable``; dictionaries: ``ConvertDictionaryToJSON``;
- sequences: ``SequenceLength``, ``SequenceElementsCount``, ``SequenceJoin``,
  ``SequenceMap``, ``SequenceApply``, ``SequenceAggregate``, ``NumericSequenceAggregate``;
- detections: ``DetectionsFilter``, ``DetectionsSelection``, ``SortDetections``,
  ``DetectionsOffset``, ``DetectionsShift``, ``DetectionsRename``,
  ``PickDetectionsByParentClass``, ``DetectionsPropertyExtract``, ``DetectionsToDictionary``;
  one detection: ``ExtractDetectionProperty``;
- classification: ``ClassificationPropertyExtract``;
- images and frames: ``ExtractImageProperty``, ``ExtractFrameMetadata``,
  ``ConvertImageToJPEG``, ``ConvertImageToBase64``; timestamps: ``TimestampToISOFormat``.
"""

from __future__ import annotations

import base64
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Hashable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np
import supervision as sv

from ..blocks.base import WorkflowImage, select
from .values import PROPERTIES, Env, Where, python

if TYPE_CHECKING:
    from .compiler import QueryCompiler

__all__ = ["OPERATIONS", "Op"]

Op = Callable[[Any, Env], Any]
Builder = Callable[[dict[str, Any], "QueryCompiler"], Op]

MAX_JOINED_LENGTH = 1_000_000
"""``SequenceJoin``'s longest string, as the reference bounds it."""


# ------------------------------------------------------------------ field readers


def _choice(node: dict[str, Any], key: str, choices: tuple[str, ...], where: Where,
            default: str | None = None) -> str:  # fmt: skip
    value = node.get(key, default)
    if value not in choices:
        raise where.fail(f"{node['type']}: {key} must be one of {', '.join(choices)}, "
                         f"got {value!r}")  # fmt: skip
    return str(value)


def _number(node: dict[str, Any], key: str, where: Where, default: Any = None) -> float:
    value = node.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise where.fail(f"{node['type']}: {key} must be a number, got {value!r}")
    return value


def _integer(node: dict[str, Any], key: str, where: Where, default: Any = None) -> int:
    value = node.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.fail(f"{node['type']}: {key} must be an integer, got {value!r}")
    return value


def _mapping(node: dict[str, Any], key: str, where: Where) -> dict[Any, Any]:
    value = node.get(key)
    if not isinstance(value, dict):
        raise where.fail(f"{node['type']}: {key} must be an object")
    return value


# ------------------------------------------------------------------ value checks


def _expect(value: Any, kinds: type | tuple[type, ...], what: str, op: str, where: Where) -> Any:
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise where.error(f"{op} takes {what}, got a boolean")
    if not isinstance(value, kinds):
        raise where.error(f"{op} takes {what}, got {type(value).__name__}")
    return value


def _detections(value: Any, op: str, where: Where) -> sv.Detections:
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], sv.Detections):
        detections, i = value  # one detection (a filter's operand): as detections of one
        return select(detections, np.array([i]))
    return _expect(value, sv.Detections, "detections", op, where)


def _sequence(value: Any, op: str, where: Where) -> list[Any]:
    if isinstance(value, sv.Detections):
        return [(value, i) for i in range(len(value))]
    if isinstance(value, dict):
        return list(value)
    return list(_expect(value, (list, tuple, set, str), "a sequence", op, where))


def _string(value: Any, op: str, where: Where) -> str:
    return _expect(value, str, "a string", op, where)


def _image(value: Any, op: str, where: Where) -> np.ndarray:
    if isinstance(value, WorkflowImage):
        return value.numpy
    return _expect(value, np.ndarray, "an image", op, where)


def _key(value: Any, op: str, where: Where) -> Hashable:
    value = python(value)
    if not isinstance(value, Hashable):
        raise where.error(f"{op}: {type(value).__name__} cannot be looked up")
    return value


# ------------------------------------------------------------------ the operations


def _lookup(node: dict[str, Any], q: QueryCompiler) -> Op:
    table = _mapping(node, "lookup_table", q.where)

    def run(value: Any, env: Env) -> Any:
        key = _key(value, "LookupTable", q.where)
        if key not in table:
            raise q.where.error(f"LookupTable has no entry for {key!r}")
        return table[key]

    return run


def _sequence_map(node: dict[str, Any], q: QueryCompiler) -> Op:
    table = _mapping(node, "lookup_table", q.where)

    def run(value: Any, env: Env) -> Any:
        out = []
        for item in _sequence(value, "SequenceMap", q.where):
            key = _key(item, "SequenceMap", q.where)
            if key not in table:
                raise q.where.error(f"SequenceMap's lookup_table has no entry for {key!r}")
            out.append(table[key])
        return out

    return run


def _sequence_apply(node: dict[str, Any], q: QueryCompiler) -> Op:
    chain = q.chain(node.get("operations"), "SequenceApply.operations")
    return lambda value, env: [chain(v, env) for v in _sequence(value, "SequenceApply", q.where)]


def _to_number(node: dict[str, Any], q: QueryCompiler) -> Op:
    cast = _choice(node, "cast_to", ("int", "float"), q.where)

    def run(value: Any, env: Env) -> Any:
        try:
            number = float(python(value))
        except (TypeError, ValueError):
            raise q.where.error(f"ToNumber cannot read {value!r} as a number") from None
        return int(number) if cast == "int" else number

    return run


def _round(node: dict[str, Any], q: QueryCompiler) -> Op:
    digits = _integer(node, "decimal_digits", q.where)
    number_ = (int, float)
    return lambda v, env: round(_expect(python(v), number_, "a number", "NumberRound", q.where),
                                digits)  # fmt: skip


def _arithmetic(name: str, apply: Callable[[float, float], float]) -> Builder:
    def build(node: dict[str, Any], q: QueryCompiler) -> Op:
        other = _number(node, "other", q.where)

        def run(value: Any, env: Env) -> Any:
            value = python(value)
            if isinstance(value, list):  # the reference multiplies numpy arrays elementwise
                return [apply(_expect(v, (int, float), "numbers", name, q.where), other)
                        for v in value]  # fmt: skip
            try:
                return apply(_expect(value, (int, float), "a number", name, q.where), other)
            except ZeroDivisionError:
                raise q.where.error(f"{name} by zero") from None

        return run

    return build


_AGGREGATES: dict[str, Callable[[list[Any]], Any]] = {"min": min, "max": max, "sum": sum}


def _numeric_aggregate(node: dict[str, Any], q: QueryCompiler) -> Op:
    function = _AGGREGATES[_choice(node, "function", tuple(_AGGREGATES), q.where)]
    neutral = node.get("neutral_value")

    def run(value: Any, env: Env) -> Any:
        items = [python(v) for v in _sequence(value, "NumericSequenceAggregate", q.where)]
        if not items:
            return neutral
        try:
            return function(items)
        except TypeError:
            raise q.where.error("NumericSequenceAggregate takes numbers") from None

    return run


def _aggregate(node: dict[str, Any], q: QueryCompiler) -> Op:
    mode = _choice(node, "mode", ("first", "last", "most_common", "least_common"), q.where)

    def run(value: Any, env: Env) -> Any:
        items = _sequence(value, "SequenceAggregate", q.where)
        if not items:
            raise q.where.error("SequenceAggregate of an empty sequence")
        if mode in ("first", "last"):
            return items[0 if mode == "first" else -1]
        ranked = [v for v, _ in Counter(_key(i, "SequenceAggregate", q.where) for i in items)
                  .most_common()]  # fmt: skip
        return ranked[0 if mode == "most_common" else -1]

    return run


def _substring(node: dict[str, Any], q: QueryCompiler) -> Op:
    start, end = _integer(node, "start", q.where, 0), _integer(node, "end", q.where, -1)
    return lambda v, env: _expect(v, str, "a string", "StringSubSequence", q.where)[start:end]


def _matches(node: dict[str, Any], q: QueryCompiler) -> Op:
    pattern = node.get("regex")
    try:
        regex = re.compile(pattern if isinstance(pattern, str) else "")
    except re.error as exc:
        raise q.where.fail(f"StringMatches: regex {pattern!r} is invalid: {exc}") from None
    if not isinstance(pattern, str):
        raise q.where.fail("StringMatches: regex must be a string")
    return lambda v, env: (
        regex.search(_expect(v, str, "a string", "StringMatches", q.where)) is not None
    )


def _join(node: dict[str, Any], q: QueryCompiler) -> Op:
    separator = node.get("separator", ", ")
    if not isinstance(separator, str):
        raise q.where.fail("SequenceJoin: separator must be a string")

    def run(value: Any, env: Env) -> str:
        parts = [str(python(v)) for v in _sequence(value, "SequenceJoin", q.where)]
        if sum(map(len, parts)) + len(separator) * max(0, len(parts) - 1) > MAX_JOINED_LENGTH:
            raise q.where.error(f"SequenceJoin would make more than {MAX_JOINED_LENGTH} characters")
        return separator.join(parts)

    return run


def _elements_count(node: dict[str, Any], q: QueryCompiler) -> Op:
    def run(value: Any, env: Env) -> dict[Any, int]:
        items = _sequence(value, "SequenceElementsCount", q.where)
        return dict(Counter(_key(i, "SequenceElementsCount", q.where) for i in items))

    return run


def _length(node: dict[str, Any], q: QueryCompiler) -> Op:
    def run(value: Any, env: Env) -> int | None:
        if value is None:
            return None  # as a step that did not run: nothing to count
        if isinstance(value, sv.Detections):
            return len(value)
        return len(_expect(value, (list, tuple, set, dict, str, bytes), "a sequence",
                           "SequenceLength", q.where))  # fmt: skip

    return run


def _random(node: dict[str, Any], q: QueryCompiler) -> Op:
    low = _number(node, "min_value", q.where, 0.0)
    high = _number(node, "max_value", q.where, 1.0)
    return lambda value, env: low + random.random() * abs(high - low)


def _detections_property(node: dict[str, Any], q: QueryCompiler) -> Op:
    extract = PROPERTIES[_choice(node, "property_name", tuple(PROPERTIES), q.where)]

    def run(value: Any, env: Env) -> list[Any]:
        detections = _detections(value, "DetectionsPropertyExtract", q.where)
        return [extract((detections, i)) for i in range(len(detections))]

    return run


def _detection_property(node: dict[str, Any], q: QueryCompiler) -> Op:
    extract = PROPERTIES[_choice(node, "property_name", tuple(PROPERTIES), q.where)]

    def run(value: Any, env: Env) -> Any:
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], sv.Detections):
            return extract(value)
        detections = _detections(value, "ExtractDetectionProperty", q.where)
        if len(detections) != 1:
            raise q.where.error("ExtractDetectionProperty takes one detection")
        return extract((detections, 0))

    return run


def _to_dictionary(node: dict[str, Any], q: QueryCompiler) -> Op:
    # Imported here: serialization reads the blocks' types, which import this language.
    from ..serialization import serialize_detections

    return lambda v, env: serialize_detections(_detections(v, "DetectionsToDictionary", q.where))


_CENTRE = sv.Position.CENTER


_SELECTIONS: dict[str, Callable[[sv.Detections], int]] = {
    "first": lambda d: 0,
    "last": lambda d: len(d) - 1,
    "left_most": lambda d: int(np.argmin(d.get_anchors_coordinates(_CENTRE)[:, 0])),
    "right_most": lambda d: int(np.argmax(d.get_anchors_coordinates(_CENTRE)[:, 0])),
    "top_confidence": lambda d: int(np.argmax(d.confidence)) if d.confidence is not None else 0,
}


def _selection(node: dict[str, Any], q: QueryCompiler) -> Op:
    pick = _SELECTIONS[_choice(node, "mode", tuple(_SELECTIONS), q.where)]

    def run(value: Any, env: Env) -> sv.Detections:
        detections = _detections(value, "DetectionsSelection", q.where)
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
    key = _SORT_KEYS[_choice(node, "mode", tuple(_SORT_KEYS), q.where)]
    ascending = node.get("ascending", True)
    if not isinstance(ascending, bool):
        raise q.where.fail("SortDetections: ascending must be true or false")

    def run(value: Any, env: Env) -> sv.Detections:
        detections = _detections(value, "SortDetections", q.where)
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
        dx, dy = (_integer(node, k, q.where) for k in keys)
        change = np.array(delta(dx, dy), dtype=float)

        def run(value: Any, env: Env) -> sv.Detections:
            detections = _detections(value, name, q.where)
            moved = select(detections, np.arange(len(detections)))  # a copy: the input stays
            moved.xyxy = detections.xyxy.astype(float) + change
            return moved

        return run

    return build


def _rename(node: dict[str, Any], q: QueryCompiler) -> Op:
    class_map, strict = node.get("class_map"), node.get("strict", True)
    offset = _integer(node, "new_classes_id_offset", q.where, 1024)
    for key, value, kind in (("class_map", class_map, dict), ("strict", strict, bool)):
        if not isinstance(value, kind | str):
            raise q.where.fail(f"DetectionsRename: {key} must be a {kind.__name__} or the name "
                               "of an operand holding one")  # fmt: skip

    def resolve(value: Any, kind: type, key: str, env: Env) -> Any:
        if isinstance(value, str) and kind is not str:
            if value not in env.values:
                raise q.where.error(f"DetectionsRename: {key} names '{value}', which is not given")
            value = env.values[value]
        if not isinstance(value, kind):
            raise q.where.error(f"DetectionsRename: {key} must be a {kind.__name__}")
        return value

    def run(value: Any, env: Env) -> sv.Detections:
        detections = _detections(value, "DetectionsRename", q.where)
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
        detections = _detections(value, "PickDetectionsByParentClass", q.where)
        names = np.asarray(detections.data.get("class_name", np.array([], dtype=str)))
        is_parent = names == parent
        if not is_parent.any():
            return select(detections, np.zeros(len(detections), dtype=bool))
        parents = detections.xyxy[is_parent]
        centres = detections.get_anchors_coordinates(_CENTRE)
        x, y = centres[:, None, 0], centres[:, None, 1]
        inside = (
            (x >= parents[None, :, 0]) & (x <= parents[None, :, 2])
            & (y >= parents[None, :, 1]) & (y <= parents[None, :, 3])
        ).any(axis=1)  # fmt: skip
        return select(detections, is_parent | inside)

    return run


def _filter(node: dict[str, Any], q: QueryCompiler) -> Op:
    test = q.nested_detection_filter(node.get("filter_operation"))

    def run(value: Any, env: Env) -> sv.Detections:
        detections = _detections(value, "DetectionsFilter", q.where)
        keep = np.array([test(env, (detections, i)) for i in range(len(detections))], dtype=bool)
        return select(detections, keep)

    return run


_CLASSIFICATION_PROPERTIES = ("top_class", "top_class_confidence", "top_class_confidence_single",
                               "all_classes", "all_confidences")  # fmt: skip


def _classification(node: dict[str, Any], q: QueryCompiler) -> Op:
    prop = _choice(node, "property_name", _CLASSIFICATION_PROPERTIES, q.where)

    def ranked(prediction: dict[str, Any]) -> list[tuple[str, float]]:
        every = prediction.get("predictions") or []
        if isinstance(every, list):  # single-label: ranked already
            return [(p["class"], p["confidence"]) for p in every]
        by_id = sorted(every.items(), key=lambda item: item[1]["class_id"])  # multi-label
        return [(name, value["confidence"]) for name, value in by_id]

    def run(value: Any, env: Env) -> Any:
        prediction = _expect(value, dict, "a classification", "ClassificationPropertyExtract",
                             q.where)  # fmt: skip
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


def _image_property(node: dict[str, Any], q: QueryCompiler) -> Op:
    prop = _choice(node, "property_name", ("size", "height", "width", "aspect_ratio"), q.where)

    def run(value: Any, env: Env) -> Any:
        height, width = _image(value, "ExtractImageProperty", q.where).shape[:2]
        return {"size": height * width, "height": height, "width": width,
                "aspect_ratio": width / height if height else 0}[prop]  # fmt: skip

    return run


def _frame_metadata(node: dict[str, Any], q: QueryCompiler) -> Op:
    prop = _choice(node, "property_name",
                   ("frame_number", "frame_timestamp", "seconds_since_start"), q.where)  # fmt: skip

    def run(value: Any, env: Env) -> Any:
        _image(value, "ExtractFrameMetadata", q.where)  # of the frame this image is
        number = env.video.get("frame_number")
        if prop == "frame_number":
            return number
        if prop == "frame_timestamp":
            stamp = env.video.get("frame_timestamp")
            return datetime.fromisoformat(stamp) if isinstance(stamp, str) else stamp
        fps = env.video.get("fps")
        if not fps or number is None:
            raise q.where.error("ExtractFrameMetadata: seconds_since_start needs the stream's fps")
        return (number - 1) / fps

    return run


def _iso(node: dict[str, Any], q: QueryCompiler) -> Op:
    return lambda v, env: _expect(v, datetime, "a timestamp", "TimestampToISOFormat",
                                  q.where).isoformat()  # fmt: skip


def _jpeg(image: np.ndarray, quality: int) -> bytes:
    return cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()


def _to_jpeg(node: dict[str, Any], q: QueryCompiler) -> Op:
    quality = _integer(node, "compression_level", q.where, 95)
    if not 1 <= quality <= 100:
        raise q.where.fail("ConvertImageToJPEG: compression_level must be 1 to 100")
    return lambda v, env: _jpeg(_image(v, "ConvertImageToJPEG", q.where), quality)


def _to_base64(node: dict[str, Any], q: QueryCompiler) -> Op:
    return lambda v, env: base64.b64encode(
        _jpeg(_image(v, "ConvertImageToBase64", q.where), 95)
    ).decode("ascii")


def _to_json(node: dict[str, Any], q: QueryCompiler) -> Op:
    def run(value: Any, env: Env) -> str:
        try:
            return json.dumps(_expect(value, dict, "a dictionary", "ConvertDictionaryToJSON",
                                      q.where), default=python)  # fmt: skip
        except (TypeError, ValueError) as exc:
            raise q.where.error(f"ConvertDictionaryToJSON: {exc}") from None

    return run


def _simple(function: Callable[[Any, Where], Any]) -> Builder:
    return lambda node, q: lambda value, env: function(value, q.where)


OPERATIONS: dict[str, Builder] = {
    "StringToLowerCase": _simple(lambda v, w: _string(v, "StringToLowerCase", w).lower()),
    "StringToUpperCase": _simple(lambda v, w: _string(v, "StringToUpperCase", w).upper()),
    "ToString": _simple(lambda v, w: str(python(v))),
    "ToBoolean": _simple(lambda v, w: bool(python(v))),
    "LookupTable": _lookup,
    "ToNumber": _to_number,
    "NumberRound": _round,
    "Multiply": _arithmetic("Multiply", lambda a, b: a * b),
    "Divide": _arithmetic("Divide", lambda a, b: a / b),
    "RandomNumber": _random,
    "StringSubSequence": _substring,
    "StringMatches": _matches,
    "SequenceLength": _length,
    "SequenceElementsCount": _elements_count,
    "SequenceJoin": _join,
    "SequenceMap": _sequence_map,
    "SequenceApply": _sequence_apply,
    "SequenceAggregate": _aggregate,
    "NumericSequenceAggregate": _numeric_aggregate,
    "DetectionsFilter": _filter,
    "DetectionsSelection": _selection,
    "SortDetections": _sort,
    "DetectionsOffset": _moved("DetectionsOffset", ("offset_x", "offset_y"),
                               lambda x, y: [-x / 2, -y / 2, x / 2, y / 2]),
    "DetectionsShift": _moved("DetectionsShift", ("shift_x", "shift_y"), lambda x, y: [x, y, x, y]),
    "DetectionsRename": _rename,
    "PickDetectionsByParentClass": _by_parent,
    "DetectionsPropertyExtract": _detections_property,
    "DetectionsToDictionary": _to_dictionary,
    "ExtractDetectionProperty": _detection_property,
    "ClassificationPropertyExtract": _classification,
    "ExtractImageProperty": _image_property,
    "ExtractFrameMetadata": _frame_metadata,
    "TimestampToISOFormat": _iso,
    "ConvertImageToJPEG": _to_jpeg,
    "ConvertImageToBase64": _to_base64,
    "ConvertDictionaryToJSON": _to_json,
}  # fmt: skip
