"""The real default model on real photos, and workflow compilation errors."""

from __future__ import annotations

import copy

import cv2
import numpy as np
import pytest
import supervision as sv

from streaming.config import Settings
from streaming.errors import WorkflowCompilationError
from streaming.inference.decoders import DecodeOptions
from streaming.inference.registry import ModelInUse, ModelRegistry
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState, WorkflowImage
from tests.conftest import DETECT_SPEC


@pytest.fixture(scope="module")
def registry(default_model_dir) -> ModelRegistry:
    return ModelRegistry(Settings(models_dir=default_model_dir))


def _best_scores(model, image) -> dict[str, float]:
    detections = model.detect(image, DecodeOptions(confidence=0.25, iou_threshold=0.45))
    h, w = image.shape[:2]
    assert np.all(detections.xyxy[:, [0, 2]] <= w) and np.all(detections.xyxy[:, [1, 3]] <= h)
    best: dict[str, float] = {}
    for name, score in zip(detections.data["class_name"], detections.confidence, strict=True):
        best[str(name)] = max(best.get(str(name), 0.0), float(score))
    return best


def test_default_model_finds_person_dog_and_horse(registry, photos):
    model = registry.get("yolov3-tiny-416")
    assert model.session.backend == "openvino" and "CPU" in model.session.device  # auto, CPU
    best = _best_scores(model, cv2.imread(str(photos / "person.jpg")))
    assert best["person"] > 0.8 and best["dog"] > 0.8 and best["horse"] > 0.8, best


def test_backends_agree_on_the_default_model(registry, photos, default_model_dir):
    """ONNX Runtime and OpenVINO in f32 agree to 1e-3; OpenVINO's CPU default (bf16 here)
    shifts scores by a few hundredths at most."""
    image = cv2.imread(str(photos / "person.jpg"))

    def scores(**settings) -> dict[str, float]:
        other = ModelRegistry(Settings(models_dir=default_model_dir, **settings))
        try:
            return _best_scores(other.get("yolov3-tiny-416"), image)
        finally:
            other.close()

    exact = scores(inference_backend="onnxruntime")
    for found, tolerance in (
        (scores(inference_backend="openvino", openvino_precision="f32"), 1e-3),
        (_best_scores(registry.get("yolov3-tiny-416"), image), 0.08),
    ):
        assert found.keys() == exact.keys()
        assert all(abs(found[k] - exact[k]) <= tolerance for k in found), (found, exact)


def test_registry_shares_one_model(registry):
    assert registry.get("yolov3-tiny-416") is registry.get("yolov3-tiny-416")


def _compile(registry, spec, **kwargs):
    return compile_workflow(parse_spec(spec), BuildContext(registry), **kwargs)


def test_compiled_workflow_runs_and_draws(registry, photos):
    workflow = _compile(registry, DETECT_SPEC)
    assert workflow.image_outputs() == ["annotated"]
    image = cv2.imread(str(photos / "dog.jpg"))
    state = FrameState()
    out = workflow.run(image.copy(), {}, state)
    assert isinstance(out["annotated"], WorkflowImage)
    assert not np.array_equal(out["annotated"].numpy, image)
    assert len(out["predictions"]) > 0
    assert {"preprocess", "inference", "postprocess", "annotate"} <= set(state.timer)


def _with(path_value: dict, spec=DETECT_SPEC) -> dict:
    spec = copy.deepcopy(spec)
    for key, value in path_value.items():
        step, field = key.split(".")
        target = next(s for s in spec["steps"] if s["name"] == step)
        if value is None:
            target.pop(field)
        else:
            target[field] = value
    return spec


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"det.type": "roboflow_core/warp@v9"}, "unknown block type 'roboflow_core/warp@v9'"),
        ({"det.model_id": "nope-1"}, "unknown model_id 'nope-1'"),
        ({"box.predictions": "$steps.ghost.predictions"}, "unknown step 'ghost'"),
        ({"box.predictions": "$steps.det.boxes"}, "no output 'boxes'"),
        ({"box.predictions": "$inputs.ghost"}, "names no workflow input"),
        ({"box.predictions": "$inputs.image"}, "expects object_detection_prediction"),
        ({"box.image": "steps.det"}, "must be a selector"),
        ({"box.predictions": "$steps.det"}, "invalid selector"),
        ({"det.confidence": 3}, "confidence"),
        ({"det.class_filter": ["unicorn"]}, "unicorn"),
        ({"det.images": None}, "'images' is required"),
        ({"box.image": "$steps.lbl.image"}, "cycle"),
    ],
)
def test_compile_errors_name_the_culprit(registry, change, needle):
    with pytest.raises(WorkflowCompilationError, match=needle.replace("$", r"\$")):
        _compile(registry, _with(change))


def test_a_mistyped_block_type_or_model_id_is_answered_with_the_nearest_first(registry):
    """The fix first and short: whatever shows a prefix of the message shows it."""
    det = next(s for s in DETECT_SPEC["steps"] if s["name"] == "det")
    typo = det["type"].replace("detection", "detecton")
    with pytest.raises(WorkflowCompilationError) as caught:
        _compile(registry, _with({"det.type": typo}))
    message = caught.value.message
    assert message.startswith(f"step 'det': unknown block type '{typo}'; did you mean '")
    assert f"'{det['type']}'" in message and len(message) < 300, message
    with pytest.raises(WorkflowCompilationError) as caught:
        _compile(registry, _with({"det.model_id": "yolov3-tiny-461"}))
    assert "did you mean 'yolov3-tiny-416'?" in caught.value.message


def test_parameters_fill_from_defaults_and_workflow_parameters(registry):
    spec = copy.deepcopy(DETECT_SPEC)
    spec["inputs"].append({"type": "WorkflowParameter", "name": "conf", "default_value": 0.9})
    spec["inputs"].append({"type": "WorkflowParameter", "name": "model"})
    spec["steps"][0]["confidence"] = "$inputs.conf"
    spec["steps"][0]["model_id"] = "$inputs.model"
    # A run without the value says which input it lacks and who needs it (the reference's
    # words); the definition alone is valid.
    missing = "runtime parameter `model` .*not provided \\(step 'det' field 'model_id'"
    with pytest.raises(WorkflowCompilationError, match=missing):
        _compile(registry, spec)
    assert _compile(registry, spec, validating=True)
    workflow = _compile(registry, spec, parameters={"model": "yolov3-tiny-416"})
    assert workflow.output_names == ["predictions", "annotated"]


def test_malformed_specs_and_duplicate_names():
    with pytest.raises(WorkflowCompilationError, match="invalid workflow specification"):
        parse_spec({"inputs": [], "steps": [], "outputs": []})
    spec = copy.deepcopy(DETECT_SPEC)
    spec["outputs"].append(dict(spec["outputs"][0]))
    with pytest.raises(WorkflowCompilationError, match="duplicate output name"):
        parse_spec(spec)


def test_the_blur_block_needs_no_model_and_checks_its_kernel(registry, photos):
    from streaming.protocol.workflows import image_blur

    image = cv2.imread(str(photos / "dog.jpg"))
    out = _compile(registry, image_blur("average", 5)).run(image.copy(), {}, FrameState())
    np.testing.assert_array_equal(out["output_image"].numpy, cv2.blur(image, (5, 5)))
    for blur_type in ("gaussian", "median", "bilateral"):
        _compile(registry, image_blur(blur_type, 3)).run(image.copy(), {}, FrameState())
    with pytest.raises(WorkflowCompilationError, match="kernel_size must be an odd"):
        _compile(registry, image_blur("gaussian", 4))
    with pytest.raises(WorkflowCompilationError, match="blur_type must be one of"):
        _compile(registry, image_blur("motion", 5))


def test_a_model_a_workflow_holds_is_not_unloaded_until_the_workflow_closes(default_model_dir):
    registry = ModelRegistry(Settings(models_dir=default_model_dir))
    try:
        workflow = _compile(registry, DETECT_SPEC)
        with pytest.raises(ModelInUse, match="in use by 1 running"):
            registry.unload("yolov3-tiny-416")
        assert registry.unload_idle() == ["yolov3-tiny-416"]  # held: stays
        workflow.close()
        workflow.close()  # idempotent: the lease is returned once
        assert registry.unload("yolov3-tiny-416") is True
        assert registry.loaded() == {} and registry.unload("yolov3-tiny-416") is False
    finally:
        registry.close()


def test_a_workflow_that_fails_to_compile_holds_no_model(default_model_dir):
    registry = ModelRegistry(Settings(models_dir=default_model_dir))
    spec = copy.deepcopy(DETECT_SPEC)
    spec["steps"][0]["class_filter"] = ["unicorn"]  # checked once the model is loaded
    second = copy.deepcopy(spec["steps"][0]) | {"name": "again", "class_filter": ["unicorn"]}
    spec["steps"][0]["class_filter"] = None
    spec["steps"].append(second)  # the first step builds, then the second fails
    try:
        with pytest.raises(WorkflowCompilationError, match="unicorn"):
            _compile(registry, spec)
        assert registry.unload("yolov3-tiny-416") is True  # nothing holds it
    finally:
        registry.close()


def _v3(**fields) -> dict:
    spec = copy.deepcopy(DETECT_SPEC)
    v3 = "roboflow_core/roboflow_object_detection_model@v3"
    spec["steps"][0] = {**spec["steps"][0], "type": v3, **fields}
    return spec


def test_v3_model_blocks_take_confidence_mode(registry, photos):
    image = cv2.imread(str(photos / "person.jpg"))

    def found(**fields) -> list[float]:
        workflow = _compile(registry, _v3(**fields))
        try:
            outputs = workflow.run(image, {}, FrameState())
        finally:
            workflow.close()
        return sorted(outputs["predictions"].confidence.tolist())

    default = found()  # "best": the model's default threshold, 0.4, without per-class ones
    assert default and min(default) >= 0.4
    assert found(confidence_mode="default") == default
    between = (default[0] + default[-1]) / 2  # above the weakest detection, below the best
    strict = found(confidence_mode="custom", custom_confidence=between)
    assert strict and min(strict) >= between and len(strict) < len(default)
    with pytest.raises(WorkflowCompilationError, match="custom_confidence is required"):
        _compile(registry, _v3(confidence_mode="custom", custom_confidence=None))
    with pytest.raises(
        WorkflowCompilationError, match="confidence_mode must be one of best, default, custom"
    ):
        _compile(registry, _v3(confidence_mode="best-ish"))


def test_every_version_of_the_reference_blocks_we_have():
    from streaming.workflows.blocks import BLOCKS

    versions = {
        "roboflow_object_detection_model": 3, "roboflow_instance_segmentation_model": 4,
        "roboflow_keypoint_detection_model": 3, "roboflow_classification_model": 3,
        "roboflow_multi_label_classification_model": 3, "label_visualization": 2,
        "polygon_visualization": 2, "byte_tracker": 3, "line_counter": 2, "time_in_zone": 3,
        "path_deviation_analytics": 2,
    }  # fmt: skip
    for block, newest in versions.items():
        for version in range(1, newest + 1):
            assert f"roboflow_core/{block}@v{version}" in BLOCKS, (block, version)


def test_label_visualization_v2_scales_its_text_with_the_frame():
    from streaming.workflows.blocks.visualization import LabelVisualizationBlockV2
    from tests.support.blocks import build

    block = build(LabelVisualizationBlockV2, text_size_mode="Automatic", text_scale=1.0)
    detections = sv.Detections(
        xyxy=np.array([[10, 10, 50, 50]], float),
        class_id=np.array([0]),
        data={"class_name": np.array(["a"])},
    )
    block.draw(np.zeros((540, 960, 3), np.uint8), detections)
    assert block.annotator.text_scale == pytest.approx(0.5)  # a 540-pixel side: half of 1080
    with pytest.raises(
        WorkflowCompilationError, match="text_size_mode must be one of Manual, Automatic"
    ):
        build(LabelVisualizationBlockV2, text_size_mode="Huge")
