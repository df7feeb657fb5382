"""Protocol semantics against the real server, driven by a loopback aiortc peer."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from streaming.config import Settings
from tests.conftest import DETECT_SPEC, load_photo
from tests.support.peer import LoopbackPeer

pytestmark = pytest.mark.e2e


async def _session(server, **fields) -> LoopbackPeer:
    peer = LoopbackPeer(server.url)
    response = await peer.connect(spec=DETECT_SPEC, **fields)
    assert response.status_code == 200, response.text
    await asyncio.wait_for(peer.connected.wait(), 10)
    return peer


async def _closed(server, peer: LoopbackPeer) -> None:
    closed = server.closed_sessions
    await peer.close()
    await asyncio.to_thread(server.wait_sessions_closed, closed + 1, 5)


async def test_every_message_has_all_keys_and_gzip_only_with_data_outputs(server, photos):
    image = load_photo(photos, "dog.jpg")
    with_data = await _session(server, webrtc_realtime_processing=False)
    metadata_only = await _session(server, webrtc_realtime_processing=False, data_output=[])
    try:
        for peer in (with_data, metadata_only):
            for _ in range(3):
                peer.track.send(image)
        await with_data.wait_for(lambda: len(with_data.results) >= 2)
        await metadata_only.wait_for(lambda: len(metadata_only.results) >= 2)
    finally:
        await _closed(server, with_data)
        await _closed(server, metadata_only)
    keys = {
        "serialized_output_data",
        "video_metadata",
        "errors",
        "processing_complete",
        "termination_reason",
        "_gzipped",
    }
    for result in with_data.results + metadata_only.results:
        assert set(result) == keys
        meta = result["video_metadata"]
        assert (meta["width"], meta["height"]) == (640, 480)
        assert meta["time_base"] == pytest.approx(1 / 90000)
        assert {"queue_wait_ms", "inference_ms", "processing_ms", "stage_ms"} <= set(meta)
    assert all(r["_gzipped"] for r in with_data.results)
    assert not any(r["_gzipped"] for r in metadata_only.results)
    assert all(r["serialized_output_data"] is None for r in metadata_only.results)
    first = with_data.results[0]
    assert first["video_metadata"]["frame_id"] == 1
    assert [p["class"] for p in first["serialized_output_data"]["predictions"]["predictions"]]


async def test_source_end_sends_one_completion_message(server, photos):
    peer = await _session(server, webrtc_realtime_processing=False)
    image = load_photo(photos, "kite.jpg")
    try:
        for _ in range(4):
            peer.track.send(image)
        await peer.wait_for(lambda: len(peer.results) >= 3)
        await peer.end_video()
        await peer.wait_for(lambda: any(r["processing_complete"] for r in peer.results))
    finally:
        await _closed(server, peer)
    complete = [r for r in peer.results if r["processing_complete"]]
    assert len(complete) == 1
    done = complete[0]
    assert done["serialized_output_data"] is None and done["errors"] == []
    assert done["termination_reason"] is None
    processed = [r for r in peer.results if not r["processing_complete"]]
    assert done["video_metadata"]["frame_id"] == len(processed)


async def test_deadline_ends_session_with_timeout_reached(server):
    closed = server.closed_sessions
    peer = await _session(server, processing_timeout=0)
    try:
        await peer.wait_for(lambda: any(r["processing_complete"] for r in peer.results))
        # The deadline path is the one where the server closes the peer itself.
        await asyncio.to_thread(server.wait_sessions_closed, closed + 1, 5)
    finally:
        await peer.close()
    assert peer.results[-1]["termination_reason"] == "timeout_reached"
    assert server.sessions() == 0


async def test_ack_window_paces_production_without_dropping(server, photos):
    window = Settings().ack_window  # what the server process read from the same environment
    peer = await _session(server, webrtc_realtime_processing=False)
    image = load_photo(photos, "eagle.jpg")
    try:
        for _ in range(2):  # the server sees a frame once the next one was sent
            peer.track.send(image)
        await peer.wait_for(lambda: len(peer.results) >= 1)
        peer.send_control({"ack": 1})  # pacing starts with the first ACK
        for _ in range(3 * window):
            peer.track.send(image)
        await peer.wait_for(lambda: len(peer.results) >= 1 + window)
        # Frames 2..1+window are within ack 1 + window; the next must wait for another ACK.
        stalled = peer.wait_for(lambda: len(peer.results) >= 2 + window, timeout=1.5)
        with pytest.raises(TimeoutError):
            await stalled
        peer.send_control({"ack": 1 + window})
        await peer.wait_for(lambda: len(peer.results) >= 1 + 2 * window)
        peer.send_control({"ack": 1000})
        await peer.wait_for(lambda: len(peer.results) >= 1 + 3 * window)
    finally:
        await _closed(server, peer)
    ids = [r["video_metadata"]["frame_id"] for r in peer.results]
    assert ids == list(range(1, len(ids) + 1))  # nothing dropped


async def test_outputs_switch_at_runtime(server, photos):
    peer = await _session(server, webrtc_realtime_processing=False)
    image = load_photo(photos, "person.jpg")
    try:
        for _ in range(2):
            peer.track.send(image)
        await peer.wait_for(lambda: len(peer.results) >= 1)
        peer.send_control({"data_output": []})
        peer.send_control({"stream_output": []})
        for _ in range(3):
            peer.track.send(image)
        await peer.wait_for(lambda: len(peer.results) >= 4)
    finally:
        await _closed(server, peer)
    assert peer.results[0]["serialized_output_data"] is not None
    assert peer.results[-1]["serialized_output_data"] is None
    assert not peer.results[-1]["_gzipped"]


async def test_api_key_is_required_and_checked(guarded_server):
    no_key = LoopbackPeer(guarded_server.url)
    wrong = LoopbackPeer(guarded_server.url)
    try:
        response = await no_key.connect(spec=DETECT_SPEC)
        assert response.status_code == 401 and "API key" in response.json()["message"]
        response = await wrong.connect(spec=DETECT_SPEC, api_key="guess")
        assert response.status_code == 401 and response.json()["message"] == "invalid API key"
    finally:
        await no_key.close()
        await wrong.close()
    assert "s3cret-key" not in "\n".join(guarded_server.output)
    body_key = await _session(guarded_server, api_key="s3cret-key")
    await _closed(guarded_server, body_key)
    bearer = LoopbackPeer(guarded_server.url)
    response = await bearer.connect(
        spec=DETECT_SPEC, api_key="wrong", headers={"Authorization": "Bearer s3cret-key"}
    )
    assert response.status_code == 200, response.text  # the header wins over the body
    await asyncio.wait_for(bearer.connected.wait(), 10)
    await _closed(guarded_server, bearer)


async def test_session_cap_answers_429_and_frees_slots(guarded_server):
    key = {"api_key": "s3cret-key"}
    first = await _session(guarded_server, **key)
    second = await _session(guarded_server, **key)
    third = LoopbackPeer(guarded_server.url)
    try:
        response = await third.connect(spec=DETECT_SPEC, **key)
        assert response.status_code == 429
        assert "2 sessions" in response.json()["message"]
    finally:
        await third.close()
        await _closed(guarded_server, first)
        await _closed(guarded_server, second)
    assert guarded_server.sessions() == 0
    again = await _session(guarded_server, **key)
    await _closed(guarded_server, again)


async def test_a_peer_that_never_connects_gives_its_slot_back(guarded_server):
    closed = guarded_server.closed_sessions
    ghost = LoopbackPeer(guarded_server.url)
    body = await ghost.offer_body(spec=DETECT_SPEC, api_key="s3cret-key")
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(guarded_server.url + "/initialise_webrtc_worker", json=body)
        assert response.status_code == 200  # ... and the answer is never applied
        assert guarded_server.sessions() == 1
        await asyncio.to_thread(guarded_server.wait_sessions_closed, closed + 1, 10)
    finally:
        await ghost.close()
    assert guarded_server.sessions() == 0
