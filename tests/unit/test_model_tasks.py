"""Segmentation, keypoint and classification models, on tiny ONNX graphs whose outputs are
known exactly, on both local backends: decoded, mapped onto the frame (letterbox included),
serialised as the reference does, and run by the reference's blocks."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.config import Settings
from streaming.inference.decoders import DecodeOptions
from streaming.inference.registry import ModelRegistry
from streaming.workflows.serialization import serialize_detections
from tests.support.onnx_models import (
    CLASS_LOGITS,
    POSE_ROWS,
    SEG_PROTOS,
    SEG_ROWS,
    model_directory,
)

DOG, CAT = (15.0, 18.0, 25.0, 30.0), (36.0, 36.0, 44.0, 44.0)


@pytest.fixture(scope="module", params=["onnxruntime", "openvino"])
def registry(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    model_directory(root, "seg", [("output0", SEG_ROWS.T.copy()), ("output1", SEG_PROTOS)],
                    decoder="yolov8-seg")  # fmt: skip
    model_directory(root, "pose", [("output0", POSE_ROWS.T.copy())], decoder="yolov8-pose",
                    class_names=["animal"], keypoint_names=["nose", "tail"],
                    skeleton=[(0, 1)])  # fmt: skip
    model_directory(root, "cls", [("output0", CLASS_LOGITS)], decoder="classification",
                    resize="stretch")  # fmt: skip
    model_directory(root, "tags", [("output0", CLASS_LOGITS)], decoder="classification",
                    task="multi-label-classification", resize="stretch")  # fmt: skip
    registry = ModelRegistry(Settings(models_dir=root, inference_backend=request.param))
    yield registry
    registry.close()


def by_class(detections):
    order = np.argsort(detections.data["class_name"])
    return detections[order]


def test_segmentation_masks_are_cut_to_their_boxes_on_the_frame(registry):
    model = registry.get("seg")
    assert model.task == "instance-segmentation"
    found = by_class(model.detect(np.zeros((64, 64, 3), np.uint8), DecodeOptions()))
    assert list(found.data["class_name"]) == ["cat", "dog"]
    cat, dog = found.mask
    assert cat.shape == (64, 64)
    # The dog's mask fills its box (to a grid cell of 4 px), nothing outside it.
    ys, xs = np.nonzero(dog)
    assert xs.min() >= DOG[0] - 4 and xs.max() <= DOG[2] + 4
    assert ys.min() >= DOG[1] - 4 and ys.max() <= DOG[3] + 4
    assert dog.sum() > 0.6 * (DOG[2] - DOG[0]) * (DOG[3] - DOG[1])
    # The cat's covers the 8x8 pixels around its centre only.
    ys, xs = np.nonzero(cat)
    assert 30 <= cat.sum() <= 100 and abs(xs.mean() - 40) < 2 and abs(ys.mean() - 40) < 2
    (_, dog_json) = sorted(serialize_detections(found)["predictions"],
                                  key=lambda p: p["class"])  # fmt: skip
    assert len(dog_json["points"]) >= 4 and set(dog_json["points"][0]) == {"x", "y"}
    assert all(DOG[0] - 4 <= p["x"] <= DOG[2] + 4 for p in dog_json["points"])


def test_segmentation_masks_follow_the_letterbox_onto_a_wider_frame(registry):
    # 128x64: scaled by 0.5 into the 64x64 input, padded 16 px above and below.
    found = by_class(registry.get("seg").detect(np.zeros((64, 128, 3), np.uint8), DecodeOptions()))
    dog = found.mask[1]
    assert dog.shape == (64, 128)
    ys, xs = np.nonzero(dog)
    box = found.xyxy[1]  # the dog's box on the frame
    assert xs.min() >= box[0] - 8 and xs.max() <= box[2] + 8
    assert ys.min() >= box[1] - 8 and ys.max() <= box[3] + 8


def test_keypoints_come_with_their_names_on_the_frame(registry):
    model = registry.get("pose")
    assert model.task == "keypoint-detection"
    found = model.detect(np.zeros((64, 128, 3), np.uint8), DecodeOptions())
    assert len(found) == 2
    dog = int(np.argmax(found.confidence))
    # Network (19, 20) -> frame: x / 0.5, (y - 16) / 0.5.
    np.testing.assert_allclose(found.data["keypoints_xy"][dog], [[38, 8], [46, 26]], atol=1e-3)
    (first, _) = sorted(serialize_detections(found)["predictions"], key=lambda p: -p["confidence"])
    nose = {"class_id": 0, "class": "nose", "confidence": pytest.approx(0.9), "x": 38.0, "y": 8.0}
    assert first["keypoints"][0] == nose
    assert [k["class"] for k in first["keypoints"]] == ["nose", "tail"]


def test_classifiers_give_each_class_a_probability(registry):
    model = registry.get("cls")
    probabilities = model.classify(np.zeros((10, 30, 3), np.uint8))
    expected = np.exp(CLASS_LOGITS) / np.exp(CLASS_LOGITS).sum()
    np.testing.assert_allclose(probabilities, expected, rtol=1e-5)
    tags = registry.get("tags").classify(np.zeros((10, 30, 3), np.uint8))
    np.testing.assert_allclose(tags, 1 / (1 + np.exp(-CLASS_LOGITS)), rtol=1e-5)
    with pytest.raises(TypeError, match="it classifies"):
        model.detect(np.zeros((10, 30, 3), np.uint8), DecodeOptions())


def test_a_manifest_says_what_its_decoder_implies(tmp_path):
    from pydantic import ValidationError

    from streaming.inference.manifest import ModelManifest

    base = {"name": "m", "version": "1", "input_width": 64, "input_height": 64,
            "class_names": ["a"]}  # fmt: skip
    assert ModelManifest(**base, decoder="yolov11-seg").task == "instance-segmentation"
    with pytest.raises(ValidationError, match="needs keypoint_names"):
        ModelManifest(**base, decoder="yolov8-pose")
    with pytest.raises(ValidationError, match="gives instance-segmentation"):
        ModelManifest(**base, decoder="yolov8-seg", task="classification")


def _run(registry, steps: list[dict], outputs: dict[str, str], image: np.ndarray) -> dict:
    from streaming.workflows import compile_workflow, parse_spec
    from streaming.workflows.blocks.base import BuildContext, FrameState

    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": steps,
        "outputs": [{"type": "JsonField", "name": k, "selector": v} for k, v in outputs.items()],
    }
    compiled = compile_workflow(parse_spec(spec), BuildContext(registry))
    video = {"frame_timestamp": "2026-11-23T10:00:00+00:00", "fps": 30}
    try:
        return compiled.run(image, video, FrameState())
    finally:
        compiled.close()


def test_segmentation_through_the_reference_blocks_tracked_and_drawn(registry):
    from streaming.workflows.serialization import serialize_value

    image = np.full((64, 64, 3), 100, np.uint8)
    out = _run(registry, [
        {"type": "roboflow_core/roboflow_instance_segmentation_model@v2", "name": "seg",
         "images": "$inputs.image", "model_id": "seg", "confidence": 0.5},
        {"type": "roboflow_core/byte_tracker@v3", "name": "tracker",
         "detections": "$steps.seg.predictions", "minimum_consecutive_frames": 1},
        {"type": "roboflow_core/mask_visualization@v1", "name": "masks",
         "image": "$inputs.image", "predictions": "$steps.seg.predictions", "opacity": 1.0},
        {"type": "roboflow_core/polygon_visualization@v1", "name": "outlines",
         "image": "$steps.masks.image", "predictions": "$steps.seg.predictions"},
    ], {"predictions": "$steps.seg.predictions", "drawn": "$steps.outlines.image",
        "tracked": "$steps.tracker.tracked_detections"}, image)  # fmt: skip
    body = serialize_value(out["predictions"], 80, None)
    assert sorted(p["class"] for p in body["predictions"]) == ["cat", "dog"]
    assert all(len(p["points"]) >= 3 for p in body["predictions"])
    drawn = out["drawn"].numpy
    assert (drawn[22:28, 18:22] != 100).any()  # inside the dog's mask: painted
    assert (drawn[55:, 55:] == 100).all()  # far from both: untouched


def test_keypoints_and_classes_through_the_reference_blocks(registry):
    image = np.full((64, 64, 3), 100, np.uint8)
    out = _run(registry, [
        {"type": "roboflow_core/roboflow_keypoint_detection_model@v2", "name": "pose",
         "images": "$inputs.image", "model_id": "pose", "keypoint_confidence": 0.75},
        {"type": "roboflow_core/keypoint_visualization@v1", "name": "skeleton",
         "image": "$inputs.image", "predictions": "$steps.pose.predictions",
         "color": "#FF0000", "thickness": 1},
        {"type": "roboflow_core/roboflow_classification_model@v2", "name": "cls",
         "images": "$inputs.image", "model_id": "cls"},
        {"type": "roboflow_core/roboflow_multi_label_classification_model@v2", "name": "tags",
         "images": "$inputs.image", "model_id": "tags", "confidence": 0.7},
        {"type": "roboflow_core/classification_label_visualization@v1", "name": "label",
         "image": "$inputs.image", "predictions": "$steps.cls.predictions"},
    ], {"pose": "$steps.pose.predictions", "skeleton": "$steps.skeleton.image",
        "cls": "$steps.cls.predictions", "tags": "$steps.tags.predictions",
        "label": "$steps.label.image"}, image)  # fmt: skip
    from streaming.workflows.serialization import serialize_value

    pose = serialize_value(out["pose"], 80, None)["predictions"]
    dog = max(pose, key=lambda p: p["confidence"])
    # The tail (0.8) stays; the cat's keypoints (0.7, 0.6) are below 0.75.
    assert [k["class"] for k in dog["keypoints"]] == ["nose", "tail"]
    assert all(p["keypoints"] == [] for p in pose if p is not dog)
    # The dog's skeleton: one red edge from its nose (19, 20) to its tail (23, 29).
    red = out["skeleton"].numpy[:, :, 2].astype(int) - out["skeleton"].numpy[:, :, 1]
    assert red[24, 21] > 100 and red[50, 50] == 0
    assert out["cls"]["top"] == "dog" and out["cls"]["prediction_type"] == "classification"
    assert [p["class"] for p in out["cls"]["predictions"]] == ["dog", "cat", "bird"]
    assert out["tags"]["predicted_classes"] == ["cat", "dog"]  # sigmoid 0.73, 0.95; bird 0.5
    assert set(out["tags"]["predictions"]) == {"cat", "dog", "bird"}
    assert (out["label"].numpy != 100).any()


@pytest.mark.parametrize(
    ("step", "needle"),
    [
        ({"type": "roboflow_core/roboflow_instance_segmentation_model@v2", "model_id": "pose"},
         "step 'm': model 'pose' does keypoint-detection, not instance-segmentation"),
        ({"type": "roboflow_core/roboflow_classification_model@v2", "model_id": "seg"},
         "step 'm': model 'seg' does instance-segmentation, not classification"),
        ({"type": "roboflow_core/roboflow_object_detection_model@v2", "model_id": "cls"},
         "step 'm': model 'cls' does classification, not object-detection"),
    ],
)  # fmt: skip
def test_a_model_of_another_task_is_a_400_naming_the_step(registry, step, needle):
    from streaming.errors import WorkflowCompilationError

    with pytest.raises(WorkflowCompilationError) as caught:
        _run(registry, [{"name": "m", "images": "$inputs.image", **step}],
             {"p": "$steps.m.predictions"}, np.zeros((8, 8, 3), np.uint8))  # fmt: skip
    assert needle in str(caught.value)
