"""With an API key set, every route but health and the page's files requires it; wrong keys
are throttled per address; one address cannot take every session; slow and idle HTTP
clients cannot hold connections."""

from __future__ import annotations

import re
import socket
import time

import httpx
import pytest

from streaming import Client, ManualSource, StreamConfig
from tests.conftest import DETECT_SPEC
from tests.support.peer import loopback_peer
from tests.support.server import ServerProcess, running_server

pytestmark = pytest.mark.e2e

KEY = "s3cret-key"
PUBLIC = {
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/v2/health/live"),
    ("GET", "/v2/health/ready"),
    ("GET", "/info"),  # name and version only; inference-sdk sends no key for it
}


def served_routes(server: ServerProcess) -> list[tuple[str, str]]:
    """Every (method, path) of the served OpenAPI document, path parameters filled in."""
    schema = httpx.get(
        f"{server.url}/openapi.json", headers={"Authorization": f"Bearer {KEY}"}, timeout=10
    ).json()
    routes = []
    for path, operations in schema["paths"].items():
        for method in operations:
            routes.append((method.upper(), re.sub(r"\{[^}]+\}", "x", path)))
    return routes


def test_every_route_but_health_and_the_page_requires_the_key(guarded_server):
    routes = served_routes(guarded_server)
    assert len(routes) > 15  # the walk really saw the route table
    outside_schema = [("GET", "/openapi.json"), ("GET", "/docs")]
    open_routes = []
    for method, path in routes + outside_schema:
        response = httpx.request(method, guarded_server.url + path, json={}, timeout=30)
        if (method, path) in PUBLIC:
            assert response.status_code in (200, 503), (method, path, response.text)
        elif response.status_code != 401 or "API key" not in response.json()["message"]:
            open_routes.append((method, path, response.status_code))
    assert open_routes == []
    for page_file in ("/", "/app.js", "/docs/assets/swagger-ui-bundle.js"):
        assert httpx.get(guarded_server.url + page_file, timeout=10).status_code == 200


def test_docs_work_without_the_internet(guarded_server):
    headers = {"Authorization": f"Bearer {KEY}"}
    page = httpx.get(f"{guarded_server.url}/docs", headers=headers, timeout=10)
    assert page.status_code == 200
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert assets and all(a.startswith("/docs/assets/") for a in assets), assets
    for asset in assets:
        assert httpx.get(guarded_server.url + asset, timeout=10).status_code == 200


@pytest.fixture(scope="module")
def strict_server():
    with running_server(
        api_key=KEY,
        auth_failures_per_minute="3",
        max_sessions_per_address="1",
        connect_timeout_s="3",
        http_header_timeout_s="1",
        http_body_timeout_s="1",
        metrics_require_api_key="false",
    ) as process:
        yield process


def test_wrong_keys_are_throttled_per_address(strict_server):
    url = f"{strict_server.url}/models"
    transport = httpx.HTTPTransport(local_address="127.0.0.3")
    with httpx.Client(transport=transport, timeout=10) as other:
        for _ in range(3):
            wrong = other.get(url, headers={"Authorization": "Bearer guess"})
            assert wrong.status_code == 401
        throttled = other.get(url, headers={"Authorization": f"Bearer {KEY}"})  # even the right one
    assert throttled.status_code == 429, throttled.text
    assert 1 <= int(throttled.headers["Retry-After"]) <= 60
    assert "too many wrong API keys" in throttled.json()["message"]
    # Another address is unaffected.
    assert httpx.get(url, headers={"Authorization": f"Bearer {KEY}"}, timeout=10).is_success
    # /metrics follows its setting: open here.
    assert httpx.get(f"{strict_server.url}/metrics", timeout=10).status_code == 200


async def test_one_address_cannot_take_every_session(strict_server):
    config = StreamConfig(stream_output=["annotated"], data_output=["predictions"])
    held = Client(strict_server.url, KEY).webrtc.stream(
        ManualSource(), workflow=DETECT_SPEC, config=config
    )
    held.start()
    try:
        pc = loopback_peer()
        pc.addTransceiver("video", direction="recvonly")
        await pc.setLocalDescription(await pc.createOffer())
        body = {
            "api_key": KEY,
            "webrtc_offer": {"type": "offer", "sdp": pc.localDescription.sdp},
            "workflow_configuration": {
                "type": "WorkflowConfiguration",
                "workflow_specification": DETECT_SPEC,
            },
        }
        url = f"{strict_server.url}/initialise_webrtc_worker"
        refused = httpx.post(url, json=body, timeout=30)
        assert refused.status_code == 429, refused.text
        assert "VISIONSTREAM_MAX_SESSIONS_PER_ADDRESS" in refused.json()["message"]
        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(transport=transport, timeout=30) as other:
            assert other.post(url, json=body).status_code == 200  # another address may
        await pc.close()  # the server closes it after its connect timeout
    finally:
        held.close()


def _connect(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.settimeout(30)  # far above the server's 1 s: a hang fails, not a slow machine
    return sock


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # connects, says nothing
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ",  # a request head that never ends
    ],
)
def test_idle_and_slow_headers_are_cut_off(strict_server, sent):
    with _connect(strict_server) as sock:
        sock.sendall(sent)
        started = time.monotonic()
        assert sock.recv(100) == b""  # closed by the server
    assert time.monotonic() - started < 25
    assert strict_server.get("/healthz").status_code == 200


def test_a_stalled_body_is_answered_408(strict_server):
    with _connect(strict_server) as sock:
        sock.sendall(
            b"POST /initialise_webrtc_worker HTTP/1.1\r\nHost: x\r\nContent-Type: "
            b'application/json\r\nContent-Length: 5000\r\n\r\n{"webrtc_offer":'
        )
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"stalled" in answer


def test_the_sdk_authenticates_its_http_calls_and_the_key_is_never_logged(guarded_server):
    from inference_sdk import InferenceConfiguration, InferenceHTTPClient

    start = len(guarded_server.lines)
    legacy = InferenceHTTPClient(api_url=guarded_server.url, api_key=KEY)
    # Its default ("legacy") transport: the key in the JSON body, and in the query of GETs.
    assert "yolov3-tiny-416" in {m.model_id for m in legacy.load_model("yolov3-tiny-416").models}
    assert legacy.list_loaded_models().models
    header = InferenceHTTPClient(api_url=guarded_server.url, api_key=KEY).configure(
        InferenceConfiguration(api_key_transport="header")
    )
    assert header.list_loaded_models().models
    logged = guarded_server.wait_for_output("GET /model/registry?api_key=", start)
    assert KEY not in "\n".join(guarded_server.lines[start:]), guarded_server.lines[logged]
    with pytest.raises(Exception, match="401"):
        InferenceHTTPClient(api_url=guarded_server.url, api_key="wrong").list_loaded_models()
