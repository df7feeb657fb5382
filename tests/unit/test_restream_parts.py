"""The restream's parts on their own: tokens, sizes, the shared encoder's subscriptions and
HLS segments, and the RTSP server under requests nobody should send."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sinks.restream import HlsStream, Restream, RestreamConfig, RtspRefused, RtspServer
from sinks.restream.encoding import fitted_size
from streaming.config import Settings
from streaming.errors import Unauthorized
from streaming.viewer_tokens import ViewerTokens


def test_a_token_is_for_one_source_and_expires(tmp_path):
    tokens = ViewerTokens.for_settings(Settings(data_dir=tmp_path))
    token, expires = tokens.issue("p1", 0, 120)
    assert expires - time.time() == pytest.approx(120, abs=2)
    tokens.check(token, "p1", 0)
    for pipeline_id, source_id in (("p1", 1), ("p2", 0)):
        with pytest.raises(Unauthorized, match="another source"):
            tokens.check(token, pipeline_id, source_id)
    body, _, signature = token.partition(".")
    with pytest.raises(Unauthorized, match="not this server's"):
        tokens.check(f"{body}.{signature[:-2]}AA", "p1", 0)
    with pytest.raises(Unauthorized, match="malformed"):
        tokens.check("!!!", "p1", 0)
    expired = ViewerTokens(tokens.secret, -10)
    with pytest.raises(Unauthorized, match="expired"):
        tokens.check(expired.issue("p1", 0)[0], "p1", 0)
    # Kept in the data directory, the user's alone: a restarted server accepts its URLs.
    assert (tmp_path / "restream-token.key").stat().st_mode & 0o077 == 0
    ViewerTokens.for_settings(Settings(data_dir=tmp_path)).check(token, "p1", 0)
    other = ViewerTokens.for_settings(Settings(data_dir=tmp_path / "elsewhere"))
    with pytest.raises(Unauthorized):
        other.check(token, "p1", 0)


def test_a_picture_is_scaled_down_into_the_bounds_keeping_its_shape_and_even_sizes():
    assert fitted_size(1920, 1080, 1280, 720) == (1280, 720)
    assert fitted_size(640, 480, 1280, 720) == (640, 480)  # never up
    assert fitted_size(1000, 1000, 1280, 720) == (720, 720)
    assert fitted_size(1281, 721, 1280, 720) == (1278, 720)


def _picture() -> np.ndarray:
    image = np.full((360, 640, 3), 90, np.uint8)
    image[100:200, 200:400] = (255, 0, 255)
    return image


async def _offer(restream: Restream, frames: int, every_s: float = 0.02) -> None:
    picture = _picture()
    for _ in range(frames):
        restream.offer(lambda: picture)
        await asyncio.sleep(every_s)  # a camera's frame interval


def test_players_share_one_encoder_start_on_a_keyframe_and_a_stalled_one_is_dropped():
    async def main() -> None:
        active: list[bool] = []
        restream = Restream("t", RestreamConfig(fps=25, stall_s=0.2), active.append)
        reading = restream.subscribe("h264")
        stalled = restream.subscribe("h264")
        feeding = asyncio.create_task(_offer(restream, 30))
        taken: list = []
        arrived = asyncio.Condition()

        async def read() -> None:
            while (frame := await reading.next()) is not None:
                async with arrived:
                    taken.append(frame)
                    arrived.notify_all()

        reader = asyncio.create_task(read())
        await feeding
        async with asyncio.timeout(10), arrived:
            await arrived.wait_for(lambda: len(taken) >= restream.stats()["encoded"])
        reader.cancel()
        assert taken[0].keyframe and taken[0].data.startswith(b"\x00\x00\x00\x01")
        # 0.2 s at 25 fps: five frames never taken, and the player is dropped; the other
        # took every frame.
        assert stalled.reason is not None and stalled.reason.startswith("dropped")
        assert not reading.closed and len(taken) == restream.stats()["encoded"] >= 10
        stats = restream.stats()
        assert stats["encoders_started"] == 1 and stats["dropped_players"] == 1
        reading.close()
        assert active == [True, False] and not restream.encoding

    asyncio.run(main())


def test_hls_cuts_segments_at_keyframes_and_lists_the_newest():
    async def main() -> None:
        restream = Restream("t", RestreamConfig(fps=25, keyframe_s=0.2))
        hls = HlsStream(restream, segments=3, idle_s=5)
        feeding = asyncio.create_task(_offer(restream, 60))
        hls.touch()
        playlist = await hls.playlist("token=x", 10)
        assert playlist is not None and playlist.startswith("#EXTM3U")
        names = [line for line in playlist.splitlines() if line.startswith("segment-")]
        assert len(names) == 3 and all(name.endswith(".ts?token=x") for name in names)
        sequence = int(names[0].split("-")[1].split(".")[0])
        segment = hls.segment(sequence)
        assert segment is not None and segment[0] == 0x47  # MPEG-TS sync byte
        await feeding
        await hls.close()

    asyncio.run(main())


async def _refuse(path: str, query: str) -> Restream:
    raise RtspRefused(404, f"no {path}")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=12000))
def test_the_rtsp_server_answers_or_hangs_up_on_anything_and_keeps_serving(garbage):
    async def main() -> None:
        server = RtspServer("127.0.0.1", 0, _refuse, stall_s=1, send_buffer=65536)
        await server.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(garbage)
            writer.write_eof()
            async with asyncio.timeout(10):
                await reader.read()  # an answer or nothing, then the server hangs up
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"OPTIONS rtsp://127.0.0.1/x RTSP/1.0\r\nCSeq: 7\r\n\r\n")
            async with asyncio.timeout(10):
                answer = await reader.readuntil(b"\r\n\r\n")
            assert answer.startswith(b"RTSP/1.0 200 OK") and b"CSeq: 7" in answer
            writer.close()
        finally:
            await server.close()

    asyncio.run(main())


def test_a_cameras_length_prefixed_h264_leaves_as_annex_b_with_its_parameter_sets():
    from sinks.restream.passthrough import _annex_b, _parameter_sets

    sps, pps, idr = b"\x67\x42\xc0\x1f\xda", b"\x68\xce\x3c\x80", b"\x65\x88\x84\x00\x10"
    avcc = bytes([1, 0x42, 0xC0, 0x1F, 0xFF, 0xE1, 0, len(sps)]) + sps + bytes([1, 0, len(pps)])
    headers, length_size = _parameter_sets(avcc + pps)
    assert length_size == 4
    assert headers == b"\x00\x00\x00\x01" + sps + b"\x00\x00\x00\x01" + pps
    prefixed = len(idr).to_bytes(4, "big") + idr + len(sps).to_bytes(4, "big") + sps
    assert _annex_b(prefixed, 4) == b"\x00\x00\x00\x01" + idr + b"\x00\x00\x00\x01" + sps
    annex_b = b"\x00\x00\x00\x01" + sps
    assert _parameter_sets(annex_b) == (annex_b, 0)  # RTSP's: as it is


def test_a_hardware_encoder_that_does_not_open_falls_back_to_libx264_saying_so(caplog):
    from sinks.restream.encoding import H264Encoding

    encoder = H264Encoding("h264_vaapi", 64, 64, 10, 500, 1.0)  # no VA-API device here
    assert encoder.name == "libx264"
    said = [r.getMessage() for r in caplog.records if "h264_vaapi" in r.getMessage()]
    assert len(said) == 1 and "using libx264" in said[0]
    assert encoder.encode(np.zeros((64, 64, 3), np.uint8), 0)[0].keyframe
