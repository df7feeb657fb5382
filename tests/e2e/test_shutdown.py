"""SIGTERM drains the server: new work refused (503), live sessions told why, pipelines'
sinks flushed, uploads deleted, and the process gone within the drain time. SIGKILL leaves
uploads behind; the next server sweeps them."""

from __future__ import annotations

import json
import signal
import threading

import av
import httpx
import pytest

from streaming import Client, StreamConfig, VideoFileSource
from tests.conftest import DETECT_SPEC
from tests.support.media import stamped_clip
from tests.support.server import ServerProcess
from tests.support.webhook import WebhookReceiver

pytestmark = pytest.mark.e2e

CONFIG = StreamConfig(stream_output=["annotated"], data_output=["predictions"])


def upload_files(base) -> list:
    return [p for p in base.rglob("*") if p.is_file() and p.name != ".lock"]


def test_sigterm_drains_sessions_pipelines_and_uploads(tmp_path, camera):
    uploads, sinks = tmp_path / "uploads", tmp_path / "sinks"
    clip = stamped_clip(tmp_path / "clip.mp4", frames=900, size=(320, 240))
    server = ServerProcess(
        upload_dir=str(uploads),
        sink_dir=str(sinks),
        shutdown_drain_s="30",
        allowed_networks="127.0.0.0/8",
    )
    receiver = WebhookReceiver()
    try:
        server.wait_ready()
        sink_configuration = {
            "type": "MemorySinkConfiguration",
            "jsonl": {"name": "door"},
            "video_file": {"name": "door", "segment_seconds": 60},
            "webhook": {"url": receiver.url, "max_attempts": 1, "queue_size": 4},
        }
        mark = len(server.lines)
        started = server.start_pipeline(
            camera.url, DETECT_SPEC, sink_configuration=sink_configuration
        )
        assert started.status_code == 200, started.text
        server.wait_for_output("source 0: processing", mark, timeout=60)
        receiver.wait_bodies(1)  # held: the pipeline's webhook sink has a delivery in flight

        # An upload being processed, every frame (its file is on the server's disk).
        session = Client(server.url).webrtc.stream(
            VideoFileSource(clip), workflow=DETECT_SPEC, config=CONFIG
        )
        results = session.results()
        next(results)
        assert len(upload_files(uploads)) == 1

        mark = len(server.lines)
        server.process.send_signal(signal.SIGTERM)
        server.wait_for_output("shutting down: draining", mark)
        # Draining (the held webhook delivery keeps it so): nothing new is started.
        refused = httpx.post(
            f"{server.url}/initialise_webrtc_worker",
            json={"webrtc_offer": {"type": "offer", "sdp": "v=0"}, "workflow_configuration": {
                "type": "WorkflowConfiguration", "workflow_specification": DETECT_SPEC}},
            timeout=10,
        )  # fmt: skip
        assert refused.status_code == 503, refused.text
        assert "shutting down" in refused.json()["message"]
        assert httpx.get(f"{server.url}/readyz", timeout=10).status_code == 503

        # The live session was told why it ended.
        for _ in results:
            pass
        assert session.completed and session.termination_reason == "server_shutdown"
        session.close()

        receiver.answer()
        assert server.process.wait(60) == 0
    finally:
        receiver.down()
        server.stop()
    output = "\n".join(server.lines)
    assert "Traceback" not in output, output
    assert upload_files(uploads) == []
    lines = (sinks / "door.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line)["frame_id"] for line in lines)  # complete lines
    (recording,) = sinks.glob("door-source0-*.mp4")
    with av.open(str(recording)) as container:  # finalised: it opens and decodes
        assert sum(1 for _ in container.decode(video=0)) > 0


def test_uploads_of_a_killed_server_are_swept_by_the_next(tmp_path):
    uploads = tmp_path / "uploads"
    clip = stamped_clip(tmp_path / "clip.mp4", frames=900, size=(320, 240))
    first = ServerProcess(upload_dir=str(uploads))
    try:
        first.wait_ready()
        session = Client(first.url).webrtc.stream(
            VideoFileSource(clip), workflow=DETECT_SPEC, config=CONFIG
        )
        next(session.results())
        assert len(upload_files(uploads)) == 1
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(30)
        # The client learns from the lost connection; close without waiting on it.
        threading.Thread(target=session.close, kwargs={"timeout": 1}, daemon=True).start()
    finally:
        first.stop()
    assert len(upload_files(uploads)) == 1  # left behind

    second = ServerProcess(upload_dir=str(uploads))
    try:
        second.wait_ready()
        second.wait_for_output("removed 1 uploads left behind")
        assert upload_files(uploads) == []
        private = [p for p in uploads.iterdir() if p.is_dir()]
        assert len(private) == 1 and private[0].stat().st_mode & 0o777 == 0o700
    finally:
        second.stop()
