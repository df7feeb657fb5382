"""What the restream tests share: a camera that sees a person, a pipeline that draws the
person's box, and the check that a player's picture has that box, at the restream's size."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import cv2
import httpx
import numpy as np
import supervision as sv

from .camera import RTSPCamera
from .players import box_drawn
from .server import ServerProcess, wait_for

__all__ = ["FPS", "SIZE", "Watched", "assert_box", "call", "watched_pipeline"]

FPS = 5
SIZE = (640, 360)  # the camera's 1280x720, scaled into the restream's bounds
SETTINGS = {
    "restream_fps": str(FPS),
    "restream_max_width": str(SIZE[0]),
    "restream_max_height": str(SIZE[1]),
    "restream_keyframe_s": "1",
}
"""The restream settings of the tests' servers."""
_SCALE = SIZE[0] / 1280
SPEC = {
    "version": "1.0",
    "inputs": [{"type": "InferenceImage", "name": "image"}],
    "steps": [
        {
            "type": "roboflow_core/roboflow_object_detection_model@v2",
            "name": "det",
            "images": "$inputs.image",
            "model_id": "yolov3-tiny-416",
            "confidence": 0.5,
        },
        {
            "type": "roboflow_core/bounding_box_visualization@v1",
            "name": "box",
            "image": "$inputs.image",
            "predictions": "$steps.det.predictions",
            "thickness": 12,
        },
    ],
    "outputs": [
        {"type": "JsonField", "name": "predictions", "selector": "$steps.det.predictions"},
        {"type": "JsonField", "name": "annotated", "selector": "$steps.box.image"},
    ],
}


def call(server: ServerProcess, key: str, method: str, path: str, **kwargs) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", **kwargs.pop("headers", {})}
    return httpx.request(method, server.url + path, headers=headers, timeout=60, **kwargs)


class Watched(dict):
    """``pipeline_id``, the person's ``box`` (at the restream's size), its ``colour``, and the
    ``camera`` (an ``RTSPCamera``)."""


@contextmanager
def watched_pipeline(
    server: ServerProcess, key: str, person: np.ndarray, sources: int = 1, **extra
) -> Iterator[Watched]:
    """A camera seeing a person (under a band of noise: a second of restream weighs about
    its bitrate), a pipeline on it drawing the person's box (``extra``: more of its request);
    terminated after."""
    scene = np.full((720, 1280, 3), 128, np.uint8)
    grown = cv2.resize(person, None, fx=2, fy=2)  # lines thick enough at 640x360
    scene[100 : 100 + grown.shape[0], 500 : 500 + grown.shape[1]] = grown
    noise = np.random.default_rng(7)

    def picture(_index: int) -> np.ndarray:
        seen = scene.copy()
        seen[:60] = noise.integers(0, 256, (60, 1280, 3), np.uint8)
        return seen

    with RTSPCamera(1280, 720, fps=10, picture=picture) as camera:
        started = call(
            server,
            key,
            "POST",
            "/inference_pipelines/initialise",
            json={
                "video_configuration": {
                    "type": "VideoConfiguration",
                    "video_reference": [camera.url] * sources,
                },
                "processing_configuration": {
                    "type": "WorkflowConfiguration",
                    "workflow_specification": SPEC,
                },
                **extra,
            },
        )
        assert started.status_code == 200, started.text
        pipeline_id = started.json()["context"]["pipeline_id"]
        try:
            outputs = wait_for(
                lambda: [
                    output
                    for output in call(
                        server,
                        key,
                        "GET",
                        f"/inference_pipelines/{pipeline_id}/consume",
                        json={"wait_seconds": 5},
                    )
                    .json()
                    .get("outputs", [])
                    if output and output["predictions"]["predictions"]
                ],
                90,
                "a result with the person",
            )
            found = outputs[0]["predictions"]["predictions"]
            person_box = max(found, key=lambda p: p["confidence"])
            x, y, w, h = (person_box[k] for k in ("x", "y", "width", "height"))
            box = tuple(v * _SCALE for v in (x - w / 2, y - h / 2, x + w / 2, y + h / 2))
            colour = sv.ColorPalette.DEFAULT.by_idx(person_box["class_id"]).as_bgr()
            yield Watched(pipeline_id=pipeline_id, box=box, colour=colour, camera=camera)
        finally:
            call(server, key, "POST", f"/inference_pipelines/{pipeline_id}/terminate")


def assert_box(image: np.ndarray, watched: Watched) -> None:
    """``image`` is at the restream's size, with the person's box drawn in its colour."""
    assert image.shape[:2] == (SIZE[1], SIZE[0]), image.shape
    # supervision draws each line centred on the box's edge: sample on the edge itself.
    share = box_drawn(image, watched["box"], watched["colour"], inset=0)
    assert share >= 0.8, f"only {share:.0%} of the box's edge has its colour"
