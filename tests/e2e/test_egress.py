"""A server with the default egress policy refuses, with a 400 naming the setting, every URL
kind that would make it connect to itself or to link-local addresses. Nothing is opened."""

from __future__ import annotations

import copy

import pytest

from tests.conftest import DETECT_SPEC
from tests.support.peer import loopback_peer
from tests.support.server import running_server

pytestmark = pytest.mark.e2e

WORKFLOW = {"type": "WorkflowConfiguration", "workflow_specification": DETECT_SPEC}


@pytest.fixture(scope="module")
def default_server():
    with running_server(allowed_networks="0.0.0.0/0,::/0") as process:
        yield process


async def offer_sdp() -> str:
    pc = loopback_peer()
    try:
        pc.addTransceiver("video", direction="recvonly")
        pc.createDataChannel("inference")
        await pc.setLocalDescription(await pc.createOffer())
        return pc.localDescription.sdp
    finally:
        await pc.close()


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"rtsp_url": "rtsp://user:pw@127.0.0.1:8554/cam"}, "rtsp_url rtsp://user:***@127.0.0.1"),
        ({"mjpeg_url": "http://localhost:8080/mjpeg"}, "mjpeg_url http://localhost:8080"),
        ({"rtsp_url": "rtsp://169.254.169.254/latest"}, "link-local"),
        (
            {"webrtc_config": {"iceServers": [{"urls": "turn:127.0.0.1:3478"}]}},
            "ICE server turn:127.0.0.1:3478",
        ),
    ],
)
async def test_sessions_may_not_point_the_server_at_itself(default_server, fields, needle):
    body = {
        "webrtc_offer": {"type": "offer", "sdp": await offer_sdp()},
        "workflow_configuration": WORKFLOW,
        **fields,
    }
    response = default_server.post("/initialise_webrtc_worker", json=body)
    assert response.status_code == 400, response.text
    message = response.json()["message"]
    assert needle in message and "STREAMING_ALLOWED_NETWORKS" in message, message
    assert "pw@" not in message
    assert default_server.sessions() == 0


@pytest.mark.parametrize(
    ("reference", "extra", "needle"),
    [
        ("rtsp://127.0.0.1:8554/cam", {}, "video_reference rtsp://127.0.0.1:8554/cam"),
        (["rtsp://192.0.2.1/a", "http://[::1]/b"], {}, "loopback"),
        (
            "rtsp://192.0.2.1/cam",
            {"sink_configuration": {"webhook": {"url": "http://169.254.169.254/hook"}}},
            "webhook url http://169.254.169.254/hook",
        ),
    ],
)
def test_pipelines_may_not_point_the_server_at_itself(default_server, reference, extra, needle):
    response = default_server.start_pipeline(reference, DETECT_SPEC, **extra)
    assert response.status_code == 400, response.text
    message = response.json()["message"]
    assert needle in message and "STREAMING_ALLOWED_NETWORKS" in message, message
    listed = default_server.get("/inference_pipelines/list").json()
    assert listed["pipelines"] == []


def _with_webhook(url: str) -> dict:
    spec = copy.deepcopy(DETECT_SPEC)
    spec["inputs"].append({"type": "WorkflowParameter", "name": "hook", "default_value": url})
    spec["steps"].append({"type": "roboflow_core/webhook_sink@v1", "name": "event",
                          "url": "$inputs.hook", "json_payload": {"n": 1}})  # fmt: skip
    return spec


async def test_a_workflows_webhook_may_not_point_the_server_at_itself(default_server):
    spec = _with_webhook("http://127.0.0.1:9/hook")
    body = {
        "webrtc_offer": {"type": "offer", "sdp": await offer_sdp()},
        "workflow_configuration": {**WORKFLOW, "workflow_specification": spec},
    }
    response = default_server.post("/initialise_webrtc_worker", json=body)
    assert response.status_code == 400, response.text
    assert "step 'event' url http://127.0.0.1:9/hook" in response.json()["message"]
    # The same through a pipeline, the URL given as a parameter of the request.
    allowed = _with_webhook("http://192.0.2.1/hook")
    pipeline = default_server.start_pipeline(
        "rtsp://192.0.2.1/cam", allowed, processing_configuration={
            "type": "WorkflowConfiguration", "workflow_specification": allowed,
            "workflows_parameters": {"hook": "http://[::1]/hook"},
        },
    )  # fmt: skip
    assert pipeline.status_code == 400 and "loopback" in pipeline.json()["message"]
