"""``detections_list_rollup``: a second detector's finds on each crop, collapsed per frame,
brought back onto the frame and merged where they touch (the same object seen by two
overlapping crops)."""

from __future__ import annotations

import numpy as np
import pytest
import supervision as sv

from streaming.config import Settings
from streaming.inference.registry import ModelRegistry
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState
from streaming.workflows.blocks.images import Origin
from streaming.workflows.blocks.rollup import rolled_up
from tests.support.onnx_models import YOLO_ROWS, model_directory


def on_crop(at: tuple[int, int], *boxes: tuple[int, float, tuple[int, int, int, int]]):
    detections = sv.Detections(
        xyxy=np.array([b for _, _, b in boxes], float).reshape(-1, 4),
        confidence=np.array([c for _, c, _ in boxes], float),
        class_id=np.array([k for k, _, _ in boxes], int),
    )
    detections.data["class_name"] = np.array([str(k) for k, _, _ in boxes])
    detections.metadata["parent_origin"] = Origin(at[0], at[1], 200, 100)
    return detections


def test_touching_pieces_of_one_class_merge_on_the_frame():
    left = on_crop((0, 0), (0, 0.9, (80, 10, 100, 30)), (1, 0.5, (10, 10, 20, 20)))
    right = on_crop((100, 0), (0, 0.6, (0, 12, 30, 28)))  # the same object, cut in two
    found = rolled_up([left, right], (200, 100), "max", 0.0, 10.0)
    by_class = dict(zip(found.class_id.tolist(), found.xyxy.tolist(), strict=True))
    assert by_class == {0: [80.0, 10.0, 130.0, 30.0], 1: [10.0, 10.0, 20.0, 20.0]}
    assert found.confidence.tolist() == pytest.approx([0.9, 0.5])
    apart = rolled_up([left, right], (200, 100), "mean", 0.5, 10.0)  # IoU 0 < 0.5: kept apart
    assert len(apart) == 3
    assert len(rolled_up([None, on_crop((0, 0))], (200, 100), "max", 0.0, 10.0)) == 0


def test_a_detector_on_each_crop_rolls_up_onto_the_frame(tmp_path):
    model_directory(tmp_path, "boxes", [("output", YOLO_ROWS)], decoder="yolov3")
    registry = ModelRegistry(Settings(models_dir=tmp_path))
    step = {"type": "roboflow_core/roboflow_object_detection_model@v2", "model_id": "boxes"}
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            step | {"name": "det", "images": "$inputs.image"},
            {"type": "roboflow_core/dynamic_crop@v1", "name": "crop", "images": "$inputs.image",
             "predictions": "$steps.det.predictions"},
            step | {"name": "again", "images": "$steps.crop.crops"},
            {"type": "roboflow_core/dimension_collapse@v1", "name": "all",
             "data": "$steps.again.predictions"},
            {"type": "roboflow_core/detections_list_rollup@v1", "name": "up",
             "parent_detection": "$steps.det.predictions", "child_detections": "$steps.all.output"},
        ],
        "outputs": [{"type": "JsonField", "name": "up", "selector": "$steps.up.*"}],
    }  # fmt: skip
    try:
        workflow = compile_workflow(parse_spec(spec), BuildContext(registry))
        try:
            out = workflow.run(np.zeros((64, 64, 3), np.uint8), {}, FrameState())["up"]
        finally:
            workflow.close()
    finally:
        registry.close()
    assert len(out["crop_zones"]) == 2 and out["crop_zones"][0][0] in ((15.0, 18.0), (36.0, 36.0))
    found = out["rolled_up_detections"]
    assert len(found) >= 1 and found.metadata["image_size"] == (64, 64)
    inside = (found.xyxy[:, 0] >= 15) & (found.xyxy[:, 2] <= 44)
    assert inside.all()  # each crop's finds lie inside its crop, on the frame
