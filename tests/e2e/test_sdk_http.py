"""inference-sdk's HTTP calls, unmodified, against the real server process and real photos:
server info, the model registry, ``infer`` and ``run_workflow``."""

from __future__ import annotations

import base64
import copy
import io
import pickle
import shutil
from pathlib import Path

import av
import cv2
import httpx
import numpy as np
import pytest
from inference_sdk import InferenceConfiguration, InferenceHTTPClient
from inference_sdk.http.errors import HTTPCallErrorError
from inference_sdk.webrtc import StreamConfig, VideoFileSource

from tests.conftest import DETECT_SPEC, load_photo
from tests.support.every_block import FRAME_DEPENDENT, every_block_workflow
from tests.support.models import add_tiny_task_models
from tests.support.sdk import SdkSession
from tests.support.server import running_server

pytestmark = pytest.mark.e2e

MODEL = "yolov3-tiny-416"
PHOTOS = ("person.jpg", "dog.jpg", "horses.jpg")


ALIASED = "yolov8n-640"
"""The default model again, served under a reference model's name (the weights differ;
what is tested is that the name finds it, whichever id the caller uses)."""


@pytest.fixture(scope="module")
def http_server(default_model_dir, tmp_path_factory):
    # Its own server and models: these tests unload models, which the suite's shared
    # server keeps.
    models = tmp_path_factory.mktemp("sdk-models")
    for name in (MODEL, ALIASED):
        shutil.copytree(default_model_dir / MODEL, models / name)
    add_tiny_task_models(models, tmp_path_factory.mktemp("exports"))
    with running_server(max_images_per_request="4", models_dir=str(models)) as process:
        yield process


@pytest.fixture
def client(http_server):
    return InferenceHTTPClient(api_url=http_server.url, api_key=None)


def _boxes(predictions: list[dict]) -> list[tuple[str, np.ndarray]]:
    return sorted(
        (
            (p["class"], np.array([p["x"] - p["width"] / 2, p["y"] - p["height"] / 2,
                                   p["x"] + p["width"] / 2, p["y"] + p["height"] / 2]))
            for p in predictions
        ),
        key=lambda item: (item[0], *item[1].round().tolist()),
    )  # fmt: skip


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    x1, y1 = np.maximum(a[:2], b[:2])
    x2, y2 = np.minimum(a[2:], b[2:])
    inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])  # noqa: E731
    return inter / (area(a) + area(b) - inter)


def _same_detections(found: list[dict], expected: list[dict], min_iou: float) -> None:
    """Every expected box has one of the same class at ``min_iou`` or more, and no more."""
    assert len(found) == len(expected), (found, expected)
    left = _boxes(found)
    for name, box in _boxes(expected):
        best = max((i for i, (n, _) in enumerate(left) if n == name),
                   key=lambda i: _iou(left[i][1], box), default=None)  # fmt: skip
        assert best is not None and _iou(left[best][1], box) >= min_iou, (name, box, left)
        left.pop(best)


def test_the_sdk_reads_the_server_and_its_model_registry(client):
    client.unload_all_models()  # whatever the tests before loaded
    info = client.get_server_info()
    assert info.name == "visionstream" and info.version and info.uuid
    loaded = client.load_model(MODEL)
    (model,) = [m for m in loaded.models if m.model_id == MODEL]
    assert model.task_type == "object-detection"
    assert (model.input_width, model.input_height) == (416, 416)
    assert client.get_model_description(MODEL) == model
    assert [m.model_id for m in client.list_loaded_models().models] == [MODEL]
    assert client.unload_model(MODEL).models == []
    assert client.list_loaded_models().models == []
    client.load_model(MODEL)
    assert client.unload_all_models().models == []


def test_a_model_the_server_does_not_have_is_a_404_saying_how_to_add_it(client):
    with pytest.raises(HTTPCallErrorError) as failure:
        client.load_model("yolov8s-640")  # the SDK asks for coco/6
    assert failure.value.status_code == 404
    message = failure.value.api_message
    assert "'coco/6' (yolov8s-640)" in message
    assert "its models: " in message and "yolov3-tiny-416" in message  # what it has
    assert "visionstream models add FILE --name yolov8s-640" in message


def test_a_model_served_under_a_reference_name_answers_to_it(client, photos):
    path = str(photos / "dog.jpg")
    found = client.infer(path, model_id=ALIASED)  # the SDK sends coco/3
    assert "dog" in {p["class"] for p in found["predictions"]}
    spec = copy.deepcopy(DETECT_SPEC)
    spec["steps"][0]["model_id"] = ALIASED  # a reference workflow, as its authors wrote it
    (output,) = client.run_workflow(specification=spec, images={"image": path})
    assert output["predictions"]["predictions"]
    ids = {m.model_id for m in client.list_loaded_models().models}
    assert {ALIASED, "coco/3"} <= ids
    client.unload_model(ALIASED)  # the SDK sends coco/3 here too
    assert {ALIASED, "coco/3"}.isdisjoint(m.model_id for m in client.list_loaded_models().models)


def test_infer_finds_what_a_workflow_run_finds_on_the_same_photo(client, photos):
    path = str(photos / "person.jpg")
    exact = InferenceConfiguration(client_downsizing_disabled=True, confidence_threshold=0.4)
    with client.use_configuration(exact):
        inferred = client.infer(path, model_id=MODEL)
    (ran,) = client.run_workflow(specification=DETECT_SPEC, images={"image": path})
    image = cv2.imread(path)
    assert inferred["image"] == {"width": image.shape[1], "height": image.shape[0]}
    assert {p["class"] for p in inferred["predictions"]} >= {"person", "dog", "horse"}
    assert all(p["detection_id"] and p["class_id"] >= 0 for p in inferred["predictions"])
    assert inferred["time"] > 0
    # One run path: the same model block with the same defaults, to the pixel.
    _same_detections(inferred["predictions"], ran["predictions"]["predictions"], 0.999)
    # The SDK's own downsizing (to the model's 416) and rescaling: the same objects, in
    # the caller's pixels.
    downsized = client.infer(path, model_id=MODEL)
    assert downsized["image"] == inferred["image"]
    confident = [p for p in inferred["predictions"] if p["confidence"] >= 0.6]
    for expected in confident:  # a smaller input moves scores: compare the clear objects
        (name, box), *_ = _boxes([expected])
        assert any(n == name and _iou(b, box) >= 0.7 for n, b in _boxes(downsized["predictions"]))


def test_infer_takes_the_thresholds_and_filters_the_sdk_sends(client, photos):
    path = str(photos / "person.jpg")
    only_dogs = InferenceConfiguration(class_filter=["dog"], confidence_threshold=0.3,
                                       max_detections=1, visualize_predictions=True)  # fmt: skip
    with client.use_configuration(only_dogs):
        found = client.infer(path, model_id=MODEL)
    assert [p["class"] for p in found["predictions"]] == ["dog"]
    drawn = cv2.imdecode(np.frombuffer(base64.b64decode(found["visualization"]), np.uint8), 1)
    assert drawn.shape == cv2.imread(path).shape


def test_several_images_in_one_call_answer_in_order(client, photos):
    images = [load_photo(photos, name) for name in PHOTOS]
    answers = client.infer(images, model_id=MODEL)
    assert isinstance(answers, list) and len(answers) == 3
    found = [{p["class"] for p in a["predictions"]} for a in answers]
    assert "person" in found[0] and "dog" in found[1] and "horse" in found[2], found
    outputs = client.run_workflow(specification=DETECT_SPEC, images={"image": images},
                                  excluded_fields=["annotated"])  # fmt: skip
    assert [sorted(o) for o in outputs] == [["predictions"]] * 3
    ran = [{p["class"] for p in o["predictions"]["predictions"]} for o in outputs]
    assert "person" in ran[0] and "dog" in ran[1] and "horse" in ran[2], ran


def test_a_named_workflow_runs_and_its_image_output_comes_back(client, photos):
    (output,) = client.run_workflow(
        workspace_name="local", workflow_id="object-detection",
        images={"image": str(photos / "dog.jpg")},
    )  # fmt: skip
    images = [v for v in output.values() if isinstance(v, str) and len(v) > 1000]
    assert images, sorted(output)  # the annotated frame, base64 as the reference sends it
    drawn = cv2.imdecode(np.frombuffer(base64.b64decode(images[0]), np.uint8), 1)
    assert drawn.shape == cv2.imread(str(photos / "dog.jpg")).shape
    with pytest.raises(HTTPCallErrorError) as failure:
        client.run_workflow(workspace_name="local", workflow_id="nope", images={"image": drawn})
    assert failure.value.status_code == 404


def _post(server, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, timeout=60)


def _b64(data: bytes) -> dict:
    return {"type": "base64", "value": base64.b64encode(data).decode()}


@pytest.mark.parametrize(
    ("image", "status", "words"),
    [
        ({"type": "base64", "value": "bm90IGFuIGltYWdl"}, 400, "not an image"),
        ({"type": "pil", "value": "x"}, 400, "'pil' is not supported"),
        ([], 400, "no image"),
        ([_b64(b"x")] * 5, 413, "at most 4"),
        (
            _b64(pickle.dumps(np.zeros((4, 4, 3), np.uint8))) | {"type": "numpy"},
            400,
            "pickles are refused",
        ),
        ({"type": "url", "value": "http://169.254.169.254/x.jpg"}, 400, "169.254.169.254"),
        ({"type": "url", "value": "file:///etc/passwd"}, 400, "http(s)://"),
    ],
    ids=["garbage", "pil", "empty-batch", "too-many", "pickle", "metadata-url", "file-url"],
)
def test_bad_images_are_refused_by_name(http_server, image, status, words):
    answer = _post(http_server, "/infer/object_detection", {"model_id": MODEL, "image": image})
    assert answer.status_code == status, answer.text
    assert words in answer.json()["message"]


def test_a_numpy_image_and_a_task_the_model_does_not_do(http_server, photos):
    buffer = io.BytesIO()
    np.save(buffer, load_photo(photos, "dog.jpg"))
    image = {"type": "numpy", "value": base64.b64encode(buffer.getvalue()).decode()}
    found = _post(http_server, "/infer/object_detection", {"model_id": MODEL, "image": image})
    assert found.status_code == 200 and found.json()["predictions"], found.text
    wrong = _post(http_server, "/infer/classification", {"model_id": MODEL, "image": image})
    assert wrong.status_code == 400
    assert "call /infer/object_detection" in wrong.json()["message"]
    huge = _b64(cv2.imencode(".png", np.zeros((3000, 3000), np.uint8))[1].tobytes())
    too_big = _post(http_server, "/infer/object_detection", {"model_id": MODEL, "image": huge})
    assert too_big.status_code == 413 and "3000x3000" in too_big.json()["message"]


def test_a_model_a_session_holds_is_not_unloaded_under_it(http_server, photos):
    # A workflow run holds its model only while it runs; a WebRTC session for its life.
    closed = http_server.closed_sessions
    session = SdkSession(http_server.url, DETECT_SPEC)
    try:
        session.wait_streaming(3)
        answer = _post(http_server, "/model/remove", {"model_id": MODEL})
        assert answer.status_code == 409 and "in use" in answer.json()["message"]
        cleared = _post(http_server, "/model/clear", {})
        assert [m["model_id"] for m in cleared.json()["models"]] == [MODEL]
    finally:
        session.close()
    http_server.wait_sessions_closed(closed + 1, timeout=60)
    assert _post(http_server, "/model/remove", {"model_id": MODEL}).json() == {"models": []}


def test_the_v0_client_mode_and_its_image_answer(http_server, photos):
    client = InferenceHTTPClient(api_url=http_server.url, api_key="any")  # v0 insists on one
    client.select_api_v0()
    path = str(photos / "dog.jpg")
    found = client.infer(path, model_id=ALIASED)  # POST /coco/3, the image as the body
    assert "dog" in {p["class"] for p in found["predictions"]}
    with client.use_configuration(InferenceConfiguration(format="image")):
        drawn = client.infer(path, model_id=ALIASED)["visualization"]
    assert isinstance(drawn, str) and len(drawn) > 1000  # the JPEG, base64 as the SDK gives it
    with open(path, "rb") as file:  # a form upload, as curl -F file=@dog.jpg sends it
        uploaded = httpx.post(f"{http_server.url}/coco/3?confidence=40", files={"file": file})
    assert uploaded.status_code == 200
    assert {p["class"] for p in uploaded.json()["predictions"]} == {
        p["class"] for p in found["predictions"]
    }
    unknown = httpx.post(f"{http_server.url}/coco/6", content=b"aGk=")
    assert unknown.status_code == 404 and "yolov8s-640" in unknown.json()["message"]


def test_a_specification_is_validated_and_described_without_running_it(http_server):
    valid = _post(http_server, "/workflows/validate", DETECT_SPEC)
    assert valid.status_code == 200 and valid.json() == {"status": "ok"}
    broken = copy.deepcopy(DETECT_SPEC)
    broken["steps"][1]["predictions"] = "$steps.nowhere.predictions"
    refused = _post(http_server, "/workflows/validate", broken)
    assert refused.status_code == 400 and "nowhere" in refused.json()["message"]
    described = _post(http_server, "/workflows/describe_interface", {"specification": DETECT_SPEC})
    assert described.status_code == 200, described.text
    interface = described.json()
    assert interface["inputs"] == {"image": ["image"]}
    assert interface["outputs"] == {
        "predictions": ["object_detection_prediction"],
        "annotated": ["image"],
    }


async def test_infer_async_and_infer_on_stream(client, photos, tmp_path):
    found = await client.infer_async(str(photos / "horses.jpg"), model_id=MODEL)
    assert "horse" in {p["class"] for p in found["predictions"]}
    for name in ("dog.jpg", "horses.jpg"):
        shutil.copy(photos / name, tmp_path / name)
    streamed = {
        Path(str(reference)).name: {p["class"] for p in prediction["predictions"]}
        for reference, _frame, prediction in client.infer_on_stream(str(tmp_path), MODEL)
    }
    assert streamed.keys() == {"dog.jpg", "horses.jpg"}
    assert "dog" in streamed["dog.jpg"] and "horse" in streamed["horses.jpg"]


def _over_webrtc(client, image, spec, outputs: list[str], tmp_path, frames: int = 1) -> list:
    """Each frame's data when ``image`` is uploaded ``frames`` times through the SDK's
    ``VideoFileSource``, in a lossless clip (PNG frames, RGB): the server decodes the very
    pixels an HTTP request would send."""
    clip = tmp_path / "still.mov"
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("png", rate=5)
        stream.width, stream.height, stream.pix_fmt = image.shape[1], image.shape[0], "rgb24"
        for _ in range(frames):
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")))
        container.mux(stream.encode())
    session = client.webrtc.stream(
        source=VideoFileSource(str(clip)), workflow=spec, config=StreamConfig(data_output=outputs)
    )
    streamed: list = []

    @session.on_data()
    def on_data(data, metadata):
        streamed.append(data)

    session.run()
    return streamed


def test_an_image_gives_the_same_detections_over_http_and_over_webrtc(client, photos, tmp_path):
    image = load_photo(photos, "person.jpg")
    streamed = _over_webrtc(client, image, DETECT_SPEC, ["predictions"], tmp_path, frames=2)
    results = [data["predictions"] for data in streamed]
    assert len(results) == 2
    still = tmp_path / "person.png"  # a path is sent as its bytes (an array as a JPEG)
    cv2.imwrite(str(still), image)
    with client.use_configuration(InferenceConfiguration(client_downsizing_disabled=True)):
        inferred = client.infer(str(still), model_id=MODEL)
    for result in results:
        _same_detections(result["predictions"], inferred["predictions"], 0.999)


def _operand(name: str, *operations: dict) -> dict:
    return {"type": "DynamicOperand", "operand_name": name, "operations": list(operations)}


def _binary(left: dict, comparator: str, right: dict) -> dict:
    return {"type": "BinaryStatement", "left_operand": left,
            "comparator": {"type": comparator}, "right_operand": right}  # fmt: skip


def _property(name: str) -> dict:
    return {"type": "ExtractDetectionProperty", "property_name": name}


# Written as the reference's authors write them: versions, the query language's operations on
# operands, a filter operand that is an image, selectors in every field that takes them.
REFERENCE_STYLE = {
    "version": "1.0",
    "inputs": [
        {"type": "WorkflowImage", "name": "image"},
        {"type": "WorkflowParameter", "name": "classes", "default_value": ["person", "dog"]},
    ],
    "steps": [
        {"type": "roboflow_core/roboflow_object_detection_model@v3", "name": "model",
         "images": "$inputs.image", "model_id": MODEL, "confidence_mode": "custom",
         "custom_confidence": 0.3},
        {"type": "roboflow_core/detections_filter@v1", "name": "big",
         "predictions": "$steps.model.predictions",
         "operations": [
             {"type": "DetectionsFilter", "filter_operation": {
                 "type": "StatementGroup", "operator": "and", "statements": [
                     _binary(_operand("_", _property("class_name")), "in (Sequence)",
                             _operand("classes")),
                     _binary(_operand("_", _property("size")), "(Number) >", _operand(
                         "image", {"type": "ExtractImageProperty", "property_name": "size"},
                         {"type": "Multiply", "other": 0.01})),
                 ]}},
             {"type": "SortDetections", "mode": "confidence", "ascending": False},
         ],
         "operations_parameters": {"classes": "$inputs.classes", "image": "$inputs.image"}},
        {"type": "roboflow_core/property_definition@v1", "name": "summary",
         "data": "$steps.big.predictions",
         "operations": [{"type": "DetectionsPropertyExtract", "property_name": "class_name"},
                        {"type": "SequenceApply", "operations": [{"type": "StringToUpperCase"}]},
                        {"type": "SequenceJoin", "separator": "+"}]},
        {"type": "roboflow_core/property_definition@v1", "name": "best",
         "data": "$steps.model.predictions",
         "operations": [{"type": "DetectionsSelection", "mode": "top_confidence"},
                        {"type": "DetectionsPropertyExtract", "property_name": "class_name"},
                        {"type": "SequenceAggregate", "mode": "first"}]},
        {"type": "roboflow_core/property_definition@v1", "name": "wanted",
         "data": "$inputs.classes",
         "operations": [{"type": "SequenceLength"}]},
        {"type": "roboflow_core/label_visualization@v2", "name": "labels",
         "image": "$inputs.image", "predictions": "$steps.big.predictions",
         "text_size_mode": "Automatic"},
    ],
    "outputs": [
        {"type": "JsonField", "name": "kept", "selector": "$steps.big.predictions"},
        {"type": "JsonField", "name": "summary", "selector": "$steps.summary.output"},
        {"type": "JsonField", "name": "best", "selector": "$steps.best.output"},
        {"type": "JsonField", "name": "wanted", "selector": "$steps.wanted.output"},
    ],
}  # fmt: skip


def test_a_reference_style_workflow_runs_alike_over_http_and_webrtc(client, photos, tmp_path):
    image = load_photo(photos, "person.jpg")
    still = tmp_path / "person.png"
    cv2.imwrite(str(still), image)
    (ran,) = client.run_workflow(specification=REFERENCE_STYLE, images={"image": str(still)})
    kept = ran["kept"]["predictions"]
    assert {p["class"] for p in kept} <= {"person", "dog"} and kept
    assert all(p["width"] * p["height"] > 0.01 * 640 * 480 for p in kept)
    assert [p["confidence"] for p in kept] == sorted((p["confidence"] for p in kept), reverse=True)
    assert ran["summary"] == "+".join(p["class"].upper() for p in kept)
    assert ran["best"] in {"person", "dog", "horse"} and ran["wanted"] == 2
    outputs = ["kept", "summary", "best", "wanted"]
    (over_webrtc,) = _over_webrtc(client, image, REFERENCE_STYLE, outputs, tmp_path)
    assert {k: over_webrtc[k] for k in ("summary", "best", "wanted")} == {
        k: ran[k] for k in ("summary", "best", "wanted")
    }
    _same_detections(over_webrtc["kept"]["predictions"], kept, 0.999)


def test_a_workflow_of_parameters_alone_runs_over_http(client):
    spec = {
        "version": "1.0",
        "inputs": [{"type": "WorkflowParameter", "name": "names", "default_value": ["a", "b"]}],
        "steps": [{"type": "roboflow_core/property_definition@v1", "name": "joined",
                   "data": "$inputs.names", "operations": [{"type": "SequenceJoin"}]}],
        "outputs": [{"type": "JsonField", "name": "joined", "selector": "$steps.joined.output"}],
    }  # fmt: skip
    assert client.run_workflow(specification=spec) == [{"joined": "a, b"}]
    assert client.run_workflow(specification=spec, parameters={"names": ["x"]}) == [{"joined": "x"}]


def _comparable(value):
    """An output as both paths must agree on it: ids, times and where-from left out, an
    image as its base64 (the SDK unwraps those of /workflows/run, not the data channel's)."""
    if isinstance(value, dict) and value.get("type") == "base64" and "value" in value:
        return value["value"]
    if isinstance(value, dict):
        return {
            k: _comparable(v)
            for k, v in value.items()
            if k not in ("detection_id", "inference_id", "parent_id", "root_parent_id",
                         "video_metadata", "time")
        }  # fmt: skip
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, float):
        return round(value, 3)
    return value


def test_every_block_version_and_operation_alike_over_http_and_webrtc(
    http_server, client, photos, tmp_path
):
    image = load_photo(photos, "person.jpg")
    still = tmp_path / "person.png"
    cv2.imwrite(str(still), image)
    spec = every_block_workflow()
    (ran,) = client.run_workflow(specification=spec, images={"image": str(still)})
    assert ran["op_SequenceAggregate"]["output"] in {"person", "dog", "horse"}
    assert ran["op_ClassificationPropertyExtract"]["output"] == "dog"
    assert ran["cls3"]["predictions"]["top"] == "dog"
    assert ran["multi3"]["predictions"]["predicted_classes"] == ["cat", "dog", "bird"]  # sigmoid
    assert sorted(p["class"] for p in ran["seg4"]["predictions"]["predictions"]) == ["cat", "dog"]
    assert ran["aggregate"]["count_max"] == ran["gated"]["output"] >= 1
    assert ran["op_DetectionsRename"]["output"].count("human") == ran["gated"]["output"]
    assert set(ran) == {o["name"] for o in spec["outputs"]}

    names = [o["name"] for o in spec["outputs"]]
    (over_webrtc,) = _over_webrtc(client, image, spec, names, tmp_path)
    for name in names:
        if name in FRAME_DEPENDENT:
            continue
        assert _comparable(over_webrtc[name]) == _comparable(ran[name]), name


def test_run_workflow_with_a_second_image_finds_the_template_in_the_first(client, photos):
    """Two image inputs through the SDK: the images run over, and a still one (a template)."""
    photo = load_photo(photos, "dog.jpg")
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"},
                   {"type": "InferenceImage", "name": "template"}],
        "steps": [{"type": "roboflow_core/template_matching@v1", "name": "find",
                   "image": "$inputs.image", "template": "$inputs.template",
                   "matching_threshold": 0.9}],
        "outputs": [{"type": "JsonField", "name": "found", "selector": "$steps.find.*"}],
    }  # fmt: skip
    (out,) = client.run_workflow(
        specification=spec, images={"image": photo, "template": photo[200:260, 300:380]}
    )
    found = out["found"]
    assert found["number_of_matches"] == 1
    (box,) = found["predictions"]["predictions"]
    assert (box["x"], box["y"], box["width"], box["height"]) == (340, 230, 80, 60)
