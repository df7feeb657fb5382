"""``detections_consensus``: votes across sources, merged as the step says, and the presence
of what ``required_objects`` asks; through a workflow of two model steps too."""

from __future__ import annotations

import numpy as np
import pytest
import supervision as sv

from streaming.config import Settings
from streaming.errors import WorkflowCompilationError
from streaming.inference.registry import ModelRegistry
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState
from streaming.workflows.blocks.consensus import Vote, consensus
from tests.support.onnx_models import YOLO_ROWS, model_directory


def found(*boxes: tuple[str, float, tuple[float, float, float, float]]) -> sv.Detections:
    detections = sv.Detections(
        xyxy=np.array([b for _, _, b in boxes], float).reshape(-1, 4),
        confidence=np.array([c for _, c, _ in boxes], float),
        class_id=np.array([0 if n == "dog" else 1 for n, _, _ in boxes], int),
    )
    detections.data["class_name"] = np.array([n for n, _, _ in boxes], dtype=str)
    detections.data["detection_id"] = np.array([f"{n}{i}" for i, (n, _, _) in enumerate(boxes)])
    return detections


A = found(("dog", 0.9, (0, 0, 10, 10)), ("cat", 0.6, (50, 50, 60, 60)))
B = found(("dog", 0.7, (1, 1, 11, 11)), ("dog", 0.8, (50, 50, 60, 60)))
C = found(("dog", 0.5, (0, 0, 12, 12)))


def test_two_votes_merge_the_dog_and_leave_the_lone_cat():
    merged, present, confidence = consensus([A, B, C], Vote(required_votes=2))
    assert list(merged.data["class_name"]) == ["dog"]
    assert merged.xyxy[0].tolist() == pytest.approx([1 / 3, 1 / 3, 11, 11])  # mean of three
    assert merged.confidence[0] == pytest.approx(0.7)  # mean of 0.9, 0.7, 0.5
    assert present and confidence == {"dog": pytest.approx(0.7)}


def test_merge_modes_and_class_blind_votes():
    vote = Vote(required_votes=2, class_aware=False, confidence_aggregation="max",
                coordinates_aggregation="max", presence_confidence_aggregation="min")  # fmt: skip
    merged, present, confidence = consensus([A, B], vote)
    by_box = {tuple(b): (n, round(float(c), 2)) for b, n, c in
              zip(merged.xyxy.tolist(), merged.data["class_name"], merged.confidence,
                  strict=True)}  # fmt: skip
    # Class-blind, the cat of A and the dog of B agree; max takes the most confident's class
    # and the largest box (the first of two as large).
    assert by_box == {(0.0, 0.0, 10.0, 10.0): ("dog", 0.9), (50.0, 50.0, 60.0, 60.0): ("dog", 0.8)}
    assert present and confidence == {"any_object": pytest.approx(0.8)}


def test_what_is_required_and_what_is_not_enough():
    assert consensus([A, B, C], Vote(required_votes=4))[0].is_empty()
    assert not consensus([A, B, C], Vote(required_votes=2, required_objects=2))[1]
    assert not consensus([A, B, C], Vote(required_votes=2, required_objects={"cat": 1}))[1]
    assert consensus([A, B, C], Vote(required_votes=2, required_objects={"dog": 1}))[1]
    assert consensus([A, B, C], Vote(required_votes=2, confidence=0.75))[0].is_empty()
    only_cats = consensus([A, B], Vote(required_votes=1, classes_to_consider=("cat",)))[0]
    assert list(only_cats.data["class_name"]) == ["cat"]
    empty = sv.Detections.empty()
    assert consensus([empty, empty], Vote(required_votes=1))[1:] == (False, {})


def test_two_model_steps_agree_in_a_workflow(tmp_path):
    model_directory(tmp_path, "boxes", [("output", YOLO_ROWS)], decoder="yolov3")
    registry = ModelRegistry(Settings(models_dir=tmp_path))
    detect = {"type": "roboflow_core/roboflow_object_detection_model@v2",
              "images": "$inputs.image", "model_id": "boxes"}  # fmt: skip
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            detect | {"name": "a"},
            detect | {"name": "b", "confidence": 0.805},  # only the dog (0.81) passes here
            {"type": "roboflow_core/detections_consensus@v1", "name": "vote",
             "predictions_batches": ["$steps.a.predictions", "$steps.b.predictions"],
             "required_votes": 2},
        ],
        "outputs": [{"type": "JsonField", "name": "vote", "selector": "$steps.vote.*"}],
    }  # fmt: skip
    try:
        workflow = compile_workflow(parse_spec(spec), BuildContext(registry))
        try:
            out = workflow.run(np.zeros((64, 64, 3), np.uint8), {}, FrameState())["vote"]
        finally:
            workflow.close()
        assert list(out["predictions"].data["class_name"]) == ["dog"]
        assert out["object_present"] and set(out["presence_confidence"]) == {"dog"}
        spec["steps"][2]["required_objects"] = {"dog": 0}
        with pytest.raises(WorkflowCompilationError, match="required_objects must be"):
            compile_workflow(parse_spec(spec), BuildContext(registry))
        del spec["steps"][2]["predictions_batches"]
        with pytest.raises(WorkflowCompilationError, match="'predictions_batches' is required"):
            compile_workflow(parse_spec(spec), BuildContext(registry))
    finally:
        registry.close()
