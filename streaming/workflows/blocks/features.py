"""Finding one picture in another without a model: ``template_matching`` (every place the
template fits, by normalised cross-correlation), ``sift`` (SIFT keypoints and descriptors)
and ``sift_comparison`` v1 (two descriptor sets) and v2 (two images or descriptor sets, with
the matches drawn): Lowe's ratio test, and a match when enough pairs pass it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import cv2
import numpy as np
import supervision as sv

from .base import Block, BlockSettings, BuildContext, FrameState, WorkflowImage, setting
from .detection import stamped
from .fields import DETECTIONS, IMAGE, FieldSpec, Takes, fraction
from .image_ops import grey as in_grey

__all__ = [
    "SiftBlock",
    "SiftComparisonBlock",
    "SiftComparisonV2Block",
    "TemplateMatchingBlock",
    "good_matches",
    "sift",
]

DESCRIPTORS = "numpy_array"


def sift(pixels: np.ndarray) -> tuple[list[cv2.KeyPoint], np.ndarray | None]:
    grey = in_grey(pixels)
    everywhere = np.full(grey.shape, 255, np.uint8)  # no mask (the stubs want one)
    keypoints, descriptors = cv2.SIFT.create().detectAndCompute(grey, everywhere)
    return list(keypoints), descriptors


def _drawn(pixels: np.ndarray, keypoints: list[cv2.KeyPoint]) -> np.ndarray:
    """The image in grey with its keypoints drawn in colour."""
    grey = in_grey(pixels)
    out = cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR)
    return np.asarray(cv2.drawKeypoints(grey, keypoints, out))


def _described(keypoints: list[cv2.KeyPoint]) -> list[dict[str, Any]]:
    return [
        {
            "pt": (k.pt[0], k.pt[1]),
            "size": k.size,
            "angle": k.angle,
            "response": k.response,
            "octave": k.octave,
            "class_id": k.class_id,
        }
        for k in keypoints
    ]


def good_matches(first: Any, second: Any, ratio: float, matcher: str = "FlannBasedMatcher"):
    """The pairs that pass Lowe's ratio test (empty when either side has fewer than two)."""
    if first is None or second is None or len(first) < 2 or len(second) < 2:
        return []
    a, b = np.asarray(first, np.float32), np.asarray(second, np.float32)
    if matcher == "BFMatcher":
        pairs = cv2.BFMatcher(cv2.NORM_L2).knnMatch(a, b, k=2)
    else:
        flann = cv2.FlannBasedMatcher({"algorithm": 1, "trees": 5}, {"checks": 50})
        pairs = flann.knnMatch(a, b, k=2)
    return [p[0] for p in pairs if len(p) == 2 and p[0].distance < ratio * p[1].distance]


class SiftBlock(Block):
    """``keypoints`` (as dicts), ``descriptors`` (N x 128) and ``image`` (grey, with the
    keypoints drawn)."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/sift@v1",)
    inputs = {"image": FieldSpec((IMAGE,), takes=Takes.FRAME)}
    outputs = {"image": IMAGE, "keypoints": "image_keypoints", "descriptors": DESCRIPTORS}

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image: WorkflowImage = inputs["image"]
        keypoints, descriptors = sift(image.numpy)
        drawn = _drawn(image.numpy, keypoints)
        return {
            "image": image.derived(drawn),
            "keypoints": _described(keypoints),
            "descriptors": descriptors,
        }


@dataclass(frozen=True, kw_only=True)
class ComparisonSettings(BlockSettings):
    good_matches_threshold: int = setting(FieldSpec(default=50, type="integer", minimum=1))
    ratio_threshold: float = setting(fraction(0.7))


class SiftComparisonBlock(Block):
    """v1: two descriptor sets (``sift``'s); ``good_matches_count`` and ``images_match``
    (at least ``good_matches_threshold`` pairs pass the ratio test)."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/sift_comparison@v1",)
    inputs = {
        "descriptor_1": FieldSpec((DESCRIPTORS,), takes=Takes.FRAME),
        "descriptor_2": FieldSpec((DESCRIPTORS,), takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = ComparisonSettings
    outputs = {"good_matches_count": "integer", "images_match": "boolean"}

    def __init__(self, name: str, config: ComparisonSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.config = config

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        c = self.config
        count = len(good_matches(inputs["descriptor_1"], inputs["descriptor_2"], c.ratio_threshold))
        return {"good_matches_count": count, "images_match": count >= c.good_matches_threshold}


@dataclass(frozen=True, kw_only=True)
class ComparisonV2Settings(ComparisonSettings):
    matcher: Literal["FlannBasedMatcher", "BFMatcher"] = setting(
        FieldSpec(default="FlannBasedMatcher", choices=("FlannBasedMatcher", "BFMatcher"))
    )
    visualize: bool = setting(FieldSpec(default=False, type="boolean"))


class SiftComparisonV2Block(SiftComparisonBlock):
    """v2: each side an image (described here) or descriptors; with ``visualize``, each
    image's keypoints and the matches drawn."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/sift_comparison@v2",)
    inputs = {
        "input_1": FieldSpec((IMAGE, DESCRIPTORS), takes=Takes.FRAME),
        "input_2": FieldSpec((IMAGE, DESCRIPTORS), takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = ComparisonV2Settings
    outputs = {
        "images_match": "boolean",
        "good_matches_count": "integer",
        "keypoints_1": "image_keypoints",
        "descriptors_1": DESCRIPTORS,
        "keypoints_2": "image_keypoints",
        "descriptors_2": DESCRIPTORS,
        "visualization_1": IMAGE,
        "visualization_2": IMAGE,
        "visualization_matches": IMAGE,
    }

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        c = self.config
        assert isinstance(c, ComparisonV2Settings)
        out: dict[str, Any] = {}
        found = []
        for side in ("1", "2"):
            given = inputs[f"input_{side}"]
            keypoints: list[cv2.KeyPoint] | None = None
            if isinstance(given, WorkflowImage):
                keypoints, descriptors = sift(given.numpy)
                shown = given.derived(_drawn(given.numpy, keypoints)) if c.visualize else None
                out |= {f"keypoints_{side}": _described(keypoints), f"visualization_{side}": shown}
            else:
                descriptors = given
                out |= {f"keypoints_{side}": None, f"visualization_{side}": None}
            out[f"descriptors_{side}"] = descriptors
            found.append((given, keypoints, descriptors))
        (first, kp1, d1), (second, kp2, d2) = found
        matches = good_matches(d1, d2, c.ratio_threshold, c.matcher)
        picture = None
        if c.visualize and kp1 is not None and kp2 is not None and matches:
            height = max(first.numpy.shape[0], second.numpy.shape[0])
            canvas = np.zeros((height, first.numpy.shape[1] + second.numpy.shape[1], 3), np.uint8)
            drawn = np.asarray(
                cv2.drawMatchesKnn(
                    first.numpy,
                    kp1,
                    second.numpy,
                    kp2,
                    [[m] for m in matches],
                    canvas,
                    flags=cv2.DrawMatchesFlags_NOT_DRAW_SINGLE_POINTS,
                )
            )
            picture = first.derived(drawn)
        count = len(matches)
        return out | {
            "good_matches_count": count,
            "visualization_matches": picture,
            "images_match": count >= c.good_matches_threshold,
        }


@dataclass(frozen=True, kw_only=True)
class TemplateSettings(BlockSettings):
    matching_threshold: float = setting(FieldSpec(default=0.8, type="number"))
    apply_nms: bool = setting(FieldSpec(default=True, type="boolean"))
    nms_threshold: float = setting(fraction(0.5))


class TemplateMatchingBlock(Block):
    """``predictions``: a box (class ``template_match``) wherever the template correlates
    with the image at ``matching_threshold`` or more, overlaps merged by NMS;
    ``number_of_matches``."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/template_matching@v1",)
    inputs = {
        "image": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "template": FieldSpec((IMAGE,), takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = TemplateSettings
    outputs = {"predictions": DETECTIONS, "number_of_matches": "integer"}

    def __init__(self, name: str, config: TemplateSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.config = config

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        image: WorkflowImage = inputs["image"]
        template = in_grey(inputs["template"].numpy)
        pixels = in_grey(image.numpy)
        th, tw = template.shape[:2]
        if th > pixels.shape[0] or tw > pixels.shape[1]:
            ys, xs = np.array([], int), np.array([], int)  # a template larger than the image
        else:
            scores = cv2.matchTemplate(pixels, template, cv2.TM_CCOEFF_NORMED)
            ys, xs = np.nonzero(scores >= self.config.matching_threshold)
        detections = sv.Detections(
            xyxy=np.stack([xs, ys, xs + tw, ys + th], axis=1).astype(np.float32).reshape(-1, 4),
            confidence=np.ones(len(xs), np.float32),
            class_id=np.zeros(len(xs), int),
            data={"class_name": np.array(["template_match"] * len(xs), dtype=str)},
        )
        if self.config.apply_nms and len(detections):
            detections = detections.with_nms(threshold=self.config.nms_threshold)
        return {"predictions": stamped(image, detections), "number_of_matches": len(detections)}
