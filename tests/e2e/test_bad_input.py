"""Every bad request gets its status and a precise message while another session streams on."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json

import httpx
import numpy as np
import pytest

from streaming.protocol.workflows import people_counting, zone_occupancy
from tests.conftest import DETECT_SPEC, load_photo
from tests.support.peer import LoopbackPeer, data_channel_offer

pytestmark = pytest.mark.e2e


def _spec(**changes) -> dict:
    spec = copy.deepcopy(DETECT_SPEC)
    for path, value in changes.items():
        step, field = path.split("__")
        next(s for s in spec["steps"] if s["name"] == step)[field] = value
    return spec


def _monitoring(spec: dict, step: str, **fields) -> dict:
    """A built-in monitoring workflow with ``step``'s fields changed."""
    next(s for s in spec["steps"] if s["name"] == step).update(fields)
    return spec


def _with_step(spec: dict, step: dict) -> dict:
    spec["steps"].append(step)
    return spec


def _body(sdp: str, spec: dict | None = None, **fields) -> dict:
    body = {
        "workflow_configuration": {
            "type": "WorkflowConfiguration",
            "workflow_specification": spec or DETECT_SPEC,
        },
        "webrtc_offer": {"type": "offer", "sdp": sdp},
        "stream_output": ["annotated"],
        "data_output": ["predictions"],
    }
    body.update(fields)
    return body


async def _stream(peer: LoopbackPeer, image: np.ndarray, stop: asyncio.Event) -> None:
    """Feed the live session at ~15 fps until told to stop."""
    assert peer.track is not None
    while not stop.is_set():
        peer.track.send(image)
        with contextlib.suppress(TimeoutError):  # pacing the input, not waiting on it
            await asyncio.wait_for(stop.wait(), 1 / 15)


async def test_bad_requests_fail_precisely_and_a_live_session_keeps_streaming(server, photos):
    live = LoopbackPeer(server.url)
    response = await live.connect(spec=DETECT_SPEC, webrtc_realtime_processing=True)
    assert response.status_code == 200, response.text
    await asyncio.wait_for(live.connected.wait(), 10)
    stop = asyncio.Event()
    feeder = asyncio.create_task(_stream(live, load_photo(photos, "person.jpg"), stop))
    try:
        await live.wait_for(lambda: len(live.results) >= 3)
        sdp = await data_channel_offer()
        url = server.url + "/initialise_webrtc_worker"
        cases = [
            ("malformed JSON", {"content": b"{not json"}, 422, "invalid request: body"),
            ("missing offer", {"json": {"workflow_configuration": {}}}, 422, "webrtc_offer"),
            ("not SDP", {"json": _body("hello, I am not SDP")}, 400, "webrtc_offer.sdp"),
            (
                "empty SDP",
                {"json": _body("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n")},
                400,
                "webrtc_offer.sdp",
            ),
            (
                "wrong offer type",
                {"json": {**_body(sdp), "webrtc_offer": {"type": "answer", "sdp": sdp}}},
                400,
                "'offer'",
            ),
            ("too large", {"content": b"{" + b" " * (2 * 1024 * 1024) + b"}"}, 413, "exceeds"),
            (
                "unknown block type",
                {"json": _body(sdp, _spec(box__type="roboflow_core/teleport@v1"))},
                400,
                "roboflow_core/teleport@v1",
            ),
            (
                "unknown model",
                {"json": _body(sdp, _spec(det__model_id="yolov99-9000"))},
                400,
                "yolov99-9000",
            ),
            (
                "dangling selector",
                {"json": _body(sdp, _spec(box__predictions="$steps.nowhere.predictions"))},
                400,
                "nowhere",
            ),
            (
                "unknown step output",
                {"json": _body(sdp, _spec(box__predictions="$steps.det.boxes"))},
                400,
                "boxes",
            ),
            (
                "unknown stream_output",
                {"json": _body(sdp, stream_output=["overlay"])},
                400,
                "overlay",
            ),
            ("unknown data_output", {"json": _body(sdp, data_output=["scores"])}, 400, "scores"),
            (
                "a line of one point",
                {
                    "json": _body(
                        sdp,
                        _monitoring(people_counting(), "counter", line_segment=[[10, 10]]),
                        data_output=[],
                    )
                },
                400,
                "step 'counter': line_segment",
            ),
            (
                "a zone of two points",
                {
                    "json": _body(
                        sdp,
                        _monitoring(zone_occupancy(), "timer", zone=[[0, 0], [50, 50]]),
                        data_output=[],
                    )
                },
                400,
                "step 'timer': zone",
            ),
            (
                "an unknown anchor",
                {
                    "json": _body(
                        sdp,
                        _monitoring(people_counting(), "counter", triggering_anchor="MIDDLE"),
                        data_output=[],
                    )
                },
                400,
                "step 'counter': triggering_anchor",
            ),
            (
                "an event file outside the sink directory",
                {
                    "json": _body(
                        sdp,
                        _with_step(
                            people_counting(),
                            {
                                "type": "visionstream/event_sink@v1",
                                "name": "log",
                                "file": "../../etc/cron.d/x",
                            },
                        ),
                        data_output=[],
                    )
                },
                400,
                "step 'log': file must be a name",
            ),
            (  # found by schemathesis: once an assertion, a 500
                "empty pipeline_id and no workflow",
                {"json": {**_body(sdp), "workflow_configuration": None, "pipeline_id": ""}},
                422,
                "workflow_configuration is required",
            ),
        ]
        # Every answer has one shape; its code is stable for programs to branch on.
        codes = {422: "invalid_body", 413: "request_too_large"}
        offer_cases = {"not SDP", "empty SDP", "wrong offer type"}
        output_cases = {"unknown stream_output", "unknown data_output"}
        async with httpx.AsyncClient(timeout=30) as http:
            for name, request, status, needle in cases:
                reply = await http.post(url, **request)
                assert reply.status_code == status, (name, reply.text)
                body = reply.json()
                assert needle in body["message"], (name, body)
                code = codes.get(status) or (
                    "invalid_offer" if name in offer_cases
                    else "invalid_request" if name in output_cases
                    else "invalid_workflow"
                )  # fmt: skip
                assert body["code"] == code and body["error_type"], (name, body)

        # The live session is untouched: still one session, and results keep flowing.
        assert server.sessions() == 1
        seen = len(live.results)
        await live.wait_for(lambda: len(live.results) >= seen + 5)

        # Hostile control messages: each yields an errors entry; streaming goes on.
        hostile = [
            b"\xff\xfe\x00garbage",
            "not json at all",
            "[1, 2, 3]",
            json.dumps({"ack": "many"}),
            json.dumps({"ack": -4}),
            json.dumps({"stream_output": ["overlay"]}),
            json.dumps({"ack": 1, "pad": "x" * 70_000}),
        ]
        for message in hostile:
            live.send_control(message)
        seen = len(live.results)

        def reported() -> list[str]:
            return [e for r in live.results[seen:] for e in r["errors"]]

        await live.wait_for(lambda: len(reported()) >= len(hostile))
        errors = reported()
        assert any("not JSON" in e for e in errors), errors
        assert any("must be a JSON object" in e for e in errors), errors
        assert sum("ack" in e for e in errors) >= 2, errors
        assert any("overlay" in e for e in errors), errors
        assert any("exceeds" in e for e in errors), errors
        seen = len(live.results)
        await live.wait_for(lambda: len(live.results) >= seen + 5)
    finally:
        stop.set()
        await feeder
        closed = server.closed_sessions
        await live.close()
    await asyncio.to_thread(server.wait_sessions_closed, closed + 1, 5)
    assert server.sessions() == 0
