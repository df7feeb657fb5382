"""Workflow values -> JSON-ready data (reference §2.3 and §7.3)."""

from __future__ import annotations

import base64
import math
from datetime import date, datetime
from typing import Any

import cv2
import numpy as np
import supervision as sv

from .blocks.base import WorkflowImage

__all__ = ["SerializationError", "serialize_detections", "serialize_image", "serialize_value"]


class SerializationError(ValueError):
    """A value has a type we do not know how to put into JSON."""


_TRACK_FACTS = (
    "time_in_zone",
    "velocity",
    "speed",
    "smoothed_velocity",
    "smoothed_speed",
    "path_deviation",
)
"""What analytics blocks add to tracked detections, emitted under the reference's keys."""


def serialize_detections(detections: sv.Detections) -> dict[str, Any]:
    size = detections.metadata.get("image_size")
    width, height = size if size else (None, None)
    predictions = []
    class_names = detections.data.get("class_name")
    detection_ids = detections.data.get("detection_id")
    parent_ids = detections.data.get("parent_id")
    extras = [(key, detections.data[key]) for key in _TRACK_FACTS if key in detections.data]
    keypoints = _keypoints(detections)
    for i, (x1, y1, x2, y2) in enumerate(detections.xyxy.tolist()):
        # Key order as the reference emits it.
        item: dict[str, Any] = {
            "width": x2 - x1,
            "height": y2 - y1,
            "x": (x1 + x2) / 2,
            "y": (y1 + y2) / 2,
            "confidence": float(detections.confidence[i])
            if detections.confidence is not None
            else None,
            "class_id": int(detections.class_id[i]) if detections.class_id is not None else None,
        }
        if detections.mask is not None:
            polygon = mask_to_polygon(detections.mask[i])
            if polygon is None:
                continue  # an empty mask: the reference leaves such an instance out
            item["points"] = [{"x": float(x), "y": float(y)} for x, y in polygon]
        if detections.tracker_id is not None:
            item["tracker_id"] = int(detections.tracker_id[i])
        for key, values in extras:
            value = values[i]
            item[key] = value.tolist() if isinstance(value, np.ndarray) else float(value)
        item["class"] = str(class_names[i]) if class_names is not None else ""
        if detection_ids is not None:
            item["detection_id"] = str(detection_ids[i])
        if parent_ids is not None:
            item["parent_id"] = str(parent_ids[i])
        if keypoints is not None:
            item["keypoints"] = keypoints(i)
        predictions.append(item)
    return {"image": {"width": width, "height": height}, "predictions": predictions}


def mask_to_polygon(mask: np.ndarray) -> np.ndarray | None:
    """A mask's outline as ``[N, 2]`` points (N >= 3), its largest piece when it has several,
    as the reference serialises masks; None for an empty mask."""
    contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_TREE, cv2.CHAIN_APPROX_SIMPLE)
    if not contours:
        return None
    contour: np.ndarray = max(contours, key=cv2.contourArea).reshape(-1, 2)
    if len(contour) < 3:  # a point or a line: repeat its last point, as the reference does
        contour = np.concatenate([contour, np.repeat(contour[-1:], 3 - len(contour), axis=0)])
    return contour


def _keypoints(detections: sv.Detections) -> Any:
    """Each detection's keypoints as the reference emits them, or None for a model without."""
    data = detections.data
    keys = ("keypoints_xy", "keypoints_confidence", "keypoints_class_name", "keypoints_class_id")
    if not all(key in data for key in keys):
        return None
    xy, confidence, names, ids = (data[key] for key in keys)

    def of(i: int) -> list[dict[str, Any]]:
        return [
            {
                "class_id": int(ids[i][k]),
                "class": str(names[i][k]),
                "confidence": float(confidence[i][k]),
                "x": float(xy[i][k][0]),
                "y": float(xy[i][k][1]),
            }
            for k in range(len(names[i]))
            if str(names[i][k])  # a keypoint below the step's keypoint_confidence has none
        ]

    return of


def serialize_image(
    image: WorkflowImage, quality: int, video_metadata: dict[str, Any] | None
) -> dict[str, Any]:
    ok, encoded = cv2.imencode(".jpg", image.numpy, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise SerializationError("JPEG encoding failed")
    serialized: dict[str, Any] = {
        "type": "base64",
        "value": base64.b64encode(encoded.tobytes()).decode("ascii"),
        "video_metadata": video_metadata,
    }
    if image.parent_origin is not None and image.root_origin is not None:
        # A crop or slice: where it lies in its parent and in the frame, as the reference
        # adds them.
        serialized["parent_id"] = image.parent_id
        serialized["parent_origin"] = image.parent_origin.to_json()
        serialized["root_parent_id"] = image.root_id
        serialized["root_parent_origin"] = image.root_origin.to_json()
    return serialized


def serialize_value(value: Any, quality: int, video_metadata: dict[str, Any] | None) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, sv.Detections):
        return serialize_detections(value)
    if isinstance(value, WorkflowImage):
        return serialize_image(value, quality, video_metadata)
    if isinstance(value, dict):
        return {str(k): serialize_value(v, quality, video_metadata) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [serialize_value(v, quality, video_metadata) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, np.generic):
        return serialize_value(value.item(), quality, video_metadata)
    if isinstance(value, np.ndarray):
        # Small numeric arrays (depth maps are not small) travel as nested lists.
        if value.size <= 65536 and value.dtype.kind in "biuf":
            return value.tolist()
        raise SerializationError(f"array of shape {value.shape} is too large to serialize")
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise SerializationError(f"cannot serialize value of type {type(value).__name__}")
