"""``visionstream models add`` and ``GET /models``: a user's ONNX export, served by id."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from inference_sdk import InferenceHTTPClient

from sources import SyntheticSource
from streaming import Client, StreamConfig
from streaming.client import FrameSourceStream
from streaming.config import Settings
from streaming.protocol.workflows import object_detection
from tests.support.models import add_model, add_tiny_task_models
from tests.support.onnx_models import V8_ROWS, YOLO_ROWS, constant_model
from tests.support.server import ServerProcess

pytestmark = pytest.mark.e2e


add = add_model


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    default = Settings().default_model
    (root / default).symlink_to(Path(Settings().models_dir) / default)
    return root


def test_add_registers_an_export_and_the_server_runs_it(models_dir, tmp_path):
    export = constant_model(tmp_path / "tiny-v8.onnx", [("output0", V8_ROWS.T.copy())])
    names = tmp_path / "names.txt"
    names.write_text("cat\ndog\nbird\n")
    done = add(models_dir, str(export), "--decoder", "yolov8", "--names", str(names))
    assert done.returncode == 0, done.stderr
    assert "added tiny-v8: 64x64, yolov8, 3 classes" in done.stdout

    server = ServerProcess(models_dir=str(models_dir))
    try:
        server.wait_ready()
        listed = {m["name"]: m for m in server.get("/models").json()["models"]}
        assert listed["tiny-v8"]["classes"] == ["cat", "dog", "bird"]
        assert listed["tiny-v8"]["input_size"] == [64, 64] and not listed["tiny-v8"]["loaded"]
        default = listed[Settings().default_model]
        assert default["loaded"] and default["backend"] == "openvino" and "CPU" in default["device"]

        found = []
        source = FrameSourceStream(lambda: SyntheticSource(320, 240, fps=20, frames=5))
        config = StreamConfig(data_output=["predictions"], realtime_processing=False)
        spec = object_detection("tiny-v8")
        with Client(server.url).webrtc.stream(source, workflow=spec, config=config) as session:

            @session.on_data("predictions")
            def collect(predictions):
                found.append(sorted(p["class"] for p in predictions["predictions"]))

            session.wait(timeout=60)
        assert found and all(classes == ["cat", "dog"] for classes in found)
        assert {m["name"]: m for m in server.get("/models").json()["models"]}["tiny-v8"]["loaded"]
    finally:
        server.stop()


def test_add_refuses_what_cannot_be_served_and_leaves_nothing(models_dir, tmp_path):
    export = constant_model(tmp_path / "rows.onnx", [("output", YOLO_ROWS)])
    wrong = add(models_dir, str(export), "--decoder", "yolov8", "--names", "cat,dog,bird")
    assert wrong.returncode == 2 and "yolov8 expects output [batch, 7, N]" in wrong.stderr
    assert not (models_dir / "rows").exists()

    broken = tmp_path / "broken.onnx"
    broken.write_bytes(np.random.default_rng(1).bytes(256))
    refused = add(models_dir, str(broken), "--decoder", "yolov3", "--names", "coco")
    assert refused.returncode == 2 and "is not an ONNX model" in refused.stderr
    assert not (models_dir / "broken").exists()

    fine = add(models_dir, str(export), "--decoder", "yolov5", "--names", "cat,dog,bird")
    assert fine.returncode == 0, fine.stderr
    again = add(models_dir, str(export), "--decoder", "yolov5", "--names", "cat,dog,bird")
    assert again.returncode == 2 and "already exists" in again.stderr


def test_segmentation_pose_and_classifier_exports_are_added_and_served(models_dir, tmp_path):
    from tests.support.onnx_models import POSE_ROWS

    pose = constant_model(tmp_path / "tiny-pose.onnx", [("output0", POSE_ROWS.T.copy())])
    refused = add(models_dir, str(pose), "--decoder", "yolov8-pose", "--names", "animal")
    assert refused.returncode == 2 and "needs keypoint_names" in refused.stderr
    assert not (models_dir / "tiny-pose").exists()
    add_tiny_task_models(models_dir, tmp_path)  # as a user adds them, keypoints named

    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            {"type": "roboflow_core/roboflow_instance_segmentation_model@v2", "name": "seg",
             "images": "$inputs.image", "model_id": "tiny-seg"},
            {"type": "roboflow_core/roboflow_keypoint_detection_model@v2", "name": "pose",
             "images": "$inputs.image", "model_id": "tiny-pose"},
            {"type": "roboflow_core/roboflow_classification_model@v2", "name": "cls",
             "images": "$inputs.image", "model_id": "tiny-cls"},
            {"type": "roboflow_core/mask_visualization@v1", "name": "masks",
             "image": "$inputs.image", "predictions": "$steps.seg.predictions"},
        ],
        "outputs": [
            {"type": "JsonField", "name": "masks", "selector": "$steps.seg.predictions"},
            {"type": "JsonField", "name": "pose", "selector": "$steps.pose.predictions"},
            {"type": "JsonField", "name": "cls", "selector": "$steps.cls.predictions"},
            {"type": "JsonField", "name": "drawn", "selector": "$steps.masks.image"},
        ],
    }  # fmt: skip
    server = ServerProcess(models_dir=str(models_dir))
    try:
        server.wait_ready()
        listed = {m["name"]: m for m in server.get("/models").json()["models"]}
        assert listed["tiny-seg"]["task"] == "instance-segmentation"
        assert listed["tiny-pose"]["task"] == "keypoint-detection"
        results = []
        source = FrameSourceStream(lambda: SyntheticSource(320, 240, fps=20, frames=3))
        config = StreamConfig(data_output=["masks", "pose", "cls"], realtime_processing=False)
        with Client(server.url).webrtc.stream(source, workflow=spec, config=config) as session:

            @session.on_data()
            def collect(data, metadata):
                results.append(data)

            session.wait(timeout=60)
        # inference-sdk's infer, each model on the route of its task (the SDK asks the
        # registry which): the same answers as the workflow's blocks give over WebRTC.
        sdk = InferenceHTTPClient(api_url=server.url, api_key=None)
        frame = np.full((240, 320, 3), 90, np.uint8)
        masks = sdk.infer(frame, model_id="tiny-seg")["predictions"]
        pose = sdk.infer(frame, model_id="tiny-pose")["predictions"]
        classified = sdk.infer(frame, model_id="tiny-cls")
    finally:
        server.stop()
    assert sorted(p["class"] for p in masks) == ["cat", "dog"]
    assert all(len(p["points"]) >= 3 for p in masks)
    best_pose = max(pose, key=lambda p: p["confidence"])
    assert [k["class"] for k in best_pose["keypoints"]] == ["nose", "tail"]
    assert classified["top"] == "dog" and classified["predictions"][0]["class"] == "dog"
    assert len(results) == 3
    last = results[-1]
    assert sorted(p["class"] for p in last["masks"]["predictions"]) == ["cat", "dog"]
    assert all(len(p["points"]) >= 3 for p in last["masks"]["predictions"])
    keypoints = max(last["pose"]["predictions"], key=lambda p: p["confidence"])["keypoints"]
    assert [k["class"] for k in keypoints] == ["nose", "tail"]
    assert last["cls"]["top"] == "dog" and last["cls"]["prediction_type"] == "classification"
