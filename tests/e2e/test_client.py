"""Our client (blocking and asyncio forms) against the real server process."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import re
import socket
import subprocess
import sys
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import av
import cv2
import numpy as np
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription

from sources import SyntheticSource, decode_stamp
from streaming import Client, ManualSource, SessionStartError, StreamConfig, WebcamSource
from streaming.client import (
    FrameSourceStream,
    InvalidParameterError,
    MJPEGSource,
    RTSPSource,
    VideoBytes,
)
from tests.conftest import DETECT_SPEC, load_photo
from tests.support.peer import loopback_peer
from tests.support.server import free_port

pytestmark = pytest.mark.e2e

BOTH = StreamConfig(stream_output=["annotated"], data_output=["predictions"])
# Tests that count frames process every one: in realtime mode a loaded machine drops some.
EVERY = StreamConfig(
    stream_output=["annotated"], data_output=["predictions"], realtime_processing=False
)


def synthetic(frames: int | None, fps: float = 20) -> FrameSourceStream:
    return FrameSourceStream(lambda: SyntheticSource(320, 240, fps=fps, frames=frames))


def assert_paired_by_stamp(pairs: list[tuple[np.ndarray, Any]]) -> None:
    """Every frame whose stamp survived the trip carries its own metadata, in order.

    The synthetic source stamps pts = index * 4500 (20 fps on the 90 kHz clock). A frame may
    lose its stamp for a reason outside the code under test: a UDP packet dropped on a loaded
    loopback leaves VP8 to conceal the gap. The stamp's checksum makes a misread impossible
    in practice, so a readable stamp that disagrees with the metadata is a pairing bug.
    """
    readable = [(stamp, m) for frame, m in pairs if (stamp := decode_stamp(frame)) is not None]
    assert len(readable) >= len(pairs) - 3, f"only {len(readable)} of {len(pairs)} stamps read"
    assert all(m.pts == stamp.index * 4500 for stamp, m in readable)
    indices = [stamp.index for stamp, _ in readable]
    assert indices == sorted(indices)


def test_manual_source_round_trip_with_every_on_data_form(server, photos):
    source = ManualSource()
    session = Client(server.url).webrtc.stream(source, workflow=DETECT_SPEC, config=BOTH)
    seen: dict[str, list[Any]] = {k: [] for k in ("bare", "empty", "field1", "field2")}

    @session.on_data
    def bare(data):
        seen["bare"].append(data)

    @session.on_data()
    def empty(data, metadata):
        seen["empty"].append((data, metadata))

    @session.on_data("predictions")
    def field1(predictions):
        seen["field1"].append(predictions)

    @session.on_data("predictions")
    async def field2(predictions, metadata):  # coroutine handlers are awaited
        seen["field2"].append(metadata.frame_id)

    person = load_photo(photos, "person.jpg", (320, 240))
    stop = threading.Event()

    def feed() -> None:
        # A live feed at 20 fps (pacing a producer, not waiting for anything).
        while not stop.wait(0.05):
            source.send(person)

    with session:
        session.start()
        feeder = threading.Thread(target=feed)
        feeder.start()
        frames = []
        try:
            for frame, metadata in session.video():
                frames.append((frame, metadata))
                if len(frames) >= 3:
                    break
        finally:
            stop.set()
            feeder.join()
        assert all(f.shape == (240, 320, 3) for f, _ in frames)
    session.close()  # a second close is a no-op
    assert session.closed
    assert seen["bare"] and set(seen["bare"][0]) == {"predictions"}
    _, metadata = seen["empty"][0]
    assert metadata.frame_id == 1 and metadata.inference_ms > 0 and metadata.stage_ms
    classes = {p["class"] for p in seen["field1"][0]["predictions"]}
    assert "person" in classes
    assert seen["field2"] == [m.frame_id for _, m in seen["empty"]]


def test_results_pairs_each_returned_frame_with_its_own_message(server):
    session = Client(server.url).webrtc.stream(synthetic(30), workflow=DETECT_SPEC, config=EVERY)
    results = list(session.results())  # ends with the server's completion message
    session.close()
    assert len(results) >= 28  # the connection may eat the very first keyframe
    assert_paired_by_stamp([(frame, metadata) for frame, _, metadata in results])
    assert all("predictions" in data for _, data, _ in results)
    assert session.termination_reason is None


def test_webcam_source_with_an_injected_capture_runs_until_a_handler_closes(server):
    class Capture:
        """OpenCV's capture interface over a live synthetic pattern."""

        def __init__(self, device: int) -> None:
            self.frames = SyntheticSource(320, 240, fps=20)

        def isOpened(self) -> bool:
            return True

        def read(self):
            frame = self.frames.read()
            return (frame is not None, None if frame is None else frame.image)

        def get(self, prop: int) -> float:
            return 20.0 if prop == cv2.CAP_PROP_FPS else 0.0

        def set(self, prop: int, value: float) -> bool:
            return True

        def release(self) -> None:
            self.frames.close()

    source = WebcamSource(0, capture_factory=Capture)
    session = Client(server.url).webrtc.stream(source, workflow=DETECT_SPEC, config=BOTH)
    ages: list[float] = []
    metadata_seen = []

    @session.on_frame
    def show(frame, metadata):
        stamp = decode_stamp(frame)
        if stamp is not None:
            ages.append(stamp.age_ms())
        metadata_seen.append(metadata)
        if len(ages) >= 10:
            session.close()

    session.run()  # returns once the handler closed the session
    assert session.closed and len(ages) >= 10
    assert all(m.declared_fps == 20.0 for m in metadata_seen if m.inference_ms is not None)


def test_wait_returns_at_the_end_of_stream_and_times_out_on_an_endless_one(server):
    client = Client(server.url)
    with client.webrtc.stream(synthetic(10), workflow=DETECT_SPEC, config=BOTH) as session:
        session.wait(timeout=30)
    endless = client.webrtc.stream(synthetic(None), workflow=DETECT_SPEC, config=BOTH)
    with endless, pytest.raises(TimeoutError, match=r"did not end within 0\.5 s"):
        endless.wait(timeout=0.5)


def test_acks_follow_the_request_not_the_config(server):
    """The source asks for non-realtime processing while the config says realtime.

    The server then processes a frame only once the previous ones are ACKed (window 4): all
    frames coming back proves the client ACKed, where inference-sdk would stall."""

    class BatchSynthetic(FrameSourceStream):
        def request_fields(self, config):
            return {**super().request_fields(config), "webrtc_realtime_processing": False}

    frames = 20
    source = BatchSynthetic(lambda: SyntheticSource(320, 240, fps=20, frames=frames))
    session = Client(server.url).webrtc.stream(
        source, workflow=DETECT_SPEC, config=StreamConfig(data_output=["predictions"])
    )
    ids: list[int] = []
    session.on_data("predictions")(lambda _, metadata: ids.append(metadata.frame_id))
    with session:
        session.wait(timeout=60)
    assert ids == list(range(1, frames + 1))
    assert session.stats.acks_sent == frames


def _fds() -> set[str]:
    """What this process's descriptors refer to (``socket:[inode]``, ``pipe:[inode]``, a
    path): one opened since a snapshot is in a later one; one another test's leftovers closed
    meanwhile (collected, a reader thread ending) is merely gone."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed between the listing and the look
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
    return found


def _open_peer_connections() -> int:
    gc.collect()
    return sum(
        1
        for o in gc.get_objects()
        if isinstance(o, RTCPeerConnection) and o.connectionState != "closed"
    )


class DeadEndAnswers(BaseHTTPRequestHandler):
    """Answers offers with a real SDP answer whose candidates point at a closed port."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = asyncio.run(self._answer(body["webrtc_offer"]["sdp"]))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            dead = s.getsockname()[1]
        answer = re.sub(r"(a=candidate:\S+ \d \S+ \d+ 127\.0\.0\.1 )\d+", rf"\g<1>{dead}", answer)
        payload = json.dumps({"status": "success", "sdp": answer, "type": "answer"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    @staticmethod
    async def _answer(offer: str) -> str:
        pc = loopback_peer()
        await pc.setRemoteDescription(RTCSessionDescription(offer, "offer"))
        await pc.setLocalDescription(await pc.createAnswer())
        sdp = pc.localDescription.sdp
        await pc.close()
        return sdp

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def dead_end_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), DeadEndAnswers)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_failed_starts_raise_once_and_leave_nothing_behind(server, dead_end_server):
    bad_spec = json.loads(json.dumps(DETECT_SPEC).replace("yolov3-tiny-416", "no-such-model"))
    down = f"http://127.0.0.1:{free_port()}"
    tls = server.url.replace("http://", "https://")  # https:// against plain HTTP
    cases = [
        (
            down,
            DETECT_SPEC,
            "nothing answers there. Is the server running? Start one with: visionstream serve",
        ),
        (tls, DETECT_SPEC, f"it answers in plain HTTP, not TLS: use {server.url}/"),
        (server.url, bad_spec, "no-such-model"),
        (dead_end_server, DETECT_SPEC, "WebRTC connection"),
    ]

    def attempt(url: str, spec: dict) -> SessionStartError:
        session = Client(url, connect_timeout=3).webrtc.stream(
            synthetic(None), workflow=spec, config=BOTH
        )
        with pytest.raises(SessionStartError) as caught:
            session.start()
        assert session.closed
        return caught.value

    attempt(down, DETECT_SPEC)  # warm-up: lazily created process-wide state
    # What this test leaves is what is new since here: an earlier test's thread ending or
    # its descriptor closed meanwhile is no concern of this one (a shuffled run saw 43 == 44).
    threads, fds = set(threading.enumerate()), _fds()
    for url, spec, needle in cases:
        error = attempt(url, spec)
        assert needle in str(error) and url in str(error), str(error)
        assert set(threading.enumerate()) - threads == set()
        assert _fds() - fds == set()
        assert _open_peer_connections() == 0
    assert attempt(server.url, bad_spec).status == 400


def test_invalid_arguments_fail_before_connecting(tmp_path):
    client = Client("http://127.0.0.1:9")
    with pytest.raises(InvalidParameterError, match="workspace is required"):
        client.webrtc.stream(ManualSource(), workflow="my-workflow")
    with pytest.raises(InvalidParameterError, match="rtsp://host/path"):
        RTSPSource("http://camera/stream")
    with pytest.raises(InvalidParameterError, match="MJPEG"):
        MJPEGSource("rtsp://camera/stream")


def test_manual_source_send_before_the_session_starts_queues_in_the_same_bounded_mailbox(server):
    source = ManualSource(queue_size=3)
    for _ in range(5):  # before any session: queued, the oldest dropped as when running
        source.send(np.full((240, 320, 3), 80, np.uint8))
    assert source.dropped == 2
    session = Client(server.url).webrtc.stream(source, workflow=DETECT_SPEC, config=BOTH)
    with session:
        frame, _ = next(session.video())  # the queued frames went out once it started
        assert frame.shape == (240, 320, 3)
    with pytest.raises(RuntimeError, match="closed"):
        source.send(np.zeros((8, 8, 3), np.uint8))


def test_video_bytes_count_both_ways_once_the_server_reports_what_it_sent(server):
    session = Client(server.url).webrtc.stream(synthetic(None), workflow=DETECT_SPEC, config=BOTH)
    assert session.video_bytes() == VideoBytes()  # not started
    with session:
        # The returned count comes with the server's RTCP sender reports (about every
        # second); reading on each returned frame waits for the first, bounded by frames.
        for count, _ in enumerate(session.video()):
            counted = session.video_bytes()
            if counted.received > 0 or count > 600:
                break
    assert counted.sent > 0 and counted.received > 0, counted
    assert session.video_bytes() == VideoBytes()  # closed


def test_a_session_left_open_warns_when_collected(server):
    session = Client(server.url).webrtc.stream(synthetic(None), workflow=DETECT_SPEC, config=BOTH)
    session.start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del session
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) for w in caught)


async def test_asyncio_form(server):
    client = Client(server.url)
    stamps = []
    async with client.webrtc.astream(synthetic(20), workflow=DETECT_SPEC, config=EVERY) as session:
        async for frame, metadata in session.video():
            stamps.append((frame, metadata))
    assert session.closed and len(stamps) >= 18
    assert_paired_by_stamp(stamps)


def test_cli_records_a_playable_mp4_and_one_json_line_per_frame(server, tmp_path):
    video, jsonl = tmp_path / "out.mp4", tmp_path / "out.jsonl"
    frames = 24
    command = [
        sys.executable, "-m", "streaming.cli", "stream",
        "--source", "synthetic:320x240@20", "--frames", str(frames), "--no-realtime",
        "--record", str(video), "--jsonl", str(jsonl), "--api-url", server.url,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"frames {frames}" in done.stderr
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [line["frame_id"] for line in lines] == list(range(1, frames + 1))
    assert all("predictions" in line["data"] for line in lines)
    with av.open(str(video)) as container:
        decoded = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]
    indices = [s.index for s in map(decode_stamp, decoded) if s]
    assert len(indices) >= frames - 3 and indices == sorted(indices)
