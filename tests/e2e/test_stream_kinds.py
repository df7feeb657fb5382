"""Streams beyond RTSP and MJPEG, each from a real server on loopback: RTMP (nginx's RTMP
module), HLS (a live playlist over HTTP) and MPEG-TS over UDP; read by LiveSource, through a
publisher's death and return, and by a pipeline in the real server."""

from __future__ import annotations

import pytest

from sources import SourceError
from sources.live import LiveSource
from tests.conftest import DETECT_SPEC
from tests.e2e.test_live_source import Reader
from tests.support.server import ServerProcess, wait_for
from tests.support.streams import HLSServer, PublishedStream

pytestmark = pytest.mark.e2e

KINDS = ["rtmp", "hls", "udp"]


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
        assert lost.state == "reconnecting" and lost.last_error.startswith(f"lost {stream.url}")
        stream.publisher.start()
        before = lost.frames
        back = reader.source.wait_for(lambda s: s.frames > before + 5, timeout=60)
        assert back.state == "streaming" and back.reconnects >= 1
    finally:
        reader.close()


def test_srt_is_refused_with_the_relay_advice():
    with pytest.raises(SourceError, match=r"built without libsrt.*srt-live-transmit"):
        LiveSource("srt://127.0.0.1:9000")


@pytest.fixture(scope="module")
def server():
    process = ServerProcess()
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.mark.parametrize("kind", ["rtmp", "udp"])
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
            assert source["source_reference"] == stream.url
            assert source["stats"]["state"] == "streaming"
        finally:
            assert server.post(f"/inference_pipelines/{pipeline_id}/terminate").is_success


def test_a_pipeline_refuses_srt_with_the_relay_advice(server):
    response = server.start_pipeline("srt://127.0.0.1:9000", DETECT_SPEC)
    assert response.status_code == 400
    assert "libsrt" in response.json()["message"]


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
