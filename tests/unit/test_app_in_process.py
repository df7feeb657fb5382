"""The whole app in this process: the app factory with its lifespan, a fixed-output model,
and an aiortc client peer in the same loop. Waits are on the server's own events."""

from __future__ import annotations

import asyncio
import threading

import cv2
import httpx
import numpy as np
from aiortc import RTCSessionDescription

from sources import SyntheticSource
from streaming.config import Settings
from streaming.protocol.workflows import object_detection
from streaming.server.app import create_app
from tests.support.onnx_models import YOLO_ROWS, model_directory
from tests.support.peer import LoopbackPeer
from tests.unit.test_sources import FakeCapture

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


class PacedCapture:
    """cv2.VideoCapture's interface over live synthetic frames (paced at their rate), then
    ``frames`` later the device fails, as an unplugged USB camera does."""

    def __init__(self, frames: int) -> None:
        self._source = SyntheticSource(320, 240, fps=30, frames=frames, realtime=True)
        self.released = threading.Event()

    def isOpened(self) -> bool:
        return True

    def read(self):
        frame = self._source.read()
        return (True, frame.image) if frame is not None else (False, None)

    def get(self, prop: int) -> float:
        return 30.0 if prop == cv2.CAP_PROP_FPS else 0.0

    def set(self, prop: int, value: float) -> bool:
        return True

    def release(self) -> None:
        self._source.close()
        self.released.set()


async def test_a_pipeline_reads_local_devices_and_outlives_one_unplugged(tmp_path):
    model_directory(tmp_path / "models", "fixed", [("output", YOLO_ROWS)], decoder="yolov3")
    settings = Settings(
        models_dir=tmp_path / "models",
        default_model="fixed",
        inference_backend="onnxruntime",
        allow_local_sources=True,
        persist_pipelines=False,
        upload_dir=tmp_path / "uploads",
        sink_dir=tmp_path / "sinks",
        data_dir=tmp_path / "data",
    )
    captures = {0: PacedCapture(frames=10**6), "/dev/video7": PacedCapture(frames=20)}

    def open_capture(device: int | str):
        if device not in captures:
            return FakeCapture([], opened=False)
        return captures[device]

    app = create_app(settings, install_rtc=False, capture_factory=open_capture)
    spec = object_detection("fixed")
    async with app.router.lifespan_context(app):
        await asyncio.wait_for(app.state.server.ready.wait(), WAIT_S)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:

            async def start(reference) -> httpx.Response:
                return await http.post("/inference_pipelines/initialise", json={
                    "video_configuration": {"type": "VideoConfiguration",
                                            "video_reference": reference},
                    "processing_configuration": {"type": "WorkflowConfiguration",
                                                 "workflow_specification": spec},
                })  # fmt: skip

            missing = await start(5)
            assert missing.status_code == 502, missing.text
            assert missing.json()["message"].startswith("video_reference 5: cannot open camera 5")

            started = await start([0, "/dev/video7"])
            assert started.status_code == 200, started.text
            pipeline_id = started.json()["context"]["pipeline_id"]

            async def report() -> dict:
                response = await http.get(f"/inference_pipelines/{pipeline_id}/status")
                return response.json()["report"]

            # The second device fails after 20 frames; the first goes on being processed.
            # Each pass waits on a result (the long poll), never on the clock.
            deadline = asyncio.get_running_loop().time() + WAIT_S
            processed_at_error = None
            while True:
                consumed = await http.request(
                    "GET", f"/inference_pipelines/{pipeline_id}/consume",
                    json={"wait_seconds": 5, "excluded_fields": ["annotated"]},
                )  # fmt: skip
                assert consumed.status_code == 200, consumed.text
                sources = (await report())["sources_metadata"]
                if [s["state"] for s in sources] == ["RUNNING", "ERROR"]:
                    processed = sources[0]["frames_processed"]
                    processed_at_error = processed_at_error or processed
                    if processed > processed_at_error:
                        break
                assert asyncio.get_running_loop().time() < deadline, sources
            errors = [
                e for e in (await report())["video_source_status_updates"]
                if e["event_type"] == "SOURCE_ERROR"
            ]  # fmt: skip
            assert errors[-1]["payload"]["error_message"] == (
                "camera /dev/video7 stopped delivering frames"
            )
            assert errors[-1]["payload"]["source_id"] == 1
            assert (await http.post(f"/inference_pipelines/{pipeline_id}/terminate")).is_success
    assert captures[0].released.is_set()


async def test_a_sampled_pipeline_reports_its_rates_and_counts_its_frames(tmp_path):
    """``max_fps: 10`` on a 30 fps device: the status says what was asked, what the sampler
    keeps of the stream (by the frames' own times) and the results a second; the frames
    count under ``path="pipeline"``."""
    model_directory(tmp_path / "models", "fixed", [("output", YOLO_ROWS)], decoder="yolov3")
    settings = Settings(models_dir=tmp_path / "models", default_model="fixed",
                        allow_local_sources=True, persist_pipelines=False,
                        upload_dir=tmp_path / "uploads", sink_dir=tmp_path / "sinks",
                        data_dir=tmp_path / "data")  # fmt: skip
    device = PacedCapture(frames=10**6)
    app = create_app(settings, install_rtc=False, capture_factory=lambda _: device)
    async with app.router.lifespan_context(app):
        await asyncio.wait_for(app.state.server.ready.wait(), WAIT_S)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            started = await http.post("/inference_pipelines/initialise", json={
                "video_configuration": {"type": "VideoConfiguration", "video_reference": 0,
                                        "max_fps": 10},
                "processing_configuration": {"type": "WorkflowConfiguration",
                                             "workflow_specification": object_detection("fixed")},
            })  # fmt: skip
            assert started.status_code == 200, started.text
            pipeline_id = started.json()["context"]["pipeline_id"]
            deadline = asyncio.get_running_loop().time() + WAIT_S
            while True:  # each pass waits on a result (the long poll), never on the clock
                poll = {"wait_seconds": 5, "excluded_fields": ["annotated"]}
                await http.request("GET", f"/inference_pipelines/{pipeline_id}/consume",
                                   json=poll)  # fmt: skip
                report = (await http.get(f"/inference_pipelines/{pipeline_id}/status")).json()
                (source,) = report["report"]["sources_metadata"]
                if source["frames_processed"] >= 25:
                    break
                assert asyncio.get_running_loop().time() < deadline, source
            assert source["max_fps"] == 10 and source["drops"]["max_fps"] > 0
            # Never more than asked (how near 10 depends on the capture thread's pace here:
            # exactness is checked on given timestamps, in test_sampling.py).
            assert 0 < source["sampled_fps"] <= 10.5
            assert source["results_fps"] is not None and source["results_fps"] > 0
            metrics = (await http.get("/metrics")).text
            series = 'visionstream_frames_processed_total{path="pipeline"}'
            counted = [line for line in metrics.splitlines() if line.startswith(series)]
            assert counted and float(counted[0].split()[-1]) >= 25
            assert 'visionstream_frames_processed_total{path="session"} 0.0' in metrics
            assert (await http.post(f"/inference_pipelines/{pipeline_id}/terminate")).is_success
