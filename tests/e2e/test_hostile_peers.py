"""Hostile peers are bounded and answered, and a second live session keeps being served.

Each test runs a protocol-level peer that misbehaves (hundreds of media sections, a flood of
control messages, 8K frames, a resolution change every frame, an upload that stops halfway)
while a witness session of our client streams beside it on the same server.
"""

from __future__ import annotations

import asyncio
import itertools
import threading

import numpy as np
import pytest

from streaming import Client, ManualSource, StreamConfig
from tests.conftest import DETECT_SPEC
from tests.support.peer import LoopbackPeer
from tests.support.server import running_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory):
    uploads = tmp_path_factory.mktemp("uploads")
    with running_server(upload_dir=str(uploads), upload_idle_timeout_s="1.5") as process:
        process.uploads = uploads
        yield process


async def connected_peer(url: str, **fields) -> LoopbackPeer:
    """A protocol-level peer with a live session (the caller closes it)."""
    peer = LoopbackPeer(url)
    response = await peer.connect(spec=DETECT_SPEC, **fields)
    assert response.status_code == 200, response.text
    await asyncio.wait_for(peer.connected.wait(), 30)
    return peer


def errors_of(peer: LoopbackPeer) -> list[str]:
    return [e for r in peer.results for e in r.get("errors") or []]


async def completion_of(peer: LoopbackPeer) -> dict:
    """The session's completion message, once it came."""
    await peer.wait_for(lambda: any(r.get("processing_complete") for r in peer.results), 60)
    return next(r for r in peer.results if r.get("processing_complete"))


class Witness:
    """A well-behaved session streaming all along; counts the results it gets back."""

    def __init__(self, url: str) -> None:
        self.source = ManualSource()
        config = StreamConfig(stream_output=[], data_output=["predictions"])
        self.session = Client(url).webrtc.stream(self.source, workflow=DETECT_SPEC, config=config)
        self.results = 0
        self._changed = threading.Condition()
        self._stop = threading.Event()

        @self.session.on_data("predictions")
        def counted(_: object) -> None:
            with self._changed:
                self.results += 1
                self._changed.notify_all()

        self.session.start()
        self._feeder = threading.Thread(target=self._feed, daemon=True)
        self._feeder.start()

    def _feed(self) -> None:
        image = np.full((240, 320, 3), 70, np.uint8)
        while not self._stop.wait(1 / 15):
            self.source.send(image)

    def wait_more(self, count: int, timeout: float = 60) -> None:
        with self._changed:
            target = self.results + count
            assert self._changed.wait_for(lambda: self.results >= target, timeout), (
                f"the witness session got {self.results} results, wanted {target}"
            )

    def close(self) -> None:
        self._stop.set()
        self.session.close()


@pytest.fixture
def witness(hostile_server):
    live = Witness(hostile_server.url)
    live.wait_more(3)
    yield live
    live.wait_more(3)  # still served after the hostile peer did its worst
    live.close()


async def test_an_offer_with_hundreds_of_media_sections_is_refused(hostile_server, witness):
    peer = LoopbackPeer(hostile_server.url)
    try:
        body = await peer.offer_body(spec=DETECT_SPEC)
        sdp = body["webrtc_offer"]["sdp"]
        first = sdp.index("m=")
        section = sdp[first:]
        body["webrtc_offer"]["sdp"] = sdp + section * 300
        response = hostile_server.post("/initialise_webrtc_worker", json=body)
        assert response.status_code == 400, response.text
        assert "media sections; at most 8" in response.json()["message"]
    finally:
        await peer.close()


async def test_a_control_message_flood_ends_that_session_only(hostile_server, witness):
    peer = await connected_peer(hostile_server.url)
    assert peer.track is not None
    try:
        peer.track.send(np.full((240, 320, 3), 90, np.uint8))
        await peer.wait_for(lambda: peer.results)
        for i in range(3000):
            peer.send_control("not json" if i % 2 else {"ack": i})
        completion = await completion_of(peer)
        assert completion["termination_reason"] == "control_message_flood"
        errors = errors_of(peer)
        assert any("control messages a second" in e for e in errors), errors
        # Bounded: never thousands of error entries for thousands of bad messages.
        assert len(errors) <= 40, len(errors)
    finally:
        await peer.close()


async def test_8k_frames_are_dropped_with_one_clear_error(hostile_server, witness):
    peer = await connected_peer(hostile_server.url)
    assert peer.track is not None
    try:
        huge = np.zeros((4320, 7680, 3), np.uint8)
        for _ in range(3):
            peer.track.send(huge)
        small = np.full((240, 320, 3), 90, np.uint8)
        for _ in range(6):
            peer.track.send(small)

        def said_so() -> bool:
            return any("VISIONSTREAM_MAX_FRAME_PIXELS" in e for e in errors_of(peer))

        await peer.wait_for(said_so, timeout=90)
        sizes = {
            (r["video_metadata"].get("width"), r["video_metadata"].get("height"))
            for r in peer.results
            if r.get("video_metadata", {}).get("width")
        }
        assert (7680, 4320) not in sizes
    finally:
        await peer.close()


async def test_a_resolution_change_every_frame_is_served(hostile_server, witness):
    peer = await connected_peer(hostile_server.url)
    assert peer.track is not None
    try:
        sizes = [(320, 240), (640, 360), (480, 270), (256, 256)]
        sent_sizes: set[tuple[int, int]] = set()

        async def feed() -> None:
            # Every frame a new size, for as long as the test waits: realtime keeps only the
            # newest, so how many come back depends on the machine's load, not on the code.
            for i in itertools.count():
                width, height = sizes[i % len(sizes)]
                assert peer.track is not None
                peer.track.send(np.full((height, width, 3), 40 + i % 100, np.uint8))
                await peer.track.drained()

        feeder = asyncio.ensure_future(feed())
        try:
            await peer.wait_for(lambda: len(peer.results) >= 8, timeout=120)
            await peer.wait_for(lambda: len(peer.frames) >= 3, timeout=120)
        finally:
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)
        for result in peer.results:
            meta = result["video_metadata"]
            sent_sizes.add((meta.get("width"), meta.get("height")))
        assert len(sent_sizes) >= 2, sent_sizes  # the sizes really changed under the server
        assert errors_of(peer) == []
    finally:
        await peer.close()


async def test_an_upload_that_stalls_halfway_is_abandoned(hostile_server, witness):
    from streaming.protocol.upload import UPLOAD_HEADER

    peer = await connected_peer(
        hostile_server.url, video=False, upload=True, webrtc_realtime_processing=False
    )
    try:
        # Chunks 0..4 of 10, then nothing: the client hangs halfway.
        await peer.send_upload(UPLOAD_HEADER.pack(i, 10) + b"x" * 1000 for i in range(5))
        await completion_of(peer)
        errors = errors_of(peer)
        assert any("the upload stalled" in e for e in errors), errors
        # It asked for video but offered no video section: said, not an obscure 400.
        assert any("no video section" in e for e in errors), errors
        leftovers = [
            p for p in hostile_server.uploads.rglob("*") if p.is_file() and p.name != ".lock"
        ]
        assert leftovers == []
    finally:
        await peer.close()
