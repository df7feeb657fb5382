"""Drawing blocks on top of supervision's annotators."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import supervision as sv

from .analytics import TrackMemory
from .base import Block, BlockSettings, BuildContext, FrameState, WorkflowImage, select, setting
from .checks import anchor
from .fields import DETECTION_KINDS, IMAGE, VIDEO_METADATA, FieldSpec, Takes

__all__ = [
    "AnnotatorBlock",
    "BlurVisualizationBlock",
    "BoundingBoxVisualizationBlock",
    "DotVisualizationBlock",
    "HeatmapVisualizationBlock",
    "LabelVisualizationBlock",
    "LabelVisualizationBlockV2",
    "PixelateVisualizationBlock",
]


@dataclass(frozen=True, kw_only=True)
class AnnotatorSettings(BlockSettings):
    copy_image: bool = setting(FieldSpec(default=True, type="boolean"))


class AnnotatorBlock(Block):
    """Image and detections in, the image with supervision's drawing on a copy out."""

    inputs = {
        "image": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "predictions": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = AnnotatorSettings
    outputs = {"image": IMAGE}

    def __init__(self, name: str, config: AnnotatorSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.copy_image = bool(config.copy_image)

    def draw(self, scene: Any, detections: sv.Detections) -> Any:
        raise NotImplementedError

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        image: WorkflowImage = inputs["image"]
        # Copy unless told not to: the input image may be another output of this workflow.
        scene = image.numpy.copy() if self.copy_image else image.numpy
        scene = self.draw(scene, inputs["predictions"])
        frame.add_time("annotate", started)
        return {"image": image.derived(scene)}


@dataclass(frozen=True, kw_only=True)
class BoundingBoxVisualizationSettings(AnnotatorSettings):
    thickness: int = setting(FieldSpec(default=2, type="integer", minimum=1))


class BoundingBoxVisualizationBlock(AnnotatorBlock):
    """Draws the predictions' boxes on the image (supervision's BoxAnnotator)."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/bounding_box_visualization@v1",
        "BoundingBoxVisualization",
    )
    inputs = {**AnnotatorBlock.inputs}
    Settings: ClassVar[type[BlockSettings]] = BoundingBoxVisualizationSettings

    def __init__(
        self, name: str, config: BoundingBoxVisualizationSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        self.annotator = sv.BoxAnnotator(thickness=config.thickness)

    def draw(self, scene: Any, detections: sv.Detections) -> Any:
        return self.annotator.annotate(scene, detections)


_TEXT = {
    "Class": lambda d, i: str(d.data["class_name"][i]),
    "Confidence": lambda d, i: f"{d.confidence[i]:.2f}",
    "Class and Confidence": lambda d, i: f"{d.data['class_name'][i]} {d.confidence[i]:.2f}",
    "Tracker Id": lambda d, i: "" if d.tracker_id is None else str(d.tracker_id[i]),
    "Time In Zone": lambda d, i: (
        f"{d.data['time_in_zone'][i]:.1f}s" if "time_in_zone" in d.data else ""
    ),
    "Index": lambda d, i: str(i),
    "Area": lambda d, i: f"{float(d.box_area[i]):.0f}",
}


@dataclass(frozen=True, kw_only=True)
class LabelVisualizationSettings(AnnotatorSettings):
    text: Literal[
        "Class", "Confidence", "Class and Confidence", "Tracker Id", "Time In Zone", "Index", "Area"
    ] = setting(FieldSpec(default="Class", choices=tuple(_TEXT)))
    text_position: Literal[
        "CENTER",
        "CENTER_LEFT",
        "CENTER_RIGHT",
        "TOP_CENTER",
        "TOP_LEFT",
        "TOP_RIGHT",
        "BOTTOM_LEFT",
        "BOTTOM_CENTER",
        "BOTTOM_RIGHT",
        "CENTER_OF_MASS",
    ] = setting(FieldSpec(default="TOP_LEFT", choices=tuple(p.name for p in sv.Position)))
    text_scale: float = setting(FieldSpec(default=1.0, type="number", above=0))
    text_thickness: int = setting(FieldSpec(default=1, type="integer", minimum=1))
    text_padding: int = setting(FieldSpec(default=10, type="integer", minimum=0))


class LabelVisualizationBlock(AnnotatorBlock):
    """Draws the predictions' labels on the image (supervision's LabelAnnotator)."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/label_visualization@v1",
        "LabelVisualization",
    )
    inputs = {**AnnotatorBlock.inputs}
    Settings: ClassVar[type[BlockSettings]] = LabelVisualizationSettings

    def __init__(
        self, name: str, config: LabelVisualizationSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        self.label = _TEXT[config.text]
        self.annotator = sv.LabelAnnotator(
            text_position=sv.Position[config.text_position],
            text_scale=config.text_scale,
            text_thickness=config.text_thickness,
            text_padding=config.text_padding,
        )

    def draw(self, scene: Any, detections: sv.Detections) -> Any:
        labels = [self.label(detections, i) for i in range(len(detections))]
        return self.annotator.annotate(scene, detections, labels=labels)


@dataclass(frozen=True, kw_only=True)
class LabelVisualizationV2Settings(LabelVisualizationSettings):
    text_size_mode: Literal["Manual", "Automatic"] = setting(
        FieldSpec(default="Manual", choices=("Manual", "Automatic"))
    )


class LabelVisualizationBlockV2(LabelVisualizationBlock):
    """v2: ``text_size_mode`` ``Automatic`` scales the text with the frame, as the reference:
    ``text_scale`` at a 1080-pixel short side, proportionally elsewhere, within 0.3 to 5."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/label_visualization@v2",)
    inputs = {**LabelVisualizationBlock.inputs}
    Settings: ClassVar[type[BlockSettings]] = LabelVisualizationV2Settings

    def __init__(
        self, name: str, config: LabelVisualizationV2Settings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        self._automatic = config.text_size_mode == "Automatic"
        self._manual_scale = config.text_scale

    def draw(self, scene: Any, detections: sv.Detections) -> Any:
        if self._automatic:
            height, width = scene.shape[:2]
            scale = self._manual_scale * min(height, width) / 1080
            self.annotator.text_scale = min(5.0, max(0.3, scale))
        return super().draw(scene, detections)


def _padded(detections: sv.Detections, padding: int, shape: tuple[int, ...]) -> sv.Detections:
    """The boxes grown by ``padding`` on every side, within the image."""
    if padding == 0 or len(detections) == 0:
        return detections
    grown = select(detections, np.arange(len(detections)))
    height, width = shape[:2]
    grown.xyxy = sv.clip_boxes(
        detections.xyxy + np.array([-padding, -padding, padding, padding]), (width, height)
    )
    return grown


@dataclass(frozen=True, kw_only=True)
class BlurVisualizationSettings(AnnotatorSettings):
    kernel_size: int = setting(FieldSpec(default=15, type="integer", minimum=1))
    padding: int = setting(FieldSpec(default=0, type="integer", minimum=0))


class BlurVisualizationBlock(AnnotatorBlock):
    """Blurs inside each prediction's box, grown by ``padding`` (privacy: blur people)."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/blur_visualization@v1",
        "BlurVisualization",
    )
    inputs = {**AnnotatorBlock.inputs}
    Settings: ClassVar[type[BlockSettings]] = BlurVisualizationSettings

    def __init__(self, name: str, config: BlurVisualizationSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        context.limits.check_kernel(name, "kernel_size", config.kernel_size)
        self.annotator = sv.BlurAnnotator(kernel_size=config.kernel_size)
        self.padding = config.padding

    def draw(self, scene: Any, detections: sv.Detections) -> Any:
        return self.annotator.annotate(scene, _padded(detections, self.padding, scene.shape))


@dataclass(frozen=True, kw_only=True)
class PixelateVisualizationSettings(AnnotatorSettings):
    pixel_size: int = setting(FieldSpec(default=20, type="integer", minimum=1))


class PixelateVisualizationBlock(AnnotatorBlock):
    """Pixelates inside each prediction's box."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/pixelate_visualization@v1",
        "PixelateVisualization",
    )
    inputs = {**AnnotatorBlock.inputs}
    Settings: ClassVar[type[BlockSettings]] = PixelateVisualizationSettings

    def __init__(
        self, name: str, config: PixelateVisualizationSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        self.annotator = sv.PixelateAnnotator(pixel_size=config.pixel_size)

    def draw(self, scene: Any, detections: sv.Detections) -> Any:
        return self.annotator.annotate(scene, detections)


@dataclass(frozen=True, kw_only=True)
class DotVisualizationSettings(AnnotatorSettings):
    position: Any = setting(FieldSpec(default="CENTER"))
    radius: int = setting(FieldSpec(default=4, type="integer", minimum=1))
    outline_thickness: int = setting(FieldSpec(default=0, type="integer", minimum=0))


class DotVisualizationBlock(AnnotatorBlock):
    """A dot at each prediction's anchor point."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/dot_visualization@v1", "DotVisualization")
    inputs = {**AnnotatorBlock.inputs}
    Settings: ClassVar[type[BlockSettings]] = DotVisualizationSettings

    def __init__(self, name: str, config: DotVisualizationSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self.annotator = sv.DotAnnotator(
            radius=config.radius,
            position=anchor(name, "position", config.position),
            outline_thickness=config.outline_thickness,
        )

    def draw(self, scene: Any, detections: sv.Detections) -> Any:
        return self.annotator.annotate(scene, detections)


@dataclass(frozen=True, kw_only=True)
class HeatmapVisualizationSettings(AnnotatorSettings):
    position: Any = setting(FieldSpec(default="BOTTOM_CENTER"))
    opacity: float = setting(FieldSpec(default=0.2, type="number", minimum=0, maximum=1))
    radius: int = setting(FieldSpec(default=40, type="integer", minimum=1))
    kernel_size: int = setting(FieldSpec(default=25, type="integer", minimum=1))
    top_hue: int = setting(FieldSpec(default=0, type="integer", minimum=0))
    low_hue: int = setting(FieldSpec(default=125, type="integer", minimum=0))
    ignore_stationary: bool = setting(FieldSpec(default=True, type="boolean"))
    motion_threshold: float = setting(FieldSpec(default=25, type="number", minimum=0))


class HeatmapVisualizationBlock(AnnotatorBlock):
    """Where objects have been, accumulated over the stream (supervision's
    ``HeatMapAnnotator``). With ``ignore_stationary``, a tracked object adds heat only once it
    has moved ``motion_threshold`` pixels from where it last did, so a parked car or a
    seated person does not burn a hole in the map."""

    type_ids: ClassVar[tuple[str, ...]] = (
        "roboflow_core/heatmap_visualization@v1",
        "HeatmapVisualization",
    )
    inputs = {
        **AnnotatorBlock.inputs,
        "metadata": FieldSpec((VIDEO_METADATA,), default=None, takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = HeatmapVisualizationSettings

    def __init__(
        self, name: str, config: HeatmapVisualizationSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        context.limits.check_kernel(name, "kernel_size", config.kernel_size)
        self.position = anchor(name, "position", config.position)
        self.annotator = sv.HeatMapAnnotator(
            position=self.position,
            opacity=config.opacity,
            radius=config.radius,
            kernel_size=config.kernel_size,
            top_hue=config.top_hue,
            low_hue=config.low_hue,
        )
        self.ignore_stationary = config.ignore_stationary
        self.motion_threshold = config.motion_threshold
        self._moved_from: TrackMemory[np.ndarray] = TrackMemory()
        self._now = 0.0

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        self._now = frame.facts.seconds
        return super().run(inputs, frame)

    def draw(self, scene: Any, detections: sv.Detections) -> Any:
        if self.ignore_stationary and detections.tracker_id is not None:
            detections = select(detections, self._moving(detections))
        return self.annotator.annotate(scene, detections)

    def _moving(self, detections: sv.Detections) -> np.ndarray:
        self._moved_from.prune(self._now)
        points = detections.get_anchors_coordinates(self.position)
        moving = np.zeros(len(detections), dtype=bool)
        for i, track in enumerate(int(t) for t in detections.tracker_id):  # type: ignore[union-attr]
            last = self._moved_from.get(track)
            if last is None or float(np.linalg.norm(points[i] - last)) >= self.motion_threshold:
                # A new track marks its place; heat comes from moving on from there.
                moving[i] = last is not None
                self._moved_from.put(track, points[i], self._now)
            else:
                self._moved_from.put(track, last, self._now)  # still here: still remembered
        return moving
