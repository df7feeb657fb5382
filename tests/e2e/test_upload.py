"""Uploaded video files: every frame once and in order, bad files and hostile uploads refused
with their own message, and nothing kept on disk or in memory afterwards."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from inference_sdk import InferenceHTTPClient
from inference_sdk.webrtc import StreamConfig as SdkStreamConfig
from inference_sdk.webrtc import VideoFileSource as SdkVideoFileSource

from sources import decode_stamp
from streaming.client import Client, StreamConfig, VideoFileSource
from streaming.protocol.upload import iter_upload_chunks
from tests.conftest import DETECT_SPEC
from tests.support.media import stamped_clip, write_clip
from tests.support.peer import LoopbackPeer
from tests.support.server import ServerProcess, running_server

pytestmark = pytest.mark.e2e

FRAMES = 150
CONFIG = StreamConfig(stream_output=["annotated"], data_output=["predictions"])


@pytest.fixture(scope="module")
def upload_server(tmp_path_factory):
    uploads = tmp_path_factory.mktemp("uploads")
    with running_server(upload_dir=str(uploads)) as process:
        process.uploads = uploads
        yield process


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("clips")


@pytest.fixture(scope="module")
def clip(clips) -> Path:
    """150 frames, 640x480, H.264 in MP4, each frame stamped with its index."""
    return stamped_clip(clips / "clip.mp4", FRAMES)


class Sessions:
    """Counts the server's session teardowns from here on."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.closed_before = server.closed_sessions

    def assert_all_closed_and_nothing_left(self, sessions: int = 1, timeout: float = 10) -> None:
        self.server.wait_sessions_closed(self.closed_before + sessions, timeout)
        # The server's private directory (and its lock) stays; no upload file does.
        leftovers = [p for p in self.server.uploads.rglob("*") if p.is_file() and p.name != ".lock"]
        assert leftovers == []
        assert self.server.sessions() == 0


def metric(server: ServerProcess, name: str) -> float:
    text = server.get("/metrics").text
    found = re.search(rf"^{name}_total (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


# ------------------------------------------------------------------ the wire, exactly


async def upload_raw(server: ServerProcess, messages: list[bytes], **fields) -> LoopbackPeer:
    """A protocol-level peer that uploads ``messages`` and waits for the completion message."""
    peer = LoopbackPeer(server.url)
    fields = {"stream_output": [], "data_output": ["predictions"], **fields}
    response = await peer.connect(
        video=False, upload=True, spec=DETECT_SPEC, webrtc_realtime_processing=False, **fields
    )
    assert response.status_code == 200, response.text
    await peer.send_upload(messages)
    await peer.wait_for(lambda: any(r["processing_complete"] for r in peer.results), timeout=90)
    return peer


def file_chunks(path: Path) -> list[bytes]:
    with path.open("rb") as file:
        return list(iter_upload_chunks(file, path.stat().st_size))


async def test_every_result_once_in_order_then_one_completion(upload_server, clip):
    """A client that never ACKs; a keepalive and a duplicate chunk on the way."""
    sessions = Sessions(upload_server)
    chunks = file_chunks(clip)
    peer = await upload_raw(upload_server, [b"\x00", chunks[0], chunks[0], *chunks[1:]])
    try:
        results = peer.results
        assert [r["processing_complete"] for r in results] == [False] * FRAMES + [True]
        assert [r["video_metadata"]["frame_id"] for r in results] == [*range(1, FRAMES + 1), FRAMES]
        assert all(
            r["errors"] == [] and "predictions" in r["serialized_output_data"] for r in results[:-1]
        )
        metadata = [r["video_metadata"] for r in results[:-1]]
        assert {m["declared_fps"] for m in metadata} == {30.0}
        assert {(m["width"], m["height"]) for m in metadata} == {(640, 480)}
        pts = [m["pts"] for m in metadata]
        assert pts == sorted(set(pts))
        assert peer.upload_echoes == [b"\x00"]
        # After a normal end the server leaves closing to the client.
        assert upload_server.sessions() == 1
    finally:
        await peer.close()
    sessions.assert_all_closed_and_nothing_left()


# ------------------------------------------------------------------------ our client


def test_our_client_gets_every_frame_as_an_image_in_order(upload_server, clip):
    sessions = Sessions(upload_server)
    progress: list[tuple[int, int]] = []
    source = VideoFileSource(
        clip, on_upload_progress=lambda done, total: progress.append((done, total))
    )
    session = Client(upload_server.url).webrtc.stream(source, workflow=DETECT_SPEC, config=CONFIG)
    with session:
        results = list(session.results())
    assert [m.frame_id for _, _, m in results] == list(range(1, FRAMES + 1))
    assert [decode_stamp(frame).index for frame, _, _ in results] == list(range(FRAMES))
    assert all("predictions" in data and "annotated" not in data for _, data, _ in results)
    assert session.termination_reason is None and session.stats.acks_sent == FRAMES
    assert progress[-1] == (source.total_chunks, source.total_chunks)
    sessions.assert_all_closed_and_nothing_left()


def test_our_client_with_frames_on_a_video_track(upload_server, clip):
    sessions = Sessions(upload_server)
    source = VideoFileSource(clip, use_datachannel_frames=False)
    session = Client(upload_server.url).webrtc.stream(source, workflow=DETECT_SPEC, config=CONFIG)
    ids: list[int] = []
    session.on_data()(lambda data, metadata: ids.append(metadata.frame_id))
    with session:
        frames = [frame for frame, _ in session.video()]
    assert ids == list(range(1, FRAMES + 1))
    stamps = [s.index for s in map(decode_stamp, frames) if s is not None]
    # A frame may lose its stamp to a dropped UDP packet; none may come twice or out of order.
    assert len(stamps) >= FRAMES - 3 and stamps == sorted(set(stamps))
    sessions.assert_all_closed_and_nothing_left()


def test_realtime_upload_plays_at_the_files_rate_and_counts_what_it_drops(upload_server, clips):
    sessions = Sessions(upload_server)
    frames = 45
    clip = stamped_clip(clips / "short.mp4", frames, size=(320, 240), fps=30)
    source = VideoFileSource(clip, realtime_processing=True)
    session = Client(upload_server.url).webrtc.stream(source, workflow=DETECT_SPEC, config=CONFIG)
    with session:
        results = list(session.results())
    metadata = [m for _, _, m in results]
    assert [m.frame_id for m in metadata] == list(range(1, len(results) + 1))
    assert len(results) + metadata[-1].extra["dropped_frames"] == frames
    indices = [decode_stamp(frame).index for frame, _, _ in results]
    assert indices == sorted(set(indices))
    # Frames are read no earlier than their time in the file: a lower bound, not a speed test.
    played = (metadata[-1].received_at - metadata[0].received_at).total_seconds()
    assert played >= (indices[-1] - indices[0]) / 30 - 0.05
    sessions.assert_all_closed_and_nothing_left()


def test_rotated_clip_is_processed_upright(upload_server, clips):
    sessions = Sessions(upload_server)
    image = np.full((480, 640, 3), 60, np.uint8)
    image[:60, :60] = 255  # a marker in the stored top-left corner
    # Displayed turned 90 degrees counter-clockwise: the marker belongs bottom-left.
    clip = write_clip(clips / "rotated.mp4", [image] * 10, rotation=90)
    session = Client(upload_server.url).webrtc.stream(
        VideoFileSource(clip), workflow=DETECT_SPEC, config=CONFIG
    )
    with session:
        results = list(session.results())
    assert len(results) == 10
    for frame, _, metadata in results:
        assert frame.shape == (640, 480, 3) and (metadata.width, metadata.height) == (480, 640)
        assert frame[600:630, 10:40].mean() > 200 and frame[10:40, 10:40].mean() < 120
    sessions.assert_all_closed_and_nothing_left()


def test_cli_uploads_a_file_with_progress_and_writes_every_result(upload_server, clip, tmp_path):
    sessions = Sessions(upload_server)
    jsonl = tmp_path / "out.jsonl"
    command = [
        sys.executable, "-m", "streaming.cli", "stream", "--source", str(clip),
        "--jsonl", str(jsonl), "--api-url", upload_server.url,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "upload [####################] 100%" in done.stderr
    assert f"frames [####################] {FRAMES}/{FRAMES}" in done.stderr
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [line["frame_id"] for line in lines] == list(range(1, FRAMES + 1))
    sessions.assert_all_closed_and_nothing_left()


# ------------------------------------------------------------------- inference-sdk


@pytest.mark.parametrize("acks", [False, True], ids=["default-config-no-acks", "acks"])
def test_unmodified_sdk_video_file_source(upload_server, clip, acks):
    sessions = Sessions(upload_server)
    acks_before = metric(upload_server, "visionstream_acks_received")

    # --- an inference-sdk program, as its users write it ---
    client = InferenceHTTPClient(api_url=upload_server.url, api_key=None)
    config = SdkStreamConfig(stream_output=["annotated"], data_output=["predictions"])
    if acks:
        config = SdkStreamConfig(
            stream_output=["annotated"], data_output=["predictions"], realtime_processing=False
        )
    session = client.webrtc.stream(
        source=SdkVideoFileSource(str(clip)), workflow=DETECT_SPEC, config=config
    )
    ids, stamps = [], []

    @session.on_data()
    def on_data(data, metadata):
        ids.append(metadata.frame_id)

    @session.on_frame
    def on_frame(frame, metadata):
        stamps.append(decode_stamp(frame).index)

    session.run()
    # ---

    assert ids == list(range(1, FRAMES + 1))
    assert stamps == list(range(FRAMES))
    acks_received = metric(upload_server, "visionstream_acks_received") - acks_before
    assert acks_received == (FRAMES if acks else 0)
    sessions.assert_all_closed_and_nothing_left()


# ----------------------------------------------------------------------- bad files


def _truncated(clips: Path, faststart: bool) -> Path:
    whole = stamped_clip(clips / f"whole-{faststart}.mp4", 60, size=(320, 240), faststart=faststart)
    data = whole.read_bytes()
    cut = clips / f"cut-{faststart}.mp4"
    cut.write_bytes(data[: len(data) * 6 // 10])
    return cut


def _not_a_video(clips: Path) -> Path:
    notes = clips / "notes.mp4"
    notes.write_bytes(b"meeting notes\n" * 5000)
    return notes


BAD_FILES = {
    # kind: (make it, frames processed (None: some), the error)
    # The index (moov) comes last, so nothing is readable.
    "truncated": (lambda clips: _truncated(clips, False), 0, "cannot open the uploaded video: "),
    # The index comes first: what is there is processed, then the shortfall is reported.
    "truncated-index-first": (
        lambda clips: _truncated(clips, True),
        None,
        "the uploaded video ended after {n} of its 60 frames: it is truncated or damaged",
    ),
    "not-a-video": (
        _not_a_video,
        0,
        "cannot open the uploaded video: Invalid data found when processing input",
    ),
}


@pytest.mark.parametrize("kind", BAD_FILES)
async def test_bad_file_ends_with_its_error_and_one_completion(upload_server, clips, kind):
    make, expected_frames, message = BAD_FILES[kind]
    sessions = Sessions(upload_server)
    peer = await upload_raw(upload_server, file_chunks(make(clips)))
    try:
        *frames, notice, completion = peer.results
        n = len(frames)
        assert (expected_frames is None and 0 < n < 60) or n == expected_frames
        assert [r["video_metadata"]["frame_id"] for r in frames] == list(range(1, n + 1))
        assert len(notice["errors"]) == 1 and notice["errors"][0].startswith(message.format(n=n))
        assert not notice["processing_complete"] and notice["video_metadata"]["frame_id"] == n
        assert completion["processing_complete"] and completion["video_metadata"]["frame_id"] == n
        assert "/" not in notice["errors"][0]  # the server's paths stay private
    finally:
        await peer.close()
    sessions.assert_all_closed_and_nothing_left()


async def test_a_client_leaving_mid_upload_leaves_nothing_behind(upload_server, tmp_path):
    sessions = Sessions(upload_server)
    partial = tmp_path / "partial.mp4"
    partial.write_bytes(os.urandom(20 << 20))
    halfway = asyncio.Event()

    def progress(done: int, total: int) -> None:
        if 2 * done >= total:
            halfway.set()

    source = VideoFileSource(partial, on_upload_progress=progress)
    client = Client(upload_server.url)
    async with client.webrtc.astream(source, workflow=DETECT_SPEC, config=CONFIG):
        await asyncio.wait_for(halfway.wait(), 60)
    # The client's goodbye (SCTP ABORT, DTLS close_notify) can be lost in the burst of a bulk
    # upload when a loaded loopback's socket buffer is full; the server then learns of the
    # departure from ICE consent failing (aioice: 6 missed checks ~5 s apart, at most ~36 s).
    await asyncio.to_thread(sessions.assert_all_closed_and_nothing_left, 1, 45)


# ------------------------------------------------------------------ hostile uploads


def _chunk(index: int, total: int) -> bytes:
    return struct.pack("<II", index, total) + b"\x00" * 100


HOSTILE = [
    ([_chunk(5, 3)], "upload chunk 5 is out of range (total 3)"),
    ([_chunk(0, 3), _chunk(1, 4)], "upload changed its chunk count from 3 to 4"),
    (
        [_chunk(0, 2**32 - 1)],
        "upload of 4294967295 chunks exceeds the 2147483648-byte upload limit",
    ),
    *(
        ([b"\x07" * n], f"upload chunk of {n} bytes is shorter than its 8-byte header")
        for n in range(2, 8)
    ),
]


async def test_hostile_uploads_each_get_their_error_while_another_session_streams(
    upload_server, clip
):
    sessions = Sessions(upload_server)
    healthy = asyncio.create_task(upload_raw(upload_server, file_chunks(clip)))
    for messages, error in HOSTILE:
        peer = await upload_raw(upload_server, [*messages, _chunk(1, 3)])
        try:
            assert [r["errors"] for r in peer.results] == [[error], []]
            assert [r["processing_complete"] for r in peer.results] == [False, True]
        finally:
            await peer.close()
    peer = await healthy
    try:
        assert [r["video_metadata"]["frame_id"] for r in peer.results[:-1]] == list(
            range(1, FRAMES + 1)
        )
        assert all(r["errors"] == [] for r in peer.results)
    finally:
        await peer.close()
    sessions.assert_all_closed_and_nothing_left(len(HOSTILE) + 1)


# ------------------------------------------------------------------------ memory


def _rss_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1])


def test_server_memory_does_not_grow_with_upload_size(upload_server, tmp_path):
    """200 MB of random-looking bytes; the server's peak RSS stays within 100 MB of its start.
    The same bytes every run: FFmpeg's probe takes some random blocks for a stream it can
    open (and then cannot decode), which made this test's error message flaky."""
    sessions = Sessions(upload_server)
    big = tmp_path / "big.mp4"
    block = random.Random(20261124).randbytes(1 << 20)
    with big.open("wb") as file:
        for i in range(200):
            file.write(block[i:] + block[:i])
    pid = upload_server.process.pid
    start = _rss_kib(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # restart the peak (VmHWM) from here
    errors: list[list[str]] = []
    session = Client(upload_server.url).webrtc.stream(
        VideoFileSource(big), workflow=DETECT_SPEC, config=CONFIG
    )
    session.on_error(lambda found, metadata: errors.append(found))
    with session:
        session.wait(timeout=300)
    peak = _rss_kib(pid, "VmHWM")
    assert errors == [["cannot open the uploaded video: Invalid data found when processing input"]]
    assert peak - start < 100 * 1024, f"peak RSS grew by {(peak - start) // 1024} MiB"
    big.unlink()
    sessions.assert_all_closed_and_nothing_left()
