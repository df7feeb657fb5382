"""A workflow is untrusted input (issue 53): every attack of the last round, sent to the real
server while a second client polls ``/healthz`` and a live WebRTC session streams, is refused
precisely (or runs in bounded time), and neither the poll nor the session notices.

The server lists only a camera network (127.0.0.9/32) in ``VISIONSTREAM_ALLOWED_NETWORKS``: the
session's peer is checked as a peer, not as a camera. Its mail relay is a real SMTP server on
loopback (aiosmtpd), its file sink directory has a 1 MB quota, and it lends one secret."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
import time

import cv2
import httpx
import numpy as np
import pytest

from sources import SyntheticSource
from streaming import Client, StreamConfig
from streaming.client import FrameSourceStream
from streaming.rtc.ice import restrict_host_addresses
from tests.conftest import DETECT_SPEC
from tests.support.peer import LoopbackPeer
from tests.support.server import running_server
from tests.support.smtp import PASSWORD, USER, MailServer
from tests.support.workflows import nested_fan_out

pytestmark = pytest.mark.e2e

SECRET = "tok-SECRET-123"
POLL_EVERY_S = 0.02


def _image(side: int) -> dict:
    jpeg = cv2.imencode(".jpg", np.full((side, side, 3), 90, np.uint8))[1].tobytes()
    return {"type": "base64", "value": base64.b64encode(jpeg).decode()}


def _spec(*steps: dict, output: str, inputs: tuple[str, ...] = ()) -> dict:
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            *({"type": "WorkflowParameter", "name": n} for n in inputs),
        ],
        "steps": list(steps),
        "outputs": [{"type": "JsonField", "name": "out", "selector": output}],
    }


def _text(name: str = "text") -> dict:
    return {
        "type": "roboflow_core/property_definition@v1",
        "name": name,
        "data": "$inputs.text",
        "operations": [],
    }


def _relay(**fields) -> dict:
    return {
        "type": "roboflow_core/email_notification@v2",
        "name": "mail",
        "subject": "attack",
        "message": "m",
        "receiver_email": "guard@example.test",
        "cooldown_seconds": 0,
        **fields,
    }


REGEX = _spec(
    {
        "type": "roboflow_core/property_definition@v1",
        "name": "match",
        "data": "$inputs.text",
        "operations": [{"type": "StringMatches", "regex": "(a+)+$"}],
    },
    output="$steps.match.output",
    inputs=("text",),
)
RESIZE = _spec(
    {
        "type": "roboflow_core/image_preprocessing@v1",
        "name": "big",
        "image": "$inputs.image",
        "task_type": "resize",
        "width": 30000,
        "height": 30000,
    },
    output="$steps.big.image",
)
WARP = _spec(
    {
        "type": "roboflow_core/perspective_correction@v1",
        "name": "warp",
        "images": "$inputs.image",
        "warp_image": True,
        "transformed_rect_width": 30000,
        "transformed_rect_height": 30000,
        "perspective_polygons": [[[0, 0], [10, 0], [10, 10], [0, 10]]],
    },
    output="$steps.warp.warped_image",
)
SLICES = _spec(
    {
        "type": "roboflow_core/image_slicer@v1",
        "name": "tiles",
        "image": "$inputs.image",
        "slice_width": 1,
        "slice_height": 1,
        "overlap_ratio_width": 0,
        "overlap_ratio_height": 0,
    },
    output="$steps.tiles.slices",
)
MANY = _spec(
    _relay(bcc_receiver_email=[f"u{i}@example.test" for i in range(5000)]), output="$steps.mail.*"
)
OUTSIDE = _spec(_relay(receiver_email="me@attacker.test"), output="$steps.mail.*")
FLOOD = _spec(_relay(subject="flood"), output="$steps.mail.*")
FILES = _spec(
    _text(),
    {
        "type": "roboflow_core/local_file_sink@v1",
        "name": "save",
        "content": "$steps.text.output",
        "output_mode": "separate_files",
        "file_type": "txt",
        "target_directory": "attack",
    },
    output="$steps.save.*",
    inputs=("text",),
)
NUL = _spec(
    _text(),
    {
        "type": "roboflow_core/local_file_sink@v1",
        "name": "save",
        "content": "$steps.text.output",
        "output_mode": "append_log",
        "target_directory": "a\x00b",
    },
    output="$steps.save.*",
    inputs=("text",),
)
LEAK = _spec(
    {
        "type": "roboflow_core/environment_secrets_store@v1",
        "name": "vault",
        "variables_storing_secrets": ["CAMERA_TOKEN"],
    },
    output="$steps.vault.camera_token",
)


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    mail = MailServer(tmp_path_factory.mktemp("relay"), "none")
    files = tmp_path_factory.mktemp("files")
    settings = {
        "allowed_networks": "127.0.0.9/32",  # the cameras' address alone
        "smtp_host": "127.0.0.1",
        "smtp_port": str(mail.port),
        "smtp_tls": "none",
        "smtp_username": USER,
        "smtp_password": PASSWORD,
        "smtp_sender": "cam@example.test",
        "smtp_allowed_recipients": "@example.test",
        "file_sink_dir": str(files),
        "limit_file_sink_mb": "1",
        "limit_file_sink_min_free_mb": "0",
        "workflow_secrets": "CAMERA_TOKEN",
    }
    try:
        with running_server(environment={"CAMERA_TOKEN": SECRET}, **settings) as server:
            yield server, mail, files
    finally:
        mail.stop()


class HealthPoller:
    """GETs ``/healthz`` every 20 ms from a thread of its own, keeping each answer's time."""

    def __init__(self, url: str) -> None:
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, args=(url,), daemon=True)
        self._thread.start()

    def _poll(self, url: str) -> None:
        with httpx.Client(timeout=30) as http:
            while not self._stop.wait(POLL_EVERY_S):
                started = time.perf_counter()
                try:
                    status = http.get(f"{url}/healthz").status_code
                except httpx.HTTPError as exc:
                    status = repr(exc)
                self.latencies.append(time.perf_counter() - started)
                if status != 200:
                    self.failures.append(str(status))

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join(35)
        return sorted(self.latencies)


def _run(server, spec: dict, images: list[dict], **parameters) -> httpx.Response:
    return httpx.post(
        f"{server.url}/workflows/run",
        timeout=120,
        json={
            "specification": spec,
            "inputs": {"image": images, **parameters},
        },
    )


def _attack(server, mail: MailServer, files) -> None:
    """Each attack once, with what it must answer."""
    matched = _run(server, REGEX, [_image(64)], text="a" * 100_000 + "b")
    assert matched.status_code == 200 and matched.json()["outputs"][0]["out"] is False
    nested = _run(server, nested_fan_out(fan_out=100, depth=4), [_image(64)])
    assert nested.status_code == 400 and "VISIONSTREAM_LIMIT_WORKFLOW_BYTES" in nested.text
    for spec in (RESIZE, WARP):
        refused = _run(server, spec, [_image(64)])
        assert refused.status_code == 400 and "VISIONSTREAM_LIMIT_IMAGE_PIXELS" in refused.text
    sliced = _run(server, SLICES, [_image(200)])
    assert sliced.status_code == 400 and "40000 slices" in sliced.text, sliced.text
    assert sliced.json()["code"] == "limit_exceeded"
    for spec, words in ((MANY, "5001 recipients are over"), (OUTSIDE, "does not send to")):
        (out,) = _run(server, spec, [_image(64)]).json()["outputs"]
        assert out["out"]["error_status"] and words in out["out"]["message"]
    flood = [o["out"] for o in _run(server, FLOOD, [_image(64)] * 10).json()["outputs"]]
    assert sum(not o["throttling_status"] for o in flood) <= 1  # the relay's interval
    saved = _run(server, FILES, [_image(64)] * 16, text="x" * (200 << 10)).json()["outputs"]
    assert any(o["out"]["error_status"] for o in saved)  # past the 1 MB quota
    assert sum(f.stat().st_size for f in files.rglob("*") if f.is_file()) <= 1 << 20
    nul = _run(server, NUL, [_image(64)], text="x")
    assert nul.status_code == 400 and "control character" in nul.json()["message"]
    leak = _run(server, LEAK, [_image(64)])
    assert leak.status_code == 400 and SECRET not in leak.text


def test_every_attack_is_refused_while_health_and_a_live_session_go_on(attacked):
    server, mail, files = attacked
    arrivals: list[float] = []
    config = StreamConfig(data_output=["predictions"])
    source = Client(server.url).webrtc.stream(_stream(), workflow=DETECT_SPEC, config=config)
    source.on_data("predictions")(lambda _data, _metadata: arrivals.append(time.monotonic()))
    with source:
        source.start()
        _wait(lambda: len(arrivals) >= 20, 60, "the session's first results")
        quiet_from = time.monotonic()
        _wait(lambda: arrivals[-1] - quiet_from >= 4, 30, "4 s of results before the attacks")
        quiet = _rate(arrivals, quiet_from, time.monotonic())
        poller = HealthPoller(server.url)
        attack_from = time.monotonic()
        rounds = 0
        try:
            while rounds < 2 or time.monotonic() - attack_from < 8:  # each, for 8 s at least
                _attack(server, mail, files)
                rounds += 1
        finally:
            attack_to = time.monotonic()
            latencies = poller.stop()
    assert not poller.failures, poller.failures[:3]
    during = _rate(arrivals, attack_from, attack_to)
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print(
        f"{rounds} rounds of attacks in {attack_to - attack_from:.1f} s; /healthz p99 "
        f"{p99 * 1000:.0f} ms (worst {latencies[-1] * 1000:.0f} ms, {len(latencies)} polls); "
        f"session {quiet:.1f} results/s before, {during:.1f} during"
    )
    assert p99 < 0.25, f"/healthz p99 {p99 * 1000:.0f} ms under attack"
    assert during >= 0.8 * quiet, f"the session fell from {quiet:.1f} to {during:.1f} results/s"
    assert len(mail.with_subject("flood")) <= rounds  # at most one a round gets through


def _stream() -> FrameSourceStream:
    return FrameSourceStream(lambda: SyntheticSource(320, 240, fps=10))


def _rate(arrivals: list[float], start: float, end: float) -> float:
    return sum(start <= t < end for t in arrivals) / (end - start)


def _wait(check, timeout: float, what: str) -> None:
    deadline, pause = time.monotonic() + timeout, threading.Event()
    while not check():
        assert time.monotonic() < deadline, f"no {what} in {timeout:g} s"
        pause.wait(0.05)


async def test_a_viewer_elsewhere_is_a_peer_not_a_camera():
    """The operator lists the cameras (127.0.0.1/32) and, apart, where viewers may be
    (127.0.0.0/8, standing in for the internet); a viewer whose HTTP request comes through a
    trusted proxy from elsewhere (X-Forwarded-For) offers its candidates on 127.0.0.2, outside
    the camera list. Its session connects and streams: peers are checked as peers."""
    settings = {
        "allowed_networks": "127.0.0.1/32",
        "peer_networks": "127.0.0.0/8",
        "trusted_proxies": "127.0.0.1/32",
    }
    with running_server(**settings) as server:
        restrict_host_addresses(["127.0.0.2"])  # this process's ICE agents: 127.0.0.2 only
        viewer = LoopbackPeer(server.url)
        try:
            answer = await viewer.connect(
                headers={"X-Forwarded-For": "198.51.100.7"}, spec=DETECT_SPEC
            )
            assert answer.status_code == 200, answer.text
            assert "127.0.0.2" in viewer.pc.localDescription.sdp
            await asyncio.wait_for(viewer.connected.wait(), 30)
            assert viewer.track is not None
            for _ in range(450):  # 30 s at 15 fps: frames until results come back
                viewer.track.send(np.zeros((240, 320, 3), np.uint8))
                with contextlib.suppress(TimeoutError):  # pacing the input: 1/15 s a frame
                    await viewer.wait_for(lambda: bool(viewer.results), 1 / 15)
                if viewer.results:
                    break
            assert viewer.results, "no results in 30 s"
        finally:
            restrict_host_addresses(["127.0.0.1"])  # the suite's own (tests/conftest.py)
            await viewer.close()
