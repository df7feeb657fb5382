"""Backends, decoders and the batcher, on tiny ONNX models whose outputs are known exactly."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.config import Settings
from streaming.errors import ModelError
from streaming.inference.backends import batch_size_for, choose_backend
from streaming.inference.decoders import DecodeOptions
from streaming.inference.manifest import ModelManifest
from streaming.inference.onnx_session import OnnxOptions, OnnxRuntimeSession
from streaming.inference.registry import ModelRegistry
from tests.support.onnx_models import V8_ROWS, YOLO_ROWS, model_directory
from tests.unit.test_batcher import RowSums

S = 64.0
# Two objects every layout encodes: a dog at (15, 18)-(25, 30) and a cat at (36, 36)-(44, 44).
DOG, CAT = (15.0, 18.0, 25.0, 30.0), (36.0, 36.0, 44.0, 44.0)


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


DETR_LOGITS = np.array([[0, 5, 0, 0], [4, 0, 0, 0], [0, 0, 0, 6]], np.float32)
SIGMOID_LOGITS = np.array([[-5, 3, -5], [2, -5, -5], [-5, -5, -5]], np.float32)
DETR_BOXES = np.array(
    [[20 / S, 24 / S, 10 / S, 12 / S], [40 / S, 40 / S, 8 / S, 8 / S], [0.5, 0.5, 0.2, 0.2]],
    np.float32,
)
SSD = [
    (
        "boxes",
        np.array([[18, 15, 30, 25], [36, 36, 44, 44], [0, 0, 9, 9], [1, 1, 5, 5]], np.float32) / S,
    ),  # ymin, xmin, ymax, xmax as fractions of the input
    ("scores", np.array([0.81, 0.8, 0.2, 0.9], np.float32)),
    ("classes", np.array([2, 1, 1, 3], np.float32)),  # 1-based: background is 0
    ("num_detections", np.array([3], np.float32)),  # the 4th row is padding
]

LAYOUTS = {
    "yolov3": ([("output", YOLO_ROWS)], {"decoder": "yolov3"}, 0.81, 0.80),
    "yolov5": ([("output", YOLO_ROWS)], {"decoder": "yolov5"}, 0.81, 0.80),
    "yolov8": ([("output0", V8_ROWS.T.copy())], {"decoder": "yolov8"}, 0.81, 0.80),
    "yolov11-rows": ([("output0", V8_ROWS)], {"decoder": "yolov11"}, 0.81, 0.80),
    "ssd": (
        SSD,
        {"decoder": "ssd", "box_format": "yxyx", "normalized_boxes": True, "class_id_offset": 1},
        0.81,
        0.80,
    ),
    "detr": (
        [("pred_boxes", DETR_BOXES), ("pred_logits", DETR_LOGITS)],
        {"decoder": "detr", "normalized_boxes": True},
        float(_softmax(DETR_LOGITS[0])[1]),
        float(_softmax(DETR_LOGITS[1])[0]),
    ),
    "rt-detr": (
        [("boxes", DETR_BOXES), ("logits", SIGMOID_LOGITS)],
        {"decoder": "detr", "normalized_boxes": True, "logits": "sigmoid"},
        float(1 / (1 + np.exp(-3))),
        float(1 / (1 + np.exp(-2))),
    ),
}
BACKENDS = {
    "onnxruntime": {"inference_backend": "onnxruntime"},
    "openvino": {"inference_backend": "openvino", "openvino_precision": "f32"},
}


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    for name, (outputs, manifest, _, _) in LAYOUTS.items():
        model_directory(root, name, outputs, **manifest)
    return root


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_decodes_exactly_on_every_backend(models_dir, layout, backend):
    registry = ModelRegistry(Settings(models_dir=models_dir, **BACKENDS[backend]))
    try:
        model = registry.get(layout)
        assert model.session.backend == backend
        detections = model.detect(np.zeros((64, 64, 3), np.uint8), DecodeOptions())
    finally:
        registry.close()
    _, _, dog_score, cat_score = LAYOUTS[layout]
    found = sorted(zip(detections.data["class_name"], detections.confidence, detections.xyxy,
                       strict=True), key=lambda d: str(d[0]))  # fmt: skip
    assert [str(name) for name, _, _ in found] == ["cat", "dog"]
    assert found[0][1] == pytest.approx(cat_score, abs=1e-5)
    assert found[1][1] == pytest.approx(dog_score, abs=1e-5)
    np.testing.assert_allclose(found[0][2], CAT, atol=1e-3)
    np.testing.assert_allclose(found[1][2], DOG, atol=1e-3)


def test_a_decoder_that_does_not_fit_the_outputs_is_refused(models_dir, tmp_path):
    model_directory(tmp_path, "wrong", [("output", YOLO_ROWS)], decoder="yolov8")
    registry = ModelRegistry(Settings(models_dir=tmp_path, inference_backend="onnxruntime"))
    with pytest.raises(ModelError, match=r"yolov8 expects output \[batch, 7, N\]"):
        registry.get("wrong")


def test_auto_is_openvino_on_a_cpu_and_settings_override_the_manifest(models_dir):
    manifest = ModelManifest.load(models_dir / "yolov3")
    assert choose_backend(manifest, Settings()) == "openvino"  # no NVIDIA driver here
    assert choose_backend(manifest, Settings(inference_backend="onnxruntime")) == "onnxruntime"
    pinned = manifest.model_copy(update={"backend": "onnxruntime"})
    assert choose_backend(pinned, Settings()) == "onnxruntime"


def test_a_provider_that_does_not_load_is_reported_as_degraded(models_dir):
    options = OnnxOptions(providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    session = OnnxRuntimeSession(models_dir / "yolov3" / "model.onnx", options)
    assert session.providers == ["CPUExecutionProvider"]
    assert session.degraded == "asked for CUDAExecutionProvider, runs on CPUExecutionProvider"


def test_io_binding_gives_what_a_plain_run_gives(models_dir):
    path = models_dir / "detr" / "model.onnx"
    batch = np.zeros((3, 3, 64, 64), np.float32)
    plain = OnnxRuntimeSession(path, OnnxOptions(io_binding=False)).run(batch)
    bound = OnnxRuntimeSession(path, OnnxOptions(io_binding=True)).run(batch)
    for a, b in zip(plain, bound, strict=True):
        np.testing.assert_array_equal(a, b)


def test_batch_size_follows_manifest_then_setting_then_device(models_dir):
    manifest = ModelManifest.load(models_dir / "yolov3")
    session = RowSums()
    assert batch_size_for(manifest, session, Settings()) == 1  # CPU: batching does not pay
    assert batch_size_for(manifest, session, Settings(max_batch_size=8)) == 8
    sized = manifest.model_copy(update={"max_batch_size": 2})
    assert batch_size_for(sized, session, Settings(max_batch_size=8)) == 2
