"""Which codec the returned video uses: the client's preference unless the server is set to
prefer one the offer has; H.264 and VP8 both carry every frame and its stamp."""

from __future__ import annotations

import pytest

from sources import decode_stamp
from streaming import Client, StreamConfig
from tests.conftest import DETECT_SPEC
from tests.e2e.test_client import synthetic
from tests.support.server import running_server

pytestmark = pytest.mark.e2e

FRAMES = 20


def stream(url: str, codec: str | None) -> tuple[str | None, list]:
    config = StreamConfig(
        stream_output=["annotated"], data_output=["predictions"], realtime_processing=False,
        video_codec=codec,
    )  # fmt: skip
    session = Client(url).webrtc.stream(synthetic(FRAMES), workflow=DETECT_SPEC, config=config)
    with session:
        results = list(session.results())
        return session.video_codec, results


@pytest.mark.parametrize("codec", ["h264", "vp8"])
def test_the_returned_video_follows_the_clients_preference(server, codec):
    negotiated, results = stream(server.url, codec)
    assert negotiated == codec.upper()
    assert len(results) >= FRAMES - 2  # the connection may eat the very first keyframe
    stamps = [decode_stamp(frame) for frame, _, _ in results]
    readable = [s for s in stamps if s is not None]
    assert len(readable) >= len(results) - 3  # decoded frames, stamps intact
    assert all("predictions" in data for _, data, _ in results)
    line = next(line for line in server.lines if f"connected ({codec.upper()})" in line)
    assert "session " in line


@pytest.mark.parametrize(("server_prefers", "client_prefers"), [("h264", None), ("vp8", "h264")])
def test_a_server_set_to_prefer_a_codec_uses_it_when_the_offer_has_it(
    server_prefers, client_prefers
):
    with running_server(video_codec=server_prefers) as preferring:
        negotiated, results = stream(preferring.url, client_prefers)
    assert negotiated == server_prefers.upper()
    assert len(results) >= FRAMES - 2
