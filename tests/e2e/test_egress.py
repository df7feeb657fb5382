"""A server with the default egress policy refuses, with a 400 naming the setting, every URL
kind that would make it connect to itself or to link-local addresses. Nothing is opened."""

from __future__ import annotations

import base64
import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import cv2
import numpy as np
import pytest

from tests.conftest import DETECT_SPEC
from tests.support.peer import loopback_peer
from tests.support.server import running_server
from tests.support.webrtcbin import WebrtcbinPeer

pytestmark = pytest.mark.e2e

WORKFLOW = {"type": "WorkflowConfiguration", "workflow_specification": DETECT_SPEC}


HOOK = "http://127.0.0.1:9/x"  # never reached: every request below is refused before it


@pytest.fixture(scope="module")
def default_server(tmp_path_factory):
    """The default egress policy; stored workflows whose webhook URL is a parameter
    (``hook``) or a parameter's stored default (``hook-default``: this server itself)."""
    stored = tmp_path_factory.mktemp("workflows")
    (stored / "hook.json").write_text(json.dumps(_with_webhook(None)))
    (stored / "hook-default.json").write_text(json.dumps(_with_webhook(HOOK)))
    with running_server(allowed_networks="0.0.0.0/0,::/0", workflows_dir=str(stored)) as process:
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
        ({"rtsp_url": "rtsp://user:pw@127.0.0.1:8554/cam"}, "rtsp_url rtsp://***@127.0.0.1"),
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
    assert needle in message and "VISIONSTREAM_ALLOWED_NETWORKS" in message, message
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
        (
            "rtsp://192.0.2.1/cam",
            {"describe": {"provider": "local", "webhook_url": "http://169.254.169.254/told"}},
            "describe.webhook_url http://169.254.169.254/told",
        ),
    ],
)
def test_pipelines_may_not_point_the_server_at_itself(default_server, reference, extra, needle):
    response = default_server.start_pipeline(reference, DETECT_SPEC, **extra)
    assert response.status_code == 400, response.text
    message = response.json()["message"]
    assert needle in message and "VISIONSTREAM_ALLOWED_NETWORKS" in message, message
    listed = default_server.get("/inference_pipelines/list").json()
    assert listed["pipelines"] == []


def _with_webhook(url: str | None) -> dict:
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


def _named(workflow_id: str, parameters: dict | None = None) -> dict:
    return {"type": "WorkflowConfiguration", "workspace_name": "local",
            "workflow_id": workflow_id, "workflows_parameters": parameters}  # fmt: skip


def _refused_for_the_hook(response) -> None:
    assert response.status_code == 400, response.text
    message = response.json()["message"]
    assert f"step 'event' url {HOOK}" in message and "VISIONSTREAM_ALLOWED_NETWORKS" in message


def test_a_published_streams_workflow_parameters_pass_the_egress_policy(default_server):
    """The attacker's WHIP publisher set a stored workflow's webhook to this server through
    the query, and was answered 201; now it is refused like every other way in."""
    url = f"{default_server.url}/whip/workflows/local/hook?hook={HOOK}"
    publisher = WebrtcbinPeer("publish", url, "vp8")
    try:
        status, body = publisher.refusal()
    finally:
        publisher.stop()
    assert status == 400, body
    assert f"step 'event' url {HOOK}" in body and "loopback" in body
    assert default_server.get("/healthz").json()["publishers"] == 0


async def test_stored_workflows_pass_the_egress_policy_every_way_they_are_run(default_server):
    """A parameter from the request, or a stored default: sessions and HTTP runs (pipelines
    and WHIP above) are refused the same way."""
    hooked = {"hook": HOOK}
    sdp = await offer_sdp()
    for configuration in (_named("hook", hooked), _named("hook-default")):
        session = default_server.post("/initialise_webrtc_worker", json={
            "webrtc_offer": {"type": "offer", "sdp": sdp},
            "workflow_configuration": configuration,
        })  # fmt: skip
        _refused_for_the_hook(session)
    _, jpeg = cv2.imencode(".jpg", np.zeros((32, 32, 3), np.uint8))
    image = {"type": "base64", "value": base64.b64encode(jpeg.tobytes()).decode()}
    for workflow, parameters in (("hook", hooked), ("hook-default", {})):
        run = default_server.post(
            f"/local/workflows/{workflow}", json={"inputs": {"image": image, **parameters}}
        )
        _refused_for_the_hook(run)


def _only_candidate(sdp: str, address: str) -> str:
    kept = [line for line in sdp.splitlines() if not line.startswith("a=candidate:")]
    at = next(i for i, line in enumerate(kept) if line.startswith("m=")) + 1
    kept.insert(at, f"a=candidate:1 1 udp 2130706431 {address} 9 typ host")
    return "\r\n".join(kept) + "\r\n"


@pytest.mark.parametrize("address", ["169.254.169.254", "224.0.0.251", "0.0.0.0"])
async def test_an_offers_candidates_pass_the_peers_policy(default_server, address):
    """The caller (127.0.0.1) may offer its own loopback address, never link-local,
    multicast or unspecified ones: those are refused before aiortc sees the offer, by the
    peers' policy (VISIONSTREAM_PEER_NETWORKS), not the cameras'."""
    body = {
        "webrtc_offer": {"type": "offer", "sdp": _only_candidate(await offer_sdp(), address)},
        "workflow_configuration": WORKFLOW,
    }
    response = default_server.post("/initialise_webrtc_worker", json=body)
    assert response.status_code == 400, response.text
    message = response.json()["message"]
    assert f"every ICE candidate of webrtc_offer.sdp is refused: {address} is" in message
    assert "VISIONSTREAM_PEER_NETWORKS" in message


class _Redirector:
    """An HTTP server at ``host`` answering every GET with a 302 to ``target``; it counts
    the requests it got (the refused side of a redirect must get none)."""

    def __init__(self, host: str, target: str | None = None) -> None:
        self.paths: list[str] = []
        redirector = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                redirector.paths.append(self.path)
                if target is None:
                    self.send_response(404)
                else:
                    self.send_response(302)
                    self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.http = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.mark.parametrize("path", ["/cam", "/live.m3u8"], ids=["probed", "hls"])
async def test_a_cameras_redirect_is_never_followed(path):
    """The camera's address is allowed (127.0.0.2), and it redirects to one that is not
    (127.0.0.1): the session is refused saying so, and the target never hears a request
    (neither from our probe of the camera nor from FFmpeg)."""
    target = _Redirector("127.0.0.1")
    camera = _Redirector("127.0.0.2", f"{target.url}/latest?token=s3cr3t")
    try:
        with running_server(allowed_networks="127.0.0.2/32", camera_first_frame_s="8") as server:
            body = {
                "webrtc_offer": {"type": "offer", "sdp": await offer_sdp()},
                "workflow_configuration": WORKFLOW,
                "mjpeg_url": camera.url + path,
            }
            response = server.post("/initialise_webrtc_worker", json=body)
    finally:
        camera.close()
        target.close()
    assert response.status_code == 502, response.text
    message = response.json()["message"]
    assert f"it redirects (302) to {target.url}/latest?token=***" in message, message
    assert "redirects are not followed for cameras" in message
    assert camera.paths and target.paths == []
