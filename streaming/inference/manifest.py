"""Model manifest: what a model directory holds and how to feed and decode it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["MANIFEST_FILE", "ModelManifest"]

MANIFEST_FILE = "manifest.json"


class ModelManifest(BaseModel):
    """Written next to the ONNX file; ``model_id`` in a workflow names ``name``."""

    name: str
    """The model id workflows use."""
    version: str
    """Version of the weights (reported, never guessed)."""
    task: Literal["object-detection"] = "object-detection"
    """What the model's output means."""
    file: str = "model.onnx"
    """ONNX file, relative to the manifest."""
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
    decoder: Literal["yolov3"] = "yolov3"
    """How raw outputs become detections."""
    class_names: list[str] = Field(min_length=1)
    """Class names, indexed by class id."""
    source: str = ""
    """Where the weights came from."""
    sha256: str = ""
    """Checksum of the ONNX file."""

    def onnx_path(self, directory: Path) -> Path:
        return directory / self.file

    @classmethod
    def load(cls, directory: Path) -> ModelManifest:
        return cls.model_validate_json((directory / MANIFEST_FILE).read_text())

    def save(self, directory: Path) -> None:
        (directory / MANIFEST_FILE).write_text(json.dumps(self.model_dump(), indent=2) + "\n")
