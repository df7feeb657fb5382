"""Drawing what the other model types give, on supervision's annotators: masks and their
outlines (``mask_visualization``, ``polygon_visualization``), keypoints and skeletons
(``keypoint_visualization``) and a classifier's answer (``classification_label_visualization``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from .base import Block, BlockSettings, BuildContext, FrameState, WorkflowImage, setting
from .checks import color
from .fields import CLASSIFICATION, DETECTION_KINDS, IMAGE, FieldSpec, Takes, fraction
from .visualization import AnnotatorBlock, AnnotatorSettings

__all__ = [
    "ClassificationLabelVisualizationBlock",
    "KeypointVisualizationBlock",
    "MaskVisualizationBlock",
    "ModelComparisonVisualizationBlock",
    "PolygonVisualizationBlock",
]


@dataclass(frozen=True, kw_only=True)
class MaskVisualizationSettings(AnnotatorSettings):
    opacity: float = setting(FieldSpec(default=0.5, type="number", minimum=0, maximum=1))


class MaskVisualizationBlock(AnnotatorBlock):
    """Each detection's mask filled in its class's colour (supervision's MaskAnnotator);
    detections without masks are left as they are."""

    type_ids = ("roboflow_core/mask_visualization@v1", "MaskVisualization")
    inputs = {**AnnotatorBlock.inputs}
    Settings: ClassVar[type[BlockSettings]] = MaskVisualizationSettings

    def __init__(self, name: str, config: MaskVisualizationSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.annotator = sv.MaskAnnotator(opacity=config.opacity)

    def draw(self, scene: Any, detections: sv.Detections) -> Any:
        return scene if detections.mask is None else self.annotator.annotate(scene, detections)


@dataclass(frozen=True, kw_only=True)
class PolygonVisualizationSettings(AnnotatorSettings):
    thickness: int = setting(FieldSpec(default=2, type="integer", minimum=1))


class PolygonVisualizationBlock(AnnotatorBlock):
    """Each mask's outline (supervision's PolygonAnnotator)."""

    type_ids = (
        "roboflow_core/polygon_visualization@v1",
        "roboflow_core/polygon_visualization@v2",  # the same fields
        "PolygonVisualization",
    )
    inputs = {**AnnotatorBlock.inputs}
    Settings: ClassVar[type[BlockSettings]] = PolygonVisualizationSettings

    def __init__(
        self, name: str, config: PolygonVisualizationSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        thickness = config.thickness
        self.annotator = sv.PolygonAnnotator(thickness=thickness)

    def draw(self, scene: Any, detections: sv.Detections) -> Any:
        return scene if detections.mask is None else self.annotator.annotate(scene, detections)


@dataclass(frozen=True, kw_only=True)
class KeypointVisualizationSettings(AnnotatorSettings):
    annotator_type: Any = setting(FieldSpec(default="edge"))
    color: Any = setting(FieldSpec(default="#A351FB"))
    text_color: Any = setting(FieldSpec(default="black"))
    text_scale: float = setting(FieldSpec(default=0.5, type="number", minimum=0.01, maximum=100))
    text_thickness: int = setting(FieldSpec(default=1, type="integer", minimum=1))
    text_padding: int = setting(FieldSpec(default=10, type="integer", minimum=0))
    thickness: int = setting(FieldSpec(default=2, type="integer", minimum=1))
    radius: int = setting(FieldSpec(default=10, type="integer", minimum=1))
    edges: Any = setting(FieldSpec(default=None))


class KeypointVisualizationBlock(AnnotatorBlock):
    """Keypoints as a skeleton (``edge``), dots (``vertex``) or named dots (``vertex_label``).
    The skeleton is ``edges`` (pairs of keypoint indexes from 0) if given, else the model's
    (its manifest's ``skeleton``), else supervision's for that many keypoints (COCO's 17)."""

    type_ids = ("roboflow_core/keypoint_visualization@v1", "KeypointVisualization")
    inputs = {**AnnotatorBlock.inputs}
    Settings: ClassVar[type[BlockSettings]] = KeypointVisualizationSettings

    def __init__(
        self, name: str, config: KeypointVisualizationSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        kind = config.annotator_type
        if kind not in ("edge", "vertex", "vertex_label"):
            raise WorkflowCompilationError(
                f"step '{name}': annotator_type must be edge, vertex or vertex_label, got {kind!r}"
            )
        self.kind = kind
        self.color = color(name, "color", config.color)
        self.thickness = config.thickness
        edges = config.edges
        if edges is not None and not (
            isinstance(edges, list)
            and all(
                isinstance(e, list | tuple) and len(e) == 2 and all(isinstance(i, int) for i in e)
                for e in edges
            )
        ):
            raise WorkflowCompilationError(
                f"step '{name}': edges must be a list of [from, to] keypoint indexes"
            )
        self.edges = [tuple(e) for e in edges] if edges is not None else None
        self.vertices = sv.VertexAnnotator(color=self.color, radius=config.radius)
        self.labels = sv.VertexLabelAnnotator(
            color=self.color,
            text_color=color(name, "text_color", config.text_color),
            text_scale=config.text_scale,
            text_thickness=config.text_thickness,
            text_padding=config.text_padding,
        )

    def draw(self, scene: Any, detections: sv.Detections) -> Any:
        if "keypoints_xy" not in detections.data or len(detections) == 0:
            return scene
        xy = np.asarray(detections.data["keypoints_xy"], dtype=np.float32)
        keypoints = sv.KeyPoints(
            xy=xy,
            class_id=np.asarray(detections.class_id, dtype=int)
            if detections.class_id is not None
            else None,
            keypoint_confidence=np.asarray(detections.data["keypoints_confidence"], np.float32),
        )
        if self.kind == "vertex":
            return self.vertices.annotate(scene, keypoints)
        if self.kind == "vertex_label":
            names = [str(n) for n in np.asarray(detections.data["keypoints_class_name"])[0]]
            return self.labels.annotate(scene, keypoints, labels=names)
        edges = self.edges or detections.metadata.get("skeleton")
        # supervision counts keypoints from 1; our edges (and manifests) from 0.
        one_based = [(a + 1, b + 1) for a, b in edges] if edges else None
        annotator = sv.EdgeAnnotator(color=self.color, thickness=self.thickness, edges=one_based)
        return annotator.annotate(scene, keypoints)


_CLASSIFICATION_TEXT = {
    "Class": lambda c: c["class"],
    "Confidence": lambda c: f"{c['confidence']:.2f}",
    "Class and Confidence": lambda c: f"{c['class']} {c['confidence']:.2f}",
}


@dataclass(frozen=True, kw_only=True)
class ClassificationLabelVisualizationSettings(BlockSettings):
    copy_image: Any = setting(FieldSpec(default=True))
    text: Any = setting(FieldSpec(default="Class"))
    text_position: Any = setting(FieldSpec(default="TOP_LEFT"))
    text_color: Any = setting(FieldSpec(default="WHITE"))
    text_scale: float = setting(FieldSpec(default=1.0, type="number", minimum=0.01, maximum=100))
    text_thickness: int = setting(FieldSpec(default=1, type="integer", minimum=1))
    text_padding: int = setting(FieldSpec(default=10, type="integer", minimum=0))


class ClassificationLabelVisualizationBlock(Block):
    """A classifier's answer written on the frame: its top class (multi-label: every class
    it predicted), at ``text_position``."""

    type_ids = ("roboflow_core/classification_label_visualization@v1",)
    inputs = {
        "image": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "predictions": FieldSpec((CLASSIFICATION,), takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = ClassificationLabelVisualizationSettings
    outputs = {"image": IMAGE}

    def __init__(
        self, name: str, config: ClassificationLabelVisualizationSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        self.copy_image = bool(config.copy_image)
        if config.text not in _CLASSIFICATION_TEXT:
            raise WorkflowCompilationError(
                f"step '{name}': text must be one of {sorted(_CLASSIFICATION_TEXT)}, "
                f"got {config.text!r}"
            )
        self.text = _CLASSIFICATION_TEXT[config.text]
        try:
            self.position = sv.Position[str(config.text_position)]
        except KeyError:
            raise WorkflowCompilationError(
                f"step '{name}': unknown text_position {config.text_position!r}"
            ) from None
        self.text_color = color(name, "text_color", config.text_color)
        self.scale = config.text_scale
        self.thickness = config.text_thickness
        self.padding = config.text_padding

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        image: WorkflowImage = inputs["image"]
        scene = image.numpy.copy() if self.copy_image else image.numpy
        lines = self.lines(inputs["predictions"] or {})
        height, width = scene.shape[:2]
        step = int(30 * self.scale) + self.padding
        anchor_x, anchor_y = _anchor(self.position, width, height, step * len(lines))
        for i, line in enumerate(lines):
            sv.draw_text(
                scene,
                line,
                sv.Point(anchor_x, anchor_y + i * step + step // 2),
                text_color=self.text_color,
                text_scale=self.scale,
                text_thickness=self.thickness,
                text_padding=self.padding // 2,
                background_color=sv.Color.BLACK,
            )
        frame.add_time("annotate", started)
        return {"image": image.derived(scene)}

    def lines(self, prediction: dict[str, Any]) -> list[str]:
        if "predicted_classes" in prediction:  # multi-label
            every = prediction.get("predictions", {})
            return [
                self.text({"class": c, "confidence": every.get(c, {}).get("confidence", 0.0)})
                for c in prediction["predicted_classes"]
            ]
        ranked = prediction.get("predictions") or []
        return [self.text(ranked[0])] if ranked else []


def _anchor(position: sv.Position, width: int, height: int, block: int) -> tuple[int, int]:
    """Where a block of text lines ``block`` pixels tall starts (its middle column)."""
    name = position.name
    x = width // 6 if "LEFT" in name else width * 5 // 6 if "RIGHT" in name else width // 2
    if "TOP" in name:
        return x, 0
    if "BOTTOM" in name:
        return x, max(0, height - block)
    return x, max(0, (height - block) // 2)


@dataclass(frozen=True, kw_only=True)
class ModelComparisonSettings(AnnotatorSettings):
    color_a: str = setting(FieldSpec(default="GREEN", type="string"))
    color_b: str = setting(FieldSpec(default="RED", type="string"))
    background_color: str = setting(FieldSpec(default="BLACK", type="string"))
    opacity: float = setting(fraction(0.7))


def _covered(detections: sv.Detections, shape: tuple[int, ...]) -> np.ndarray:
    """Where the detections lie: their masks, else their boxes."""
    covered = np.zeros(shape[:2], bool)
    if detections.mask is not None:
        for mask in np.asarray(detections.mask):
            covered |= mask.astype(bool)
        return covered
    for x1, y1, x2, y2 in detections.xyxy.astype(int):
        covered[max(0, y1) : y2, max(0, x1) : x2] = True
    return covered


class ModelComparisonVisualizationBlock(AnnotatorBlock):
    """Two models' detections compared: where only A found something tinted ``color_a``,
    only B ``color_b``, neither ``background_color``; where both did, the image as it is."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/model_comparison_visualization@v1",)
    inputs = {
        "image": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "predictions_a": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME),
        "predictions_b": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = ModelComparisonSettings

    def __init__(self, name: str, config: ModelComparisonSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.tints = [
            color(name, field, getattr(config, field)).as_bgr()
            for field in ("background_color", "color_a", "color_b")
        ]
        self.opacity = config.opacity

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        image: WorkflowImage = inputs["image"]
        scene = image.numpy.copy() if self.copy_image else image.numpy
        a = _covered(inputs["predictions_a"], scene.shape)
        b = _covered(inputs["predictions_b"], scene.shape)
        for where, tint in zip((~a & ~b, a & ~b, b & ~a), self.tints, strict=True):
            blended = scene[where] * (1 - self.opacity) + np.array(tint) * self.opacity
            scene[where] = blended.round().astype(np.uint8)
        frame.add_time("annotate", started)
        return {"image": image.derived(scene)}
