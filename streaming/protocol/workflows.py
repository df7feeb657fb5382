"""The built-in workflows' specifications, as plain JSON: what the server's library serves
as ``local/<id>`` and what the client sends by default. Here, beside the wire formats, so
that the client builds them without importing the server's engine or any block."""

from __future__ import annotations

from typing import Any

__all__ = [
    "DEFAULT_LINE",
    "DEFAULT_ZONE",
    "image_blur",
    "object_detection",
    "people_counting",
    "privacy_blur",
    "zone_occupancy",
]


def object_detection(model_id: str = "yolov3-tiny-416") -> dict[str, Any]:
    """Detect -> boxes -> labels; outputs ``predictions`` and the ``annotated`` image."""
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            {
                "type": "roboflow_core/roboflow_object_detection_model@v2",
                "name": "detection",
                "images": "$inputs.image",
                "model_id": model_id,
            },
            {
                "type": "roboflow_core/bounding_box_visualization@v1",
                "name": "boxes",
                "image": "$inputs.image",
                "predictions": "$steps.detection.predictions",
            },
            {
                "type": "roboflow_core/label_visualization@v1",
                "name": "labels",
                "image": "$steps.boxes.image",
                "predictions": "$steps.detection.predictions",
            },
        ],
        "outputs": [
            {
                "type": "JsonField",
                "name": "predictions",
                "selector": "$steps.detection.predictions",
            },
            {"type": "JsonField", "name": "annotated", "selector": "$steps.labels.image"},
        ],
    }


def image_blur(blur_type: str = "average", kernel_size: int = 5) -> dict[str, Any]:
    """No model: the frame blurred, as ``output_image`` (the reference server runs this
    offline too, so benchmarks compare the two servers on it)."""
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            {
                "type": "roboflow_core/image_blur@v1",
                "name": "blur",
                "image": "$inputs.image",
                "blur_type": blur_type,
                "kernel_size": kernel_size,
            }
        ],
        "outputs": [{"type": "JsonField", "name": "output_image", "selector": "$steps.blur.image"}],
    }


# Defaults for a 640x480 frame (a webcam's usual size); a request moves them with
# workflows_parameters: {"line": [[x1, y1], [x2, y2]]} or {"zone": [[x, y], ...]}.
DEFAULT_LINE = [[320, 0], [320, 480]]
DEFAULT_ZONE = [[160, 120], [480, 120], [480, 360], [160, 360]]


def _people(model_id: str) -> list[dict[str, Any]]:
    """Detect people and track them: the steps the monitoring workflows start with."""
    return [
        {"type": "WorkflowParameter", "name": "classes", "default_value": ["person"]},
        {
            "type": "roboflow_core/roboflow_object_detection_model@v2",
            "name": "detection",
            "images": "$inputs.image",
            "model_id": model_id,
            "class_filter": "$inputs.classes",
        },
        {
            "type": "roboflow_core/byte_tracker@v3",
            "name": "tracker",
            "image": "$inputs.image",
            "detections": "$steps.detection.predictions",
        },
    ]


def _split(parts: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``_people``'s parameter goes with the inputs, its steps with the steps."""
    inputs = [p for p in parts if p["type"] == "WorkflowParameter"]
    return inputs, [p for p in parts if p["type"] != "WorkflowParameter"]


def people_counting(model_id: str = "yolov3-tiny-416") -> dict[str, Any]:
    """People counted as they cross a line (parameter ``line``): ``count_in``, ``count_out``,
    the tracked ``predictions`` and the ``annotated`` image (line, counts, boxes, ids, paths)."""
    parameters, steps = _split(_people(model_id))
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "line", "default_value": DEFAULT_LINE},
            *parameters,
        ],
        "steps": [
            *steps,
            {
                "type": "roboflow_core/line_counter@v2",
                "name": "counter",
                "image": "$inputs.image",
                "detections": "$steps.tracker.tracked_detections",
                "line_segment": "$inputs.line",
                "triggering_anchor": "CENTER",
            },
            {
                "type": "roboflow_core/trace_visualization@v1",
                "name": "trace",
                "image": "$inputs.image",
                "predictions": "$steps.tracker.tracked_detections",
            },
            {
                "type": "roboflow_core/bounding_box_visualization@v1",
                "name": "boxes",
                "image": "$steps.trace.image",
                "predictions": "$steps.tracker.tracked_detections",
            },
            {
                "type": "roboflow_core/label_visualization@v1",
                "name": "labels",
                "image": "$steps.boxes.image",
                "predictions": "$steps.tracker.tracked_detections",
                "text": "Tracker Id",
            },
            {
                "type": "roboflow_core/line_counter_visualization@v1",
                "name": "line_drawing",
                "image": "$steps.labels.image",
                "zone": "$inputs.line",
                "count_in": "$steps.counter.count_in",
                "count_out": "$steps.counter.count_out",
            },
        ],
        "outputs": [
            {"type": "JsonField", "name": "count_in", "selector": "$steps.counter.count_in"},
            {"type": "JsonField", "name": "count_out", "selector": "$steps.counter.count_out"},
            {
                "type": "JsonField",
                "name": "predictions",
                "selector": "$steps.tracker.tracked_detections",
            },
            {"type": "JsonField", "name": "annotated", "selector": "$steps.line_drawing.image"},
        ],
    }


def zone_occupancy(model_id: str = "yolov3-tiny-416") -> dict[str, Any]:
    """People in a zone (parameter ``zone``), each with its ``time_in_zone`` in seconds:
    ``predictions`` (those inside) and the ``annotated`` image (zone, boxes, seconds)."""
    parameters, steps = _split(_people(model_id))
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "zone", "default_value": DEFAULT_ZONE},
            *parameters,
        ],
        "steps": [
            *steps,
            {
                "type": "roboflow_core/time_in_zone@v3",
                "name": "timer",
                "image": "$inputs.image",
                "detections": "$steps.tracker.tracked_detections",
                "zone": "$inputs.zone",
            },
            {
                "type": "roboflow_core/polygon_zone_visualization@v1",
                "name": "zone_drawing",
                "image": "$inputs.image",
                "zone": "$inputs.zone",
            },
            {
                "type": "roboflow_core/bounding_box_visualization@v1",
                "name": "boxes",
                "image": "$steps.zone_drawing.image",
                "predictions": "$steps.timer.timed_detections",
            },
            {
                "type": "roboflow_core/label_visualization@v1",
                "name": "labels",
                "image": "$steps.boxes.image",
                "predictions": "$steps.timer.timed_detections",
                "text": "Time In Zone",
            },
        ],
        "outputs": [
            {
                "type": "JsonField",
                "name": "predictions",
                "selector": "$steps.timer.timed_detections",
            },
            {"type": "JsonField", "name": "annotated", "selector": "$steps.labels.image"},
        ],
    }


def privacy_blur(model_id: str = "yolov3-tiny-416") -> dict[str, Any]:
    """Every person blurred (parameter ``classes`` to blur others too): ``annotated``."""
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "classes", "default_value": ["person"]},
        ],
        "steps": [
            {
                "type": "roboflow_core/roboflow_object_detection_model@v2",
                "name": "detection",
                "images": "$inputs.image",
                "model_id": model_id,
                "class_filter": "$inputs.classes",
                # Rather blur a shadow than leave a face: a low bar.
                "confidence": 0.25,
            },
            {
                "type": "roboflow_core/blur_visualization@v1",
                "name": "blur",
                "image": "$inputs.image",
                "predictions": "$steps.detection.predictions",
                "kernel_size": 31,
                "padding": 8,
            },
        ],
        "outputs": [{"type": "JsonField", "name": "annotated", "selector": "$steps.blur.image"}],
    }
