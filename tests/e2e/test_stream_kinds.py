"""Streams beyond RTSP and MJPEG, each from a real server on loopback: RTMP (nginx's RTMP
module), HLS (a live playlist over HTTP), MPEG-TS over UDP and SRT (srt-live-transmit as the
listener or calling us); read by LiveSource, through a publisher's death and return, and by a
pipeline in the real server."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from sources import SourceError, mask_url
from sources.live import LiveSource
from tests.conftest import DETECT_SPEC
from tests.e2e.test_live_source import Reader
from tests.support.server import ServerProcess, free_udp_port, wait_for
from tests.support.streams import HLSServer, PublishedStream

pytestmark = pytest.mark.e2e

# srt-listener: the sender calls us (mode=listener), the way OBS pushes to a server.
KINDS = ["rtmp", "hls", "udp", "srt", "srt-listener"]


@pytest.fixture(params=KINDS)
def stream(request):
    with PublishedStream(request.param) as published:
        yield published


def test_reads_stamped_frames_in_order(stream):
    reader = Reader(LiveSource(stream.url))
    try:
        stats = reader.source.wait_for(lambda s: s.frames >= 20, timeout=30)
        assert stats.state == "streaming" and stats.disconnects == 0
        indices = [index for _, index in reader.frames if index is not None]
        # Every frame decodes with its stamp intact, in the order sent, none repeated.
        assert len(indices) == len(reader.frames) and indices == sorted(set(indices))
    finally:
        reader.close()
    assert reader.source.stats().state == "closed"


def test_a_killed_publisher_is_a_disconnect_and_frames_flow_again_when_it_returns(stream):
    reader = Reader(LiveSource(stream.url, read_timeout=2.0, max_backoff=1.0))
    try:
        reader.source.wait_for(lambda s: s.frames >= 10, timeout=30)
        stream.publisher.kill()
        lost = reader.source.wait_for(lambda s: s.disconnects >= 1, timeout=30)
        assert lost.state == "reconnecting" and lost.last_error.startswith(
            f"lost {mask_url(stream.url)}"
        )
        stream.publisher.start()
        before = lost.frames
        back = reader.source.wait_for(lambda s: s.frames > before + 5, timeout=60)
        assert back.state == "streaming" and back.reconnects >= 1
    finally:
        reader.close()


def test_srt_without_its_relay_installed_is_refused_saying_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without srt-tools
    with pytest.raises(SourceError, match=r"needs srt-live-transmit.*apt install srt-tools"):
        LiveSource("srt://127.0.0.1:9000")


def test_an_srt_sender_refusing_our_passphrase_says_so_and_the_secret_stays_hidden():
    with PublishedStream("srt", passphrase="the-right-one-42") as stream:
        wrong = stream.url.replace("the-right-one-42", "a-wrong-one-17")
        reader = Reader(LiveSource(wrong, read_timeout=2.0, max_backoff=0.5))
        try:
            stats = reader.source.wait_for(
                lambda s: "Incorrect passphrase" in (s.last_error or ""), timeout=30
            )
            assert stats.last_error.startswith(f"cannot connect to {stats.url}: SRT connection")
            assert "a-wrong-one-17" not in str(stats) and "passphrase=***" in stats.url
            assert stats.frames == 0
        finally:
            reader.close()
        reader = Reader(LiveSource(stream.url))
        try:
            reader.source.wait_for(lambda s: s.frames >= 5, timeout=30)
        finally:
            reader.close()
    assert not _relays(), "the relay outlived its closed source"


def test_an_srt_address_nobody_answers_is_a_failed_attempt_saying_so():
    nobody = f"srt://127.0.0.1:{free_udp_port()}"
    reader = Reader(LiveSource(nobody, read_timeout=1.0, max_backoff=0.5))
    try:
        stats = reader.source.wait_for(lambda s: s.failed_attempts >= 2, timeout=30)
        # Whichever ends first: our wait for the connection, or the relay's own attempt.
        assert stats.last_error in (
            f"cannot connect to {nobody}: no SRT connection within 1 s",
            f"cannot connect to {nobody}: SRT connection failed or ended: no answer",
        )
        assert stats.frames == 0
    finally:
        reader.close()
    assert not _relays(nobody)


def _relays(url: str = "") -> list[int]:
    """Our SRT relays still running (zombies count as gone): srt-live-transmit ``-a no``."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
            running = (proc / "stat").read_text().rpartition(")")[2].split()[0] != "Z"
        except OSError:
            continue  # ended while we looked
        ours = command[:3] == [b"srt-live-transmit", b"-a", b"no"]
        if ours and running and url.encode() in b" ".join(command):
            found.append(int(proc.name))
    return found


@pytest.fixture(scope="module")
def server():
    process = ServerProcess()
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.mark.parametrize("kind", ["rtmp", "udp", "srt"])
def test_a_pipeline_reads_the_stream(server, kind):
    with PublishedStream(kind) as stream:
        response = server.start_pipeline(stream.url, DETECT_SPEC)
        assert response.status_code == 200, response.text
        pipeline_id = response.json()["context"]["pipeline_id"]
        try:
            result = wait_for(lambda: server.fresh_result(pipeline_id), 60, "a result")
            assert "predictions" in result["outputs"][0]
            report = server.get(f"/inference_pipelines/{pipeline_id}/status").json()["report"]
            (source,) = report["sources_metadata"]
            # As every URL is shown: an RTMP stream key masked (rtmp://host/live/***).
            assert source["source_reference"] == mask_url(stream.url)
            assert source["stats"]["state"] == "streaming"
        finally:
            assert server.post(f"/inference_pipelines/{pipeline_id}/terminate").is_success


def test_a_server_killed_mid_stream_leaves_no_srt_relay_behind():
    with PublishedStream("srt") as stream:
        process = ServerProcess()
        try:
            process.wait_ready()
            response = process.start_pipeline(stream.url, DETECT_SPEC)
            assert response.status_code == 200, response.text
            pipeline_id = response.json()["context"]["pipeline_id"]
            wait_for(lambda: process.fresh_result(pipeline_id), 60, "a result")
            assert _relays(stream.url), "no relay while the pipeline reads SRT"
            os.kill(process.process.pid, signal.SIGKILL)
            wait_for(lambda: not _relays(stream.url), 30, "the relay to die with the server")
        finally:
            process.stop()


def test_an_http_page_that_is_no_stream_fails_with_ffmpegs_reason(tmp_path):
    (tmp_path / "index.html").write_text("<html>not a camera</html>")
    page = HLSServer(tmp_path)
    source = LiveSource(page.url("index.html"), read_timeout=2.0, max_backoff=0.5)
    reader = Reader(source)
    try:
        stats = source.wait_for(lambda s: s.failed_attempts >= 2, timeout=30)
        assert stats.frames == 0 and stats.last_error.startswith(f"cannot connect to {stats.url}")
    finally:
        reader.close()
        page.close()
