"""``stitch_ocr_detections`` v1 and v2: an OCR step's (or a character detector's) boxes,
each with its text as the class name, read into one string in reading order.

v1 groups boxes into lines by their leading edge rounded to ``tolerance`` pixels; v2 adds
``otsu`` (lines by half the median box height; within a line, gaps normalised by the boxes'
widths and split into "inside a word" and "between words" by Otsu's threshold, when the gaps
really are of two kinds) and ``collimate`` (lines grown greedily from box to following box,
for skewed text). Lines join with a newline (horizontal text) or a space (vertical)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import supervision as sv

from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import DETECTION_KINDS, FieldSpec, Takes

__all__ = ["StitchOcrDetectionsBlock", "StitchOcrDetectionsV2Block", "stitched"]

Direction = Literal[
    "left_to_right", "right_to_left", "vertical_top_to_bottom", "vertical_bottom_to_top", "auto"
]
_DIRECTIONS = (
    "left_to_right",
    "right_to_left",
    "vertical_top_to_bottom",
    "vertical_bottom_to_top",
    "auto",
)
_BACKWARDS = ("right_to_left", "vertical_bottom_to_top")


def _vertical(direction: str) -> bool:
    return direction.startswith("vertical")


def _direction(detections: sv.Detections, chosen: str) -> str:
    """``auto``: horizontal when boxes are wider than tall on average, else vertical."""
    if chosen != "auto":
        return chosen
    if not len(detections):
        return "left_to_right"
    xyxy = detections.xyxy.astype(float)
    wide = np.mean(xyxy[:, 2] - xyxy[:, 0]) > np.mean(xyxy[:, 3] - xyxy[:, 1])
    return "left_to_right" if wide else "vertical_top_to_bottom"


def _line_separator(direction: str) -> str:
    return " " if _vertical(direction) else "\n"


def _along(xyxy: np.ndarray, direction: str) -> np.ndarray:
    """Boxes with the reading axis first: x1, y1, x2, y2 for horizontal text, y, x for
    vertical."""
    return xyxy[:, [1, 0, 3, 2]] if _vertical(direction) else xyxy


def by_tolerance(
    texts: np.ndarray, xyxy: np.ndarray, direction: str, tolerance: int, delimiter: str
) -> str:
    """v1's algorithm: lines keyed by the line edge rounded to ``tolerance`` pixels."""
    boxes = _along(xyxy.round().astype(int), direction)
    keys = np.round(boxes[:, 1] / tolerance) * tolerance
    parts: list[str] = []
    for n, key in enumerate(
        sorted(set(keys.tolist()), reverse=direction == "vertical_bottom_to_top")
    ):
        members = np.flatnonzero(keys == key)
        starts = boxes[members, 0]
        order = np.argsort(-starts if direction in _BACKWARDS else starts, kind="stable")
        if n:
            parts.append(_line_separator(direction))
        parts.extend(texts[members[order]])
    return delimiter.join(parts)


def _otsu(gaps: np.ndarray) -> tuple[float, bool]:
    """The threshold that best splits ``gaps`` in two, and whether they are two kinds at all
    (the upper group's mean clearly positive and well apart from the lower's)."""
    if len(gaps) < 2:
        return 0.0, False
    edges = np.histogram_bin_edges(gaps, bins=min(50, len(gaps)))
    best, split, low, high = 0.0, 0.0, 0.0, 0.0
    for t in (edges[:-1] + edges[1:]) / 2:
        below, above = gaps[gaps <= t], gaps[gaps > t]
        if not len(below) or not len(above):
            continue
        variance = len(below) * len(above) * (below.mean() - above.mean()) ** 2
        if variance > best:
            best, split, low, high = variance, float(t), below.mean(), above.mean()
    return split, bool(high > 0.3 and abs(high - low) > 0.3)


def by_gaps(
    texts: np.ndarray, xyxy: np.ndarray, direction: str, delimiter: str, multiplier: float
) -> str:
    """v2's ``otsu``: resolution-invariant word breaks from the gaps' two kinds."""
    boxes = _along(xyxy.astype(float), direction)
    centre = (boxes[:, :2] + boxes[:, 2:]) / 2
    size = boxes[:, 2:] - boxes[:, :2]
    tolerance = float(np.median(size[:, 1])) * 0.5
    lines: list[list[int]] = []
    line_at = 0.0
    for i in np.argsort(centre[:, 1], kind="stable"):
        if lines and abs(centre[i, 1] - line_at) <= tolerance:
            lines[-1].append(int(i))
            line_at = float(np.mean(centre[lines[-1], 1]))
        else:
            lines.append([int(i)])
            line_at = float(centre[i, 1])
    lines.sort(
        key=lambda m: float(np.mean(centre[m, 1])), reverse=direction == "vertical_bottom_to_top"
    )
    backwards = direction in _BACKWARDS
    ordered, gaps_of = [], []
    for members in lines:
        m = np.array(members)
        m = m[np.argsort(-centre[m, 0] if backwards else centre[m, 0], kind="stable")]
        ordered.append(m)
        step = np.abs(np.diff(centre[m, 0]))
        scale = (size[m[1:], 0] + size[m[:-1], 0]) / 2
        gaps_of.append(np.where(scale > 0, (step - scale) / np.where(scale > 0, scale, 1), 0.0))
    every = np.concatenate(gaps_of) if gaps_of else np.array([])
    threshold, two_kinds = _otsu(every)
    threshold *= multiplier
    word_separator = delimiter or " "
    out = []
    for m, gaps in zip(ordered, gaps_of, strict=True):
        if not two_kinds or len(m) == 1:
            out.append(delimiter.join(texts[m]))
            continue
        words: list[list[str]] = [[texts[m[0]]]]
        for gap, i in zip(gaps, m[1:], strict=True):
            if gap > threshold:
                words.append([])
            words[-1].append(texts[i])
        out.append(word_separator.join(delimiter.join(w) for w in words))
    return _line_separator(direction).join(out)


def by_collimation(
    texts: np.ndarray, xyxy: np.ndarray, direction: str, delimiter: str, tolerance: int
) -> str:
    """v2's ``collimate``: each line grows from its last box to every box that follows it
    (further along, and across by less than half the larger box plus ``tolerance``)."""
    boxes = _along(xyxy.astype(float), direction)
    centre = (boxes[:, :2] + boxes[:, 2:]) / 2
    across = boxes[:, 3] - boxes[:, 1]
    backwards = direction in ("right_to_left", "vertical_bottom_to_top")
    remaining = sorted(range(len(texts)), key=lambda i: centre[i, 0], reverse=backwards)

    def follows(parent: int, child: int) -> bool:
        aligned = (
            abs(centre[parent, 1] - centre[child, 1])
            < max(across[parent], across[child]) / 2 + tolerance
        )
        further = (
            centre[child, 0] <= centre[parent, 0]
            if backwards
            else centre[parent, 0] <= centre[child, 0]
        )
        return bool(aligned and further)

    lines = [[remaining.pop(0)]]
    while remaining:
        grown = False
        for line in lines:
            for candidate in list(remaining):
                if follows(line[-1], candidate):
                    line.append(candidate)
                    remaining.remove(candidate)
                    grown = True
        if not grown and remaining:
            lines.append([remaining.pop(0)])
    lines.sort(
        key=lambda m: float(np.mean(centre[m, 1])), reverse=direction == "vertical_bottom_to_top"
    )
    return _line_separator(direction).join(delimiter.join(texts[m]) for m in lines)


def stitched(
    detections: sv.Detections,
    algorithm: str,
    direction: str,
    delimiter: str,
    tolerance: int,
    multiplier: float = 1.0,
    collimate_tolerance: int = 10,
) -> str:
    if not len(detections):
        return ""
    direction = _direction(detections, direction)
    texts = np.asarray(
        detections.data.get("class_name", np.array([""] * len(detections))), dtype=object
    )
    if algorithm == "otsu":
        return by_gaps(texts, detections.xyxy, direction, delimiter, multiplier)
    if algorithm == "collimate":
        return by_collimation(texts, detections.xyxy, direction, delimiter, collimate_tolerance)
    return by_tolerance(texts, detections.xyxy, direction, tolerance, delimiter)


@dataclass(frozen=True, kw_only=True)
class StitchSettings(BlockSettings):
    reading_direction: Direction = setting(FieldSpec(choices=_DIRECTIONS))
    tolerance: int = setting(FieldSpec(default=10, type="integer", minimum=1))
    delimiter: str = setting(FieldSpec(default="", type="string"))


@dataclass(frozen=True, kw_only=True)
class StitchV2Settings(StitchSettings):
    stitching_algorithm: Literal["tolerance", "otsu", "collimate"] = setting(
        FieldSpec(default="tolerance", choices=("tolerance", "otsu", "collimate"))
    )
    otsu_threshold_multiplier: float = setting(FieldSpec(default=1.0, type="number", above=0.0))
    collimate_tolerance: int = setting(FieldSpec(default=10, type="integer", minimum=0))
    reading_direction: Direction = setting(FieldSpec(default="auto", choices=_DIRECTIONS))


class StitchOcrDetectionsBlock(Block):
    """v1: boxes into lines by ``tolerance``; ``reading_direction`` has no default."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/stitch_ocr_detections@v1",)
    inputs = {"predictions": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = StitchSettings
    outputs = {"ocr_text": "string"}

    def __init__(self, name: str, config: StitchSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.config = config

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        config = self.config
        algorithm = getattr(config, "stitching_algorithm", "tolerance")
        multiplier = getattr(config, "otsu_threshold_multiplier", 1.0)
        collimate = getattr(config, "collimate_tolerance", 10)
        text = stitched(
            inputs["predictions"],
            algorithm,
            config.reading_direction,
            config.delimiter,
            config.tolerance,
            multiplier,
            collimate,
        )
        return {"ocr_text": text}


class StitchOcrDetectionsV2Block(StitchOcrDetectionsBlock):
    """v2: ``auto`` direction by default, and the ``otsu`` and ``collimate`` algorithms."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/stitch_ocr_detections@v2",)
    inputs = StitchOcrDetectionsBlock.inputs
    Settings: ClassVar[type[BlockSettings]] = StitchV2Settings
