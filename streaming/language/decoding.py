"""A model's text answer, read as the reference's VLM blocks read it: the JSON in it (fenced,
wrapped in prose, a bare sequence of objects), a classification (one class, or several), and
boxes in each convention models answer in. Pure functions: no I/O, nothing held.

A box convention is a function ``(entry, width, height) -> [x1, y1, x2, y2] | None`` in the
image's pixels (None: the entry carries no well-formed box, and is skipped)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONVENTIONS",
    "Box",
    "anthropic_upload_size",
    "classification",
    "extract_json",
    "loose_named_boxes",
    "max_edge_size",
    "read_boxes",
]

_JSON_FENCE = re.compile(r"```json([\s\S]*?)```", re.IGNORECASE)
_ANY_FENCE = re.compile(r"```[a-zA-Z0-9_+-]*[ \t]*\r?\n?([\s\S]*?)```")
_FENCE_LINE = re.compile(r"^[ \t]*```[a-zA-Z0-9_+-]*[ \t]*$", re.MULTILINE)
_SEPARATOR = re.compile(r"^[\s,]*$")
_TAIL = re.compile(r"^[\s,]*\]?[\s,]*$")


def extract_json(raw: object) -> tuple[bool, Any]:
    """``(error, payload)``: the first ```json block, the first fenced block, the text without
    stray fence lines, a sequence of objects or arrays (JSON Lines, ``{...}, {...}``), then the
    outermost ``[...]`` or ``{...}``; ``(True, {})`` when none is a JSON object or array."""
    if not isinstance(raw, str):
        return True, {}
    try:
        return _extract(raw)
    except (RecursionError, ValueError):  # a deeply nested or absurd answer
        return True, {}


def _extract(raw: str) -> tuple[bool, Any]:
    candidates = [m.group(1) for m in (_JSON_FENCE.search(raw), _ANY_FENCE.search(raw)) if m]
    stripped = _FENCE_LINE.sub("", raw)
    for text in dict.fromkeys([*candidates, raw, stripped]):
        if (payload := _loads(text)) is not None:
            return False, payload
    if (sequence := _sequence(stripped)) is not None:
        return False, sequence
    for opening, closing in (("[", "]"), ("{", "}")):
        start, stop = stripped.find(opening), stripped.rfind(closing)
        if start != -1 and stop > start and (found := _loads(stripped[start : stop + 1])):
            return False, found
    return True, {}


def loose_named_boxes(raw: object) -> list[dict[str, Any]]:
    """The complete ``{..., "x_min", "y_min", "x_max", "y_max"}`` objects of an answer that is
    no JSON (cut at ``max_tokens``, or objects without their array): what the reference
    salvages of Meta Muse's answers. Empty when there are none."""
    if not isinstance(raw, str):
        return []
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    index = 0
    while (start := raw.find("{", index)) != -1:
        try:
            value, index = decoder.raw_decode(raw, start)
        except (ValueError, RecursionError):
            index = start + 1
            continue
        if isinstance(value, dict) and all(
            k in value for k in ("x_min", "y_min", "x_max", "y_max")
        ):
            found.append(value)
    return found


def _loads(text: str) -> dict[str, Any] | list[Any] | None:
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict | list) else None


def _sequence(text: str) -> list[Any] | None:
    """Objects and arrays separated only by commas and blanks (one stray ``]`` at the end
    tolerated), flattened into one list; None when anything else is between them."""
    decoder = json.JSONDecoder()
    entries: list[Any] = []
    index, found = 0, 0
    while True:
        starts = [p for p in (text.find("{", index), text.find("[", index)) if p != -1]
        if not starts:
            break
        start = min(starts)
        if not _SEPARATOR.match(text[index:start]):
            return None
        try:
            value, index = decoder.raw_decode(text, start)
        except ValueError:
            return None
        if isinstance(value, dict):
            entries.append(value)
        else:
            entries.extend(value)
        found += 1
    return entries if found and _TAIL.match(text[index:]) else None


def _confidence(value: Any) -> float:
    return min(max(float(value), 0.0), 1.0)


def _label(entry: dict[str, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        if entry.get(key) is not None:
            return str(entry[key])
    return "unknown"


def classification(
    raw: object, *, width: int, height: int, parent_id: str, classes: list[str], inference_id: str
) -> dict[str, Any] | None:
    """The reference's classification prediction from an answer: one class (``class_name``
    and ``confidence``) or several (``predicted_classes``, or a bare list of class entries);
    a class not in ``classes`` has ``class_id`` -1. None: the answer is neither."""
    error, payload = extract_json(raw)
    if error:
        return None
    if isinstance(payload, list):  # the multi-label array without its wrapper
        if not payload or not all(isinstance(e, dict) for e in payload):
            return None
        labels = [_label(e, ("class", "class_name", "label")) for e in payload]
        if "unknown" in labels:
            return None
        payload = {
            "predicted_classes": [
                {"class": label, "confidence": e.get("confidence", 1.0)}
                for label, e in zip(labels, payload, strict=True)
            ]
        }
    index = {name: i for i, name in enumerate(classes)}
    head = {"image": {"width": width, "height": height}}
    tail = {"inference_id": inference_id, "parent_id": parent_id}
    try:
        if "class_name" in payload and "confidence" in payload:
            top = str(payload["class_name"])
            confidence = _confidence(payload["confidence"])
            rows = (
                [] if top in index else [{"class": top, "class_id": -1, "confidence": confidence}]
            )
            rows += [
                {"class": n, "class_id": i, "confidence": confidence if n == top else 0.0}
                for n, i in index.items()
            ]
            return {**head, "predictions": rows, "top": top, "confidence": confidence, **tail}
        if "predicted_classes" in payload:
            found: dict[str, float] = {}
            for entry in payload["predicted_classes"]:
                name = str(entry["class"])
                index.setdefault(name, -1)
                found[name] = max(found.get(name, 0.0), _confidence(entry["confidence"]))
            predictions = {
                n: {"confidence": found.get(n, 0.0), "class_id": i} for n, i in index.items()
            }
            return {**head, "predictions": predictions, "predicted_classes": list(found), **tail}
    except (KeyError, TypeError, ValueError):
        return None
    return None


@dataclass(frozen=True)
class Box:
    xyxy: tuple[float, float, float, float]
    class_name: str
    class_id: int
    confidence: float


Convention = Callable[[dict[str, Any], int, int], "list[float] | None"]


def _four(value: Any) -> list[float] | None:
    if (
        isinstance(value, list)
        and len(value) == 4
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    ):
        return [float(v) for v in value]
    return None


def _scaled(box: list[float], scale: float, width: float, height: float) -> list[float]:
    x1, y1, x2, y2 = (min(max(v, 0.0), scale) for v in box)
    return [x1 * width / scale, y1 * height / scale, x2 * width / scale, y2 * height / scale]


def normalized(entry: dict[str, Any], width: int, height: int) -> list[float] | None:
    """``x_min``, ``y_min``, ``x_max``, ``y_max`` on 0-1 (the reference's OpenAI, Claude and
    Gemini prompts up to their newest versions)."""
    box = _four([entry.get(k) for k in ("x_min", "y_min", "x_max", "y_max")])
    return (
        None if box is None else [box[0] * width, box[1] * height, box[2] * width, box[3] * height]
    )


def named_1000(entry: dict[str, Any], width: int, height: int) -> list[float] | None:
    """The same named fields on 0-1000 (Meta's Muse)."""
    box = _four([entry.get(k) for k in ("x_min", "y_min", "x_max", "y_max")])
    return None if box is None else _scaled(box, 1000.0, width, height)


def yxyx_1000(entry: dict[str, Any], width: int, height: int) -> list[float] | None:
    """``box_2d`` ``[y_min, x_min, y_max, x_max]`` on 0-1000 (Gemini's own convention)."""
    box = _four(entry.get("box_2d"))
    return None if box is None else _scaled([box[1], box[0], box[3], box[2]], 1000.0, width, height)


def xyxy_1000(entry: dict[str, Any], width: int, height: int) -> list[float] | None:
    """``box_2d`` or ``bbox_2d`` ``[x_min, y_min, x_max, y_max]`` on 0-1000 (Qwen-VL, GLM)."""
    box = _four(entry.get("box_2d")) or _four(entry.get("bbox_2d"))
    return None if box is None else _scaled(box, 1000.0, width, height)


def percent(entry: dict[str, Any], width: int, height: int) -> list[float] | None:
    """``box_2d`` ``[x_min, y_min, x_max, y_max]`` in percent (Grok)."""
    box = _four(entry.get("box_2d"))
    return None if box is None else _scaled(box, 100.0, width, height)


def absolute(uploaded: Callable[[int, int], tuple[int, int]]) -> Convention:
    """``box_2d`` ``[x_min, y_min, x_max, y_max]`` in pixels of the image as it was uploaded
    (``uploaded(width, height)``: its size after the block's resize), mapped back."""

    def convert(entry: dict[str, Any], width: int, height: int) -> list[float] | None:
        box = _four(entry.get("box_2d"))
        if box is None:
            return None
        up_w, up_h = uploaded(width, height)
        x1, x2 = (min(max(v, 0.0), up_w) * width / up_w for v in (box[0], box[2]))
        y1, y2 = (min(max(v, 0.0), up_h) * height / up_h for v in (box[1], box[3]))
        return [x1, y1, x2, y2]

    return convert


def max_edge_size(max_edge: int) -> Callable[[int, int], tuple[int, int]]:
    """An image scaled down (never up) to ``max_edge`` on its longest side, as the reference's
    OpenAI blocks upload it for detection (2048)."""

    def size(width: int, height: int) -> tuple[int, int]:
        if max(width, height) <= max_edge:
            return width, height
        if width >= height:
            return max_edge, max(round(height * max_edge / width), 1)
        return max(round(width * max_edge / height), 1), max_edge

    return size


def anthropic_upload_size(
    width: int, height: int, max_edge: int = 2576, max_tokens: int = 4784
) -> tuple[int, int]:
    """The size Claude resizes an image to (tiles of 28 px, an edge and a token budget), as
    Anthropic's vision documentation computes it: its pixel answers are on this size."""

    def fits(w: int, h: int) -> bool:
        tiles_w, tiles_h = math.ceil(w / 28), math.ceil(h / 28)
        return (
            tiles_w * 28 <= max_edge
            and tiles_h * 28 <= max_edge
            and tiles_w * tiles_h <= max_tokens
        )

    if fits(width, height):
        return width, height
    if height > width:
        h, w = anthropic_upload_size(height, width, max_edge, max_tokens)
        return w, h
    ratio = width / height
    low, high = 1, width
    while low + 1 < high:
        middle = (low + high) // 2
        if fits(middle, max(round(middle / ratio), 1)):
            low = middle
        else:
            high = middle
    return low, max(round(low / ratio), 1)


CONVENTIONS: dict[str, Convention] = {
    "normalized": normalized,
    "absolute": absolute(lambda w, h: (w, h)),
    "yxyx_1000": yxyx_1000,
    "xyxy_1000": xyxy_1000,
    "named_1000": named_1000,
    "percent": percent,
}
"""Every convention by name; ``absolute`` here is on the image as it is (no resize)."""

_LABELS = ("class_name", "label", "class", "description")


def entries(payload: Any) -> list[dict[str, Any]]:
    """A detection answer's entries: a list, ``{"detections": [...]}``, or one entry."""
    if isinstance(payload, dict):
        payload = payload.get("detections", [payload])
    if not isinstance(payload, list):
        raise ValueError("not a list of detections")
    return [e for e in payload if isinstance(e, dict)]


def read_boxes(
    payload: Any,
    convention: Convention,
    width: int,
    height: int,
    classes: list[str],
    *,
    skip_malformed: bool = True,
) -> list[Box]:
    """Each entry's box in the image's pixels (rounded, as the reference rounds), its label
    (``class_id`` -1 when not in ``classes``) and confidence (1.0 when the model gave none).
    An entry with no well-formed box is skipped, or with ``skip_malformed=False`` an error
    (``ValueError``), as each of the reference's parsers does."""
    index = {name: i for i, name in enumerate(classes)}
    boxes = []
    for entry in entries(payload):
        xyxy = convention(entry, width, height)
        if xyxy is None:
            if skip_malformed:
                continue
            raise ValueError(f"a detection without a box: {sorted(entry)}")
        label = _label(entry, _LABELS)
        x1, y1, x2, y2 = (float(round(v)) for v in xyxy)
        boxes.append(
            Box(
                (x1, y1, x2, y2),
                label,
                index.get(label, -1),
                _confidence(entry.get("confidence", 1.0)),
            )
        )
    return boxes
