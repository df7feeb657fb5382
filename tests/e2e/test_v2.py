"""KServe V2: our server's endpoints, and our remote backend against our server and against
KServe's own ModelServer (an implementation we did not write), over HTTP and gRPC."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cv2
import httpx
import numpy as np
import pytest
import tritonclient.http as triton

from streaming.config import Settings
from streaming.errors import ModelError
from streaming.inference.decoders import DecodeOptions
from streaming.inference.onnx_session import OnnxRuntimeSession
from streaming.inference.registry import ModelRegistry
from streaming.inference.remote_session import RemoteV2Session
from tests.support.server import LoggedProcess, free_port

pytestmark = pytest.mark.e2e

MODEL = "yolov3-tiny-416"
MODEL_FILE = Path(Settings().models_dir) / MODEL / "model.onnx"


@pytest.fixture(scope="module")
def frames() -> np.ndarray:
    return np.random.default_rng(7).random((2, 3, 416, 416), dtype=np.float32)


@pytest.fixture(scope="module")
def expected(frames) -> list[np.ndarray]:
    return OnnxRuntimeSession(MODEL_FILE).run(frames)


def test_health_and_metadata(server):
    assert server.get("/v2/health/live").json() == {"live": True}
    assert server.get("/v2/health/ready").status_code == 200
    assert "binary_tensor_data" in server.get("/v2").json()["extensions"]
    metadata = server.get(f"/v2/models/{MODEL}").json()
    assert metadata["inputs"] == [
        {"name": "images", "datatype": "FP32", "shape": [-1, 3, 416, 416]}
    ]
    assert metadata["outputs"][0]["shape"] == [-1, 2535, 85]
    version = metadata["versions"][0]
    assert server.get(f"/v2/models/{MODEL}/versions/{version}/ready").json()["ready"] is True
    missing = server.get("/v2/models/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["error"]
    assert server.get(f"/v2/models/{MODEL}/versions/9/ready").status_code == 404


def test_json_and_binary_infer_give_the_model_output(server):
    small = np.zeros((1, 3, 416, 416), np.float32)
    body = {"id": "json-1", "inputs": [{"name": "images", "datatype": "FP32",
            "shape": list(small.shape), "data": small.reshape(-1).tolist()}]}  # fmt: skip
    answer = httpx.post(f"{server.url}/v2/models/{MODEL}/infer", json=body, timeout=60).json()
    assert answer["id"] == "json-1" and answer["model_name"] == MODEL
    (output,) = answer["outputs"]
    assert output["shape"] == [1, 2535, 85] and len(output["data"]) == 2535 * 85

    client = triton.InferenceServerClient(server.url.removeprefix("http://"))
    tensor = triton.InferInput("images", list(small.shape), "FP32")
    tensor.set_data_from_numpy(small, binary_data=True)
    result = client.infer(MODEL, [tensor], outputs=[triton.InferRequestedOutput("output")])
    np.testing.assert_allclose(
        result.as_numpy("output").reshape(-1), np.asarray(output["data"], np.float32), atol=1e-6
    )
    client.close()


def _json(document) -> tuple[dict, bytes]:
    return {}, json.dumps(document).encode()


def _binary(document, payload: bytes) -> tuple[dict, bytes]:
    head = json.dumps(document).encode()
    return {"Inference-Header-Content-Length": str(len(head))}, head + payload


def _image_input(shape, **fields) -> dict:
    return {"inputs": [{"name": "images", "datatype": "FP32", "shape": shape, **fields}]}


@pytest.mark.parametrize(
    ("request_", "needle"),
    [
        (({}, b"{not json"), "not JSON"),
        (_json({"inputs": "x"}), "'inputs' list"),
        (_json(_image_input([1, 3, 2, 2], data=[0.0] * 12)), "must be shaped"),
        (_json(_image_input([1, 2], data=[0.0])), "1 values for shape"),
        (({"Inference-Header-Content-Length": "999"}, b"{}"), "exceeds the body"),
        (
            _binary(_image_input([1, 3, 416, 416], parameters={"binary_data_size": 8}), b"\0" * 8),
            "8 binary bytes for shape",
        ),
        (_binary(_image_input([1], data=[0.0]), b"\0" * 4), "belong to no input"),
    ],
)
def test_malformed_infer_requests_get_a_precise_error(server, request_, needle):
    headers, body = request_
    response = httpx.post(
        f"{server.url}/v2/models/{MODEL}/infer", content=body, headers=headers, timeout=30
    )
    assert response.status_code == 400, response.text
    assert needle in response.json()["error"], response.json()
    assert server.get("/v2/health/ready").status_code == 200  # still serving


def test_the_api_key_guards_inference(guarded_server):
    assert guarded_server.get("/v2/health/live").status_code == 200
    refused = guarded_server.get(f"/v2/models/{MODEL}")
    assert refused.status_code == 401 and "API key" in refused.json()["error"]
    with pytest.raises(ModelError, match="requires an API key"):
        RemoteV2Session(guarded_server.url, MODEL)
    session = RemoteV2Session(guarded_server.url, MODEL, api_key="s3cret-key")
    assert session.inputs[0].name == "images"
    session.close()


def test_a_remote_model_on_our_server_detects_what_the_local_one_does(server, photos):
    image = cv2.imread(str(photos / "person.jpg"))
    # The server's own choice (auto) on this machine, on the square input as a remote
    # model runs: a 640x424 photo would take the local model's 416x288 variant.
    local = ModelRegistry(Settings(input_variants=False))
    remote = ModelRegistry(Settings(inference_backend="remote", remote_inference_url=server.url))
    try:
        mine = local.get(MODEL).detect(image, DecodeOptions())
        model = remote.get(MODEL)
        assert model.session.backend == "remote" and server.url in model.session.device
        theirs = model.detect(image, DecodeOptions())
    finally:
        local.close()
        remote.close()
    assert list(theirs.data["class_name"]) == list(mine.data["class_name"])
    np.testing.assert_allclose(theirs.confidence, mine.confidence, atol=1e-5)
    np.testing.assert_allclose(theirs.xyxy, mine.xyxy, atol=1e-3)


@pytest.fixture(scope="module")
def kserve_server():
    http_port, grpc_port = free_port(), free_port()
    script = Path(__file__).resolve().parents[1] / "support" / "kserve_model_server.py"
    process = LoggedProcess(
        [
            sys.executable,
            str(script),
            str(MODEL_FILE),
            MODEL,
            "--http_port",
            str(http_port),
            "--grpc_port",
            str(grpc_port),
        ]
    )
    try:
        process.wait_for_output("Uvicorn running on", timeout=60)
        yield f"http://127.0.0.1:{http_port}", f"grpc://127.0.0.1:{grpc_port}"
    finally:
        process.stop()


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_the_remote_backend_runs_a_model_served_by_kserve(
    kserve_server, frames, expected, transport
):
    url = kserve_server[0] if transport == "http" else kserve_server[1]
    session = RemoteV2Session(url, MODEL)
    try:
        assert [t.name for t in session.outputs] == ["output"]
        outputs = session.run(frames)
    finally:
        session.close()
    np.testing.assert_allclose(outputs[0], expected[0], atol=1e-5)
    with pytest.raises(ModelError, match="nope"):
        RemoteV2Session(url, "nope")


def test_segmentation_and_pose_models_run_remotely_as_they_do_locally(tmp_path):
    """Our server's V2 endpoints serve a two-output segmentation model and a pose model;
    our remote backend gets the same masks and keypoints as the local one."""
    from tests.support.onnx_models import POSE_ROWS, SEG_PROTOS, SEG_ROWS, model_directory
    from tests.support.server import ServerProcess

    model_directory(tmp_path, "seg", [("output0", SEG_ROWS.T.copy()), ("output1", SEG_PROTOS)],
                    decoder="yolov8-seg")  # fmt: skip
    model_directory(tmp_path, "pose", [("output0", POSE_ROWS.T.copy())], decoder="yolov8-pose",
                    class_names=["animal"], keypoint_names=["nose", "tail"])  # fmt: skip
    (tmp_path / MODEL).symlink_to(MODEL_FILE.parent)  # the server's default model
    image = np.zeros((64, 96, 3), np.uint8)
    server = ServerProcess(models_dir=str(tmp_path))
    local = ModelRegistry(Settings(models_dir=tmp_path))
    remote = ModelRegistry(Settings(models_dir=tmp_path, inference_backend="remote",
                                    remote_inference_url=server.url))  # fmt: skip
    try:
        server.wait_ready()
        for name in ("seg", "pose"):
            mine = local.get(name).detect(image, DecodeOptions())
            model = remote.get(name)
            assert model.session.backend == "remote"
            theirs = model.detect(image, DecodeOptions())
            np.testing.assert_allclose(theirs.xyxy, mine.xyxy, atol=1e-3)
            if name == "seg":
                assert theirs.mask is not None and (theirs.mask == mine.mask).all()
            else:
                np.testing.assert_allclose(theirs.data["keypoints_xy"],
                                           mine.data["keypoints_xy"], atol=1e-3)  # fmt: skip
    finally:
        local.close()
        remote.close()
        server.stop()
