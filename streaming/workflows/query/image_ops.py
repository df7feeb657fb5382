"""Operations on images, frames' metadata and timestamps."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from .values import Env

if TYPE_CHECKING:
    from .compiler import QueryCompiler
from .fields import (
    Builder,
    Op,
    as_image,
    expect,
    read_choice,
    read_integer,
)

__all__ = [
    "IMAGE_OPERATIONS",
]


def _image_property(node: dict[str, Any], q: QueryCompiler) -> Op:
    prop = read_choice(node, "property_name", ("size", "height", "width", "aspect_ratio"), q.where)

    def run(value: Any, env: Env) -> Any:
        height, width = as_image(value, "ExtractImageProperty", q.where).shape[:2]
        return {
            "size": height * width,
            "height": height,
            "width": width,
            "aspect_ratio": width / height if height else 0,
        }[prop]

    return run


def _frame_metadata(node: dict[str, Any], q: QueryCompiler) -> Op:
    prop = read_choice(
        node, "property_name", ("frame_number", "frame_timestamp", "seconds_since_start"), q.where
    )

    def run(value: Any, env: Env) -> Any:
        as_image(value, "ExtractFrameMetadata", q.where)  # of the frame this image is
        facts = env.facts
        if prop == "frame_number":
            return facts.frame_number
        if prop == "frame_timestamp":
            return facts.timestamp
        if (since := facts.since_start) is None:
            raise q.where.error(
                "ExtractFrameMetadata: seconds_since_start needs the stream's fps or its timestamps"
            )
        return since

    return run


def _iso(node: dict[str, Any], q: QueryCompiler) -> Op:
    return lambda v, env: expect(
        v, datetime, "a timestamp", "TimestampToISOFormat", q.where
    ).isoformat()


def _jpeg(image: np.ndarray, quality: int) -> bytes:
    return cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()


def _to_jpeg(node: dict[str, Any], q: QueryCompiler) -> Op:
    quality = read_integer(node, "compression_level", q.where, 95)
    if not 1 <= quality <= 100:
        raise q.where.fail("ConvertImageToJPEG: compression_level must be 1 to 100")
    return lambda v, env: _jpeg(as_image(v, "ConvertImageToJPEG", q.where), quality)


def _to_base64(node: dict[str, Any], q: QueryCompiler) -> Op:
    return lambda v, env: base64.b64encode(
        _jpeg(as_image(v, "ConvertImageToBase64", q.where), 95)
    ).decode("ascii")


IMAGE_OPERATIONS: dict[str, Builder] = {
    "ExtractImageProperty": _image_property,
    "ExtractFrameMetadata": _frame_metadata,
    "TimestampToISOFormat": _iso,
    "ConvertImageToJPEG": _to_jpeg,
    "ConvertImageToBase64": _to_base64,
}
