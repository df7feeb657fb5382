"""Model manifest: what a model directory holds and how to feed and decode it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field, model_validator

__all__ = [
    "MANIFEST_FILE",
    "MODEL_NAME",
    "TASK_OF_DECODER",
    "BackendName",
    "InputVariant",
    "ModelManifest",
    "RemoteModel",
    "Task",
]


def _known_backend(name: str) -> str:
    from .backends import BACKENDS  # the one registry, read when a name is checked

    if name != "auto" and name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}: auto, {', '.join(BACKENDS)}")
    return name


BackendName = Annotated[str, AfterValidator(_known_backend)]
"""What runs a model: ``auto`` (by the machine), or a name ``backends.BACKENDS`` registers."""

MANIFEST_FILE = "manifest.json"
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
"""A model's name in the models directory (its folder's name): nothing a path could escape by."""


DecoderName = Literal[
    "yolov3",
    "yolov5",
    "yolov8",
    "yolov11",
    "ssd",
    "detr",
    "yolov8-seg",
    "yolov11-seg",
    "yolov8-pose",
    "yolov11-pose",
    "classification",
    "pp-ocr",
]
"""The output layouts a decoder exists for (``pp-ocr``: PP-OCR's text detection map, read by
``ocr.TextReader`` with its recogniser)."""

Task = Literal[
    "object-detection",
    "instance-segmentation",
    "keypoint-detection",
    "classification",
    "multi-label-classification",
    "ocr",
]
"""What a model's output means; the decoder's layout implies it, except that a classifier is
single- or multi-label."""

TASK_OF_DECODER: dict[str, Task] = {
    "yolov8-seg": "instance-segmentation",
    "yolov11-seg": "instance-segmentation",
    "yolov8-pose": "keypoint-detection",
    "yolov11-pose": "keypoint-detection",
    "classification": "classification",
    "pp-ocr": "ocr",
}
"""Decoders whose task is not object detection."""


class RemoteModel(BaseModel):
    """Where a model with the remote backend is served (a V2 server), and under which name."""

    url: str
    """``http://host:8000`` or ``grpc://host:8001`` of a V2 (KServe / Triton) server."""
    model_name: str | None = None
    """Name on that server (default: this manifest's ``name``)."""
    model_version: str = ""
    """Version on that server (empty: the server's choice)."""


class InputVariant(BaseModel):
    """The same network converted for another input size, in a file of its own: a
    rectangle for wide frames, as YOLO's "rect" inference pads a 16:9 frame less than a
    square does (416x288 for 640x360 where the main input is 416x416: 31 % fewer pixels)."""

    file: str
    """ONNX file, relative to the manifest."""
    input_width: int = Field(ge=1)
    input_height: int = Field(ge=1)


class ModelManifest(BaseModel):
    """Written next to the ONNX file; ``model_id`` in a workflow names ``name``."""

    name: str
    """The model id workflows use."""
    version: str
    """Version of the weights (reported, never guessed)."""
    task: Task = "object-detection"
    """What the model's output means (set from the decoder when not given; a
    ``classification`` decoder may say ``multi-label-classification``)."""
    file: str = "model.onnx"
    """ONNX file, relative to the manifest."""
    parts: dict[str, str] = Field(default_factory=dict)
    """A model of several networks: its other files by role, relative to the manifest
    (``pp-ocr``: ``recognizer``, ``angle``, ``charset``)."""
    input_width: int
    """Network input width in pixels."""
    input_height: int
    """Network input height in pixels."""
    layout: Literal["NCHW"] = "NCHW"
    """Input tensor layout."""
    channel_order: Literal["RGB", "BGR"] = "RGB"
    """Channel order the network expects."""
    scale: float = 1.0 / 255.0
    """Pixel values are multiplied by this."""
    letterbox_fill: int = 128
    """Grey level of the letterbox padding."""
    decoder: DecoderName = "yolov3"
    """How raw outputs become detections (``streaming.inference.decoders`` lists the layouts)."""
    box_format: Literal["cxcywh", "xyxy", "yxyx"] = "cxcywh"
    """Box layout of ``ssd``/``detr`` outputs (the YOLO layouts are always centre-based)."""
    normalized_boxes: bool = False
    """``ssd``/``detr`` boxes are fractions of the input size rather than pixels."""
    class_id_offset: int = 0
    """Subtracted from ``ssd`` class ids (1 for exports whose class 0 is the background)."""
    logits: Literal["softmax", "sigmoid", "probabilities"] = "softmax"
    """``detr`` class logits: softmax with a trailing no-object class, or sigmoid per class;
    ``classification`` outputs: softmax or sigmoid of logits, or already ``probabilities``
    (YOLOv8-cls exports)."""
    resize: Literal["letterbox", "stretch"] = "letterbox"
    """How a frame becomes the network input: scaled to fit and padded (detectors), or
    stretched to the input size (most classifiers)."""
    mean: tuple[float, float, float] | None = None
    """Subtracted per channel (RGB order) after ``scale`` (ImageNet classifiers)."""
    std: tuple[float, float, float] | None = None
    """Divided per channel (RGB order) after ``mean``."""
    keypoint_names: list[str] = Field(default_factory=list)
    """``*-pose``: the keypoints' names, in the output's order (COCO's 17 for YOLOv8-pose)."""
    skeleton: list[tuple[int, int]] = Field(default_factory=list)
    """``*-pose``: pairs of keypoint indexes to draw as edges."""
    input_variants: list[InputVariant] = Field(default_factory=list)
    """The network at other input sizes. On a CPU a frame runs on the smallest input that
    holds it as the main input would (same scale, same offset modulo ``input_stride``: the
    detections do not change); accelerators and remote servers run every frame on the
    main input."""
    input_stride: int = Field(default=32, ge=1)
    """The network's largest stride (YOLO's 32): how a frame is aligned on input variants."""
    backend: BackendName = "auto"
    """Runtime for this model; ``VISIONSTREAM_INFERENCE_BACKEND`` overrides it."""
    max_batch_size: int | None = Field(default=None, ge=1)
    """Largest batch the dynamic batcher may form (default: the setting for the device)."""
    remote: RemoteModel | None = None
    """Where a ``remote`` model is served (KServe V2 / Triton)."""
    class_names: list[str] = Field(min_length=1)
    """Class names, indexed by class id."""
    nested_overlap: float | None = Field(default=None, gt=0, le=1)
    """Detectors: a box whose intersection with a better box of its class covers at least
    this fraction of the smaller box is the same object, dropped (None: off;
    ``streaming.inference.overlaps``)."""
    class_overlap_iou: float | None = Field(default=None, gt=0, le=1)
    """Detectors: a box overlapping a better box of another class by at least this IoU is
    the same object claimed twice, dropped (None: off)."""
    source: str = ""
    """Where the weights came from."""
    sha256: str = ""
    """Checksum of the ONNX file."""

    @model_validator(mode="after")
    def _parts_inside(self) -> ModelManifest:
        for role, name in self.parts.items():
            if not MODEL_NAME.fullmatch(name):
                raise ValueError(f"part {role!r}: {name!r} is not a file name in the directory")
        for variant in self.input_variants:
            if not MODEL_NAME.fullmatch(variant.file):
                raise ValueError(f"input variant {variant.file!r} is not a file in the directory")
        if self.input_variants and self.resize != "letterbox":
            raise ValueError("input_variants need resize 'letterbox' (a stretched input has one)")
        return self

    @model_validator(mode="after")
    def _task_from_decoder(self) -> ModelManifest:
        implied = TASK_OF_DECODER.get(self.decoder, "object-detection")
        if "task" not in self.model_fields_set:
            self.task = implied
        elif self.task != implied and {self.task, implied} != {
            "classification",
            "multi-label-classification",
        }:
            raise ValueError(f"decoder {self.decoder!r} gives {implied}, not {self.task}")
        if self.task == "keypoint-detection" and not self.keypoint_names:
            raise ValueError(f"decoder {self.decoder!r} needs keypoint_names")
        return self

    def at_input(self, variant: InputVariant) -> ModelManifest:
        """This model as one of its input variants runs it: the variant's file and size."""
        size = {"input_width": variant.input_width, "input_height": variant.input_height}
        return self.model_copy(update={"file": variant.file, "input_variants": [], **size})

    def onnx_path(self, directory: Path) -> Path:
        return directory / self.file

    @classmethod
    def load(cls, directory: Path) -> ModelManifest:
        return cls.model_validate_json((directory / MANIFEST_FILE).read_text())

    def save(self, directory: Path) -> None:
        """Written whole or not at all: another process may be loading it."""
        staged = directory / f".{MANIFEST_FILE}.{os.getpid()}"
        staged.write_text(json.dumps(self.model_dump(), indent=2) + "\n")
        os.replace(staged, directory / MANIFEST_FILE)
