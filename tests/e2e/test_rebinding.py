"""A name checked is the name connected to: a DNS answer that changes between the egress
check and the connection (rebinding) never reaches the refused address. A real DNS server
on 127.0.0.1:53 answers ``*.rebind.test`` with the allowed 127.0.0.1 first and the refused
127.0.0.2 after; the server resolves through it alone (its own mount namespace). An
"internal" HTTP server on 127.0.0.2 records anything that reaches it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import cv2
import numpy as np
import pytest

from tests.conftest import DETECT_SPEC
from tests.support.dns import RebindingDns, can_serve_dns, resolving_through
from tests.support.mjpeg import MJPEGCamera
from tests.support.server import free_port, running_server

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not can_serve_dns(),
        reason="needs root inside tests/run.sh's loopback-only namespace (port 53, a mount)",
    ),
]

ALLOWED, REFUSED = "127.0.0.1", "127.0.0.2"
_JPEG = cv2.imencode(".jpg", np.full((64, 64, 3), 128, np.uint8))[1].tobytes()


class Endpoint:
    """An HTTP server on ``address``: answers GET with a JPEG and POST with 204, and keeps
    every request's path."""

    def __init__(self, address: str, port: int) -> None:
        self.requests: list[str] = []
        self.arrived = threading.Condition()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def _keep(self) -> None:
                with endpoint.arrived:
                    endpoint.requests.append(f"{self.command} {self.path}")
                    endpoint.arrived.notify_all()

            def do_GET(self) -> None:
                self._keep()
                self.send_response(200)
                self.send_header("Content-Type", "image/jpeg")
                self.send_header("Content-Length", str(len(_JPEG)))
                self.end_headers()
                self.wfile.write(_JPEG)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self._keep()
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.http = ThreadingHTTPServer((address, port), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture(scope="module")
def rebinding(tmp_path_factory):
    port = free_port()
    dns = RebindingDns(
        {
            "image.rebind.test": [ALLOWED, REFUSED],
            "hook.rebind.test": [ALLOWED, REFUSED],
            "camera.rebind.test": [ALLOWED],
            "moved.rebind.test": [ALLOWED, REFUSED],
        }
    )
    public, internal = Endpoint(ALLOWED, port), Endpoint(REFUSED, port)
    prefix = resolving_through(tmp_path_factory.mktemp("dns"))
    try:
        with running_server(prefix=prefix, allowed_networks=f"{ALLOWED}/32") as server:
            yield server, port, public, internal, dns
    finally:
        public.stop()
        internal.stop()
        dns.stop()


def test_an_image_url_is_fetched_from_the_address_that_was_checked(rebinding):
    server, port, public, internal, dns = rebinding
    image = {"type": "url", "value": f"http://image.rebind.test:{port}/frame.jpg"}
    answer = server.post(
        "/infer/object_detection", json={"model_id": "yolov3-tiny-416", "image": image}
    )
    assert answer.status_code == 200, answer.text
    assert public.requests == ["GET /frame.jpg"]
    assert dns.asked["image.rebind.test."] == 1  # resolved once: checked and connected
    assert not internal.requests


def test_a_webhook_connects_to_a_checked_address_or_not_at_all(rebinding):
    """A pipeline's webhook step (its sink open while the pipeline runs, so every delivery
    is attempted): checked when compiled, at 127.0.0.1; each delivery resolves once more as
    it connects, now to 127.0.0.2, and is refused there, never connected."""
    server, port, public, internal, dns = rebinding
    hook = {
        "type": "roboflow_core/webhook_sink@v1",
        "name": "hook",
        "cooldown_seconds": 0,
        "url": f"http://hook.rebind.test:{port}/hook",
        "json_payload": {"n": 1},
    }
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [hook],
        "outputs": [{"type": "JsonField", "name": "hook", "selector": "$steps.hook.*"}],
    }
    camera = MJPEGCamera(address=ALLOWED)
    try:
        start = len(server.lines)
        started = server.start_pipeline(camera.url, spec)
        assert started.status_code == 200, started.text  # checked when compiled: 127.0.0.1
        failed = server.lines[server.wait_for_output("attempt 1 of", start, timeout=60)]
        assert "127.0.0.2 is not in VISIONSTREAM_ALLOWED_NETWORKS" in failed, failed
        assert dns.asked["hook.rebind.test."] >= 2  # checked when compiled, again to connect
        assert not internal.requests and not any("hook" in r for r in public.requests)
        _terminate(server, started.json()["context"]["pipeline_id"])
    finally:
        camera.close()


def _terminate(server, pipeline_id: str) -> None:
    assert server.post(f"/inference_pipelines/{pipeline_id}/terminate", json={}).status_code == 200


def test_a_camera_is_read_from_its_checked_address_under_its_own_name(rebinding):
    server, *_ = rebinding
    camera = MJPEGCamera(address=ALLOWED)
    try:
        named = f"http://camera.rebind.test:{camera.port}/video.mjpg"
        started = server.start_pipeline(named, DETECT_SPEC)
        assert started.status_code == 200, started.text
        with camera.asked:  # FFmpeg at the address, saying the name (virtual hosts work)
            assert camera.asked.wait_for(lambda: camera.hosts, 60)
        assert set(camera.hosts) == {f"camera.rebind.test:{camera.port}"}
        _terminate(server, started.json()["context"]["pipeline_id"])
    finally:
        camera.close()


def test_a_camera_whose_name_moves_is_never_reached_there(rebinding):
    server, *_ = rebinding
    internal = MJPEGCamera(address=REFUSED)
    try:
        named = f"http://moved.rebind.test:{internal.port}/video.mjpg"
        start = len(server.lines)
        started = server.start_pipeline(named, DETECT_SPEC)
        assert started.status_code == 200, started.text  # checked: 127.0.0.1 then
        refused = server.lines[server.wait_for_output("127.0.0.2 is not in", start, timeout=60)]
        assert f"cannot connect to {named}" in refused, refused
        assert not internal.hosts
        _terminate(server, started.json()["context"]["pipeline_id"])
    finally:
        internal.close()
