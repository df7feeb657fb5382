"""A two-stage workflow (detect, crop each detection, classify every crop, classes back onto
the detections) through the unmodified inference-sdk, against the real server process: over
HTTP (``run_workflow``) and over WebRTC (``webrtc.stream``). The detector is the default
model on a real photo; the classifier a real one of the simplest kind (each crop's dominant
colour), added as a user adds theirs (``visionstream models add``); the OCR model is the one
``visionstream models pull pp-ocrv4`` fetches, reading a sign painted onto the photo."""

from __future__ import annotations

import base64
import contextlib
import shutil
import threading

import cv2
import pytest
from inference_sdk import InferenceHTTPClient
from inference_sdk.webrtc import StreamConfig

from tests.conftest import load_photo
from tests.support.models import add_model
from tests.support.onnx_models import COLOURS, colour_classifier
from tests.support.sdk import LoopManualSource
from tests.support.server import running_server

pytestmark = pytest.mark.e2e

MODEL = "yolov3-tiny-416"


def step(kind: str, name: str, **fields: object) -> dict:
    return {"type": f"roboflow_core/{kind}", "name": name, **fields}


TWO_STAGE = {
    "version": "1.0",
    "inputs": [{"type": "InferenceImage", "name": "image"}],
    "steps": [
        step("roboflow_object_detection_model@v2", "det", images="$inputs.image", model_id=MODEL),
        step("dynamic_crop@v1", "crop", images="$inputs.image",
             predictions="$steps.det.predictions"),
        step("roboflow_classification_model@v2", "cls", images="$steps.crop.crops",
             model_id="colours"),
        step("detections_classes_replacement@v1", "swap",
             object_detection_predictions="$steps.det.predictions",
             classification_predictions="$steps.cls.predictions"),
    ],
    "outputs": [
        {"type": "JsonField", "name": "detections", "selector": "$steps.det.predictions"},
        {"type": "JsonField", "name": "crops", "selector": "$steps.crop.crops"},
        {"type": "JsonField", "name": "classes", "selector": "$steps.cls.predictions"},
        {"type": "JsonField", "name": "relabelled", "selector": "$steps.swap.predictions"},
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def two_stage_server(default_model_dir, ocr_model_files, tmp_path_factory):
    models = tmp_path_factory.mktemp("two-stage-models")
    shutil.copytree(default_model_dir / MODEL, models / MODEL)
    shutil.copytree(ocr_model_files, models / ocr_model_files.name)
    export = colour_classifier(tmp_path_factory.mktemp("exports") / "colours.onnx")
    added = add_model(models, str(export), "--name", "colours", "--decoder", "classification",
                      "--names", ",".join(COLOURS), "--resize", "stretch")  # fmt: skip
    assert added.returncode == 0, added.stderr
    with running_server(models_dir=str(models)) as process:
        yield process


def check_two_stage(out: dict) -> None:
    """Each crop classified, its answer naming the detection it was cut for, and the
    detections relabelled with those answers: the reference's nesting and fields."""
    detections = out["detections"]["predictions"]
    assert detections, "the default model finds things in the photo"
    ids = {d["detection_id"] for d in detections}
    classes = out["classes"]
    assert isinstance(classes, list) and len(classes) == len(detections)
    assert {c["parent_id"] for c in classes} == ids
    assert all(c["top"] in COLOURS and c["prediction_type"] == "classification" for c in classes)
    relabelled = out["relabelled"]["predictions"]
    assert sorted(p["class"] for p in relabelled) == sorted(c["top"] for c in classes)


def test_run_workflow_returns_each_crops_class_nested_as_the_reference_does(
    two_stage_server, photos
):
    client = InferenceHTTPClient(api_url=two_stage_server.url, api_key=None)
    (out,) = client.run_workflow(
        specification=TWO_STAGE, images={"image": load_photo(photos, "dog.jpg")}
    )
    check_two_stage(out)
    # The SDK hands each crop over as its base64 (as it does any image output); the JSON
    # itself carries where each crop lies, as the reference's does.
    assert len(out["crops"]) == len(out["detections"]["predictions"])
    encoded = base64.b64encode(cv2.imencode(".jpg", load_photo(photos, "dog.jpg"))[1]).decode()
    answer = two_stage_server.post("/workflows/run", json={
        "specification": TWO_STAGE, "inputs": {"image": {"type": "base64", "value": encoded}},
    })  # fmt: skip
    assert answer.status_code == 200, answer.text
    (raw,) = answer.json()["outputs"]
    for crop in raw["crops"]:
        assert crop["type"] == "base64" and crop["root_parent_id"] == "image"
        assert set(crop["parent_origin"]) == {"offset_x", "offset_y", "width", "height"}
        assert crop["parent_id"] in {d["detection_id"] for d in raw["detections"]["predictions"]}


def streamed(server, spec: dict, photo, outputs: list[str], count: int = 2) -> list[dict]:
    """The first ``count`` results of a WebRTC session of the unmodified SDK on ``spec``,
    fed ``photo`` over and over."""
    source = LoopManualSource()
    session = InferenceHTTPClient(api_url=server.url, api_key=None).webrtc.stream(
        source=source, workflow=spec, config=StreamConfig(data_output=outputs)
    )
    results: list[dict] = []
    arrived = threading.Condition()

    @session.on_data()
    def _collect(data: dict, metadata: object) -> None:
        with arrived:
            results.append(data)
            arrived.notify_all()

    stop = threading.Event()

    def feed() -> None:
        if source.connected.wait(60):
            while not stop.wait(0.2):
                source.send_on_loop(photo)

    threading.Thread(target=feed, daemon=True).start()

    def run() -> None:  # starts the session and holds it until closed
        with contextlib.suppress(TimeoutError):
            session.wait(timeout=120)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        with arrived:
            assert arrived.wait_for(lambda: len(results) >= count, 60), results
            return list(results[:count])
    finally:
        stop.set()
        session.close()
        runner.join(30)


def test_a_webrtc_session_sends_each_frames_crop_classes(two_stage_server, photos):
    first, _ = streamed(two_stage_server, TWO_STAGE, load_photo(photos, "dog.jpg"),
                        ["detections", "classes", "relabelled"])  # fmt: skip
    check_two_stage(first)


OCR = {
    "version": "1.0",
    "inputs": [{"type": "InferenceImage", "name": "image"}],
    "steps": [
        step("ocr_model@v1", "sign", images="$inputs.image"),
        step("stitch_ocr_detections@v2", "lines", predictions="$steps.sign.predictions"),
        step("roboflow_object_detection_model@v2", "det", images="$inputs.image", model_id=MODEL),
        step("dynamic_crop@v1", "crop", images="$inputs.image",
             predictions="$steps.det.predictions"),
        step("pp_ocr@v1", "on_crops", images="$steps.crop.crops"),
    ],
    "outputs": [
        {"type": "JsonField", "name": "text", "selector": "$steps.sign.result"},
        {"type": "JsonField", "name": "stitched", "selector": "$steps.lines.ocr_text"},
        {"type": "JsonField", "name": "detections", "selector": "$steps.det.predictions"},
        {"type": "JsonField", "name": "per_crop", "selector": "$steps.on_crops.*"},
    ],
}  # fmt: skip


def with_sign(photos):
    photo = load_photo(photos, "dog.jpg")
    photo[400:470, 20:300] = 255  # a sign in the bottom-left corner, clear of the animals
    cv2.putText(photo, "EXIT 42", (40, 452), cv2.FONT_HERSHEY_SIMPLEX, 1.5, (0, 0, 0), 3)
    return photo


def test_run_workflow_reads_a_sign_on_the_frame_and_text_on_each_crop(two_stage_server, photos):
    photo = with_sign(photos)
    client = InferenceHTTPClient(api_url=two_stage_server.url, api_key=None)
    (out,) = client.run_workflow(specification=OCR, images={"image": photo})
    assert "EXIT 42" in out["text"] and "EXIT 42" in out["stitched"]
    # One OCR answer per crop, nested per crop as the reference nests them.
    detections = out["detections"]["predictions"]
    per_crop = out["per_crop"]
    assert len(per_crop) == len(detections) > 0
    assert {c["parent_id"] for c in per_crop} == {d["detection_id"] for d in detections}
    assert all(c["prediction_type"] == "ocr" and isinstance(c["result"], str) for c in per_crop)


def test_a_webrtc_session_reads_the_sign_in_every_frame(two_stage_server, photos):
    results = streamed(two_stage_server, OCR, with_sign(photos), ["text", "per_crop"])
    for result in results:
        assert "EXIT 42" in result["text"]
        assert all(c["prediction_type"] == "ocr" for c in result["per_crop"])
