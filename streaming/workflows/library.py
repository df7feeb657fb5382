"""Built-in workflow specifications."""

from __future__ import annotations

from typing import Any

__all__ = ["object_detection"]


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
