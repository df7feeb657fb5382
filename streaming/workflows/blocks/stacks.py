"""``roboflow_core/image_stack@v1``: the stream's last ``stack_size`` frames as JPEG bytes,
newest first, each shrunk to fit ``resolution_width`` x ``resolution_height``: what a VLM
step sends to see motion (``openai_compatible`` takes a list of images as image parts).

Bounded as the reference bounds it: at most 64 frames of at most 1920x1080 each, at JPEG
quality 75 (a few MB per step); one stack per compiled workflow (a stream's)."""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar

import cv2

from .base import Block, BlockSettings, BuildContext, FrameState, WorkflowImage
from .fields import ANY, IMAGE, FieldSpec, Takes

__all__ = ["ImageStackBlock"]

MAX_STACK = 64
MAX_WIDTH, MAX_HEIGHT = 1920, 1080
QUALITY = 75


def _size(default: int, most: int) -> FieldSpec:
    return FieldSpec(
        ("integer", ANY), default=default, takes=Takes.FRAME_OR_LITERAL, minimum=64, maximum=most
    )


class ImageStackBlock(Block):
    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/image_stack@v1",)
    inputs = {
        "image": FieldSpec((IMAGE,), takes=Takes.FRAME),
        "stack_size": FieldSpec(
            ("integer", ANY), default=10, takes=Takes.FRAME_OR_LITERAL, minimum=1, maximum=MAX_STACK
        ),
        "resolution_width": _size(MAX_WIDTH, MAX_WIDTH),
        "resolution_height": _size(MAX_HEIGHT, MAX_HEIGHT),
        "clear": FieldSpec(("boolean", ANY), default=False, takes=Takes.FRAME_OR_LITERAL),
    }
    outputs = {"frames": "list_of_values", "frames_count": "integer"}

    def __init__(self, name: str, config: BlockSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._frames: deque[bytes] = deque(maxlen=10)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        size = _clamped(inputs.get("stack_size"), 10, 1, MAX_STACK)
        if self._frames.maxlen != size:
            self._frames = deque(self._frames, maxlen=size)
        if inputs.get("clear") is True:
            self._frames.clear()
        image: WorkflowImage = inputs["image"]
        width = _clamped(inputs.get("resolution_width"), MAX_WIDTH, 64, MAX_WIDTH)
        height = _clamped(inputs.get("resolution_height"), MAX_HEIGHT, 64, MAX_HEIGHT)
        self._frames.appendleft(_jpeg(image.numpy, width, height))
        return {"frames": list(self._frames), "frames_count": len(self._frames)}


def _clamped(value: Any, default: int, least: int, most: int) -> int:
    number = value if isinstance(value, int) and not isinstance(value, bool) else default
    return max(least, min(number, most))


def _jpeg(pixels: Any, width: int, height: int) -> bytes:
    rows, columns = pixels.shape[:2]
    if columns > width or rows > height:
        scale = min(width / columns, height / rows)
        size = (max(int(columns * scale), 1), max(int(rows * scale), 1))
        pixels = cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)
    ok, data = cv2.imencode(".jpg", pixels, [cv2.IMWRITE_JPEG_QUALITY, QUALITY])
    if not ok:
        raise ValueError("the frame could not be encoded")
    return bytes(data)
