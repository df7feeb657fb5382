"""The whole app in this process: the app factory with its lifespan, a fixed-output model,
and an aiortc client peer in the same loop. Waits are on the server's own events."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
from aiortc import RTCSessionDescription

from streaming.config import Settings
from streaming.server.app import create_app
from streaming.workflows.library import object_detection
from tests.support.onnx_models import YOLO_ROWS, model_directory
from tests.support.peer import LoopbackPeer

WAIT_S = 60.0


async def test_a_session_streams_through_the_app_and_frees_its_slot(tmp_path):
    model_directory(tmp_path / "models", "fixed", [("output", YOLO_ROWS)], decoder="yolov3")
    settings = Settings(
        models_dir=tmp_path / "models",
        default_model="fixed",
        prepare_default_model=False,
        inference_backend="onnxruntime",
        upload_dir=tmp_path / "uploads",
        sink_dir=tmp_path / "sinks",
        data_dir=tmp_path / "data",
    )
    app = create_app(settings, install_rtc=False)  # this process's other peers stay aiortc's
    async with app.router.lifespan_context(app):
        state = app.state.server
        await asyncio.wait_for(state.ready.wait(), WAIT_S)  # the model is loaded and warm
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            missing = await http.get("/nowhere")
            assert missing.status_code == 404 and missing.json()["code"] == "not_found"

            peer = LoopbackPeer("http://app")
            body = await peer.offer_body(spec=object_detection("fixed"))
            response = await http.post("/initialise_webrtc_worker", json=body)
            assert response.status_code == 200, response.text
            answer = response.json()
            await peer.pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], answer["type"]))
            assert peer.track is not None
            try:
                for shade in range(4):  # aiortc's receiver releases a frame on the next one
                    peer.track.send(np.full((64, 64, 3), 40 * shade, np.uint8))
                await peer.wait_for(lambda: len(peer.results) >= 2, WAIT_S)
                assert len(state.sessions) == 1
            finally:
                await peer.close()
            # The client left without a goodbye: ICE says so, the slot is freed.
            await asyncio.wait_for(state.sessions.wait_empty(), WAIT_S)

    result = peer.results[0]
    predictions = result["serialized_output_data"]["predictions"]["predictions"]
    assert sorted(p["class"] for p in predictions) == ["cat", "dog"]
    assert result["errors"] == []
