"""Hidden frames after each returned frame: invisible to the decoder, one tick later, and
sent only to peers that need them."""

from __future__ import annotations

import asyncio
from fractions import Fraction

import av
import numpy as np
import pytest
from aiortc import RTCRtpSender
from aiortc.codecs.vpx import Vp8Encoder, vp8_depayload
from aiortc.mediastreams import MediaStreamError

from streaming.peer.processor import wire_timestamp
from streaming.peer.tracks import OutboundVideoTrack
from streaming.rtc.release import HIDDEN_VP8_FRAME, hidden_frame_after, releases_frames
from tests.support.media import video_frames
from tests.support.peer import loopback_peer

# Chrome's offer starts like this (its origin: a 64-bit session id, version 2, 127.0.0.1).
CHROME_OFFER = "v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"


def test_a_stream_decodes_bit_for_bit_the_same_with_hidden_frames_in_it():
    encoder = Vp8Encoder()  # aiortc's, as the server's sender uses it
    plain = av.CodecContext.create("libvpx", "r")  # what aiortc's receiver decodes with
    mixed = av.CodecContext.create("libvpx", "r")
    for i, frame in enumerate(video_frames(60, noise=6)):
        if i == 30:
            encoder.target_bitrate = 300_000  # a REMB change: aiortc reopens its encoder
        payloads, _ = encoder.encode(frame, force_keyframe=i == 45)  # a PLI's keyframe
        data = b"".join(vp8_depayload(p) for p in payloads)
        expected = plain.decode(av.Packet(data))
        got = mixed.decode(av.Packet(data))
        assert len(got) == len(expected) == 1
        assert np.array_equal(got[0].to_ndarray(), expected[0].to_ndarray()), f"frame {i}"
        assert mixed.decode(av.Packet(HIDDEN_VP8_FRAME)) == []  # shows nothing


def test_the_hidden_frame_is_one_rtp_tick_after_its_frame():
    encoder = Vp8Encoder()
    for frame in video_frames(3):
        # The server hands aiortc its frames on a microsecond clock (see wire_timestamp).
        frame.pts, frame.time_base = wire_timestamp(frame.pts, frame.time_base)
        _, timestamp = encoder.encode(frame)
        hidden = hidden_frame_after(frame)
        assert hidden is not None and bytes(hidden) == HIDDEN_VP8_FRAME
        payloads, hidden_timestamp = encoder.pack(hidden)
        assert hidden_timestamp == timestamp + 1
        assert len(payloads) == 1  # one small packet


def test_a_frame_without_timing_gets_no_hidden_frame():
    assert hidden_frame_after(av.VideoFrame(16, 16, "yuv420p")) is None


async def negotiate(codec: str) -> tuple[str, str]:
    """A real aiortc offer and the answer an aiortc server gives it."""
    client, server = loopback_peer(), loopback_peer()
    try:
        transceiver = client.addTransceiver("video", direction="sendrecv")
        preferred = [c for c in RTCRtpSender.getCapabilities("video").codecs if codec in c.mimeType]
        transceiver.setCodecPreferences(preferred)
        await client.setLocalDescription(await client.createOffer())
        await server.setRemoteDescription(client.localDescription)
        for t in server.getTransceivers():
            t.direction = "sendrecv"
        await server.setLocalDescription(await server.createAnswer())
        return client.localDescription.sdp, server.localDescription.sdp
    finally:
        await client.close()
        await server.close()


def test_auto_sends_them_to_aiortc_peers_but_not_to_browsers_or_our_client():
    offer, answer = asyncio.run(negotiate("VP8"))
    assert releases_frames("auto", offer, answer, "python-requests/2.32.3")  # inference-sdk
    assert not releases_frames("auto", offer, answer, "visionstream/0.1.0")  # ours releases
    assert not releases_frames("auto", CHROME_OFFER, answer, "Mozilla/5.0 Chrome/131")
    assert releases_frames("always", CHROME_OFFER, answer, "Mozilla/5.0")
    assert not releases_frames("never", offer, answer, "python-requests/2.32.3")


def test_never_with_h264_which_has_no_hidden_frames():
    offer, answer = asyncio.run(negotiate("H264"))
    assert not releases_frames("always", offer, answer, "")


def frame_at(pts: int) -> av.VideoFrame:
    frame = av.VideoFrame(16, 16, "yuv420p")
    frame.pts, frame.time_base = pts, Fraction(1, 90000)
    return frame


def test_the_track_follows_each_frame_with_a_hidden_one_unless_the_next_is_waiting():
    async def scenario() -> list:
        track = OutboundVideoTrack("wait", 4)
        track.release_held_frames = True
        await track.publish(frame_at(3000))
        out = [await track.recv(), await track.recv()]  # the frame, then its hidden frame
        await track.publish(frame_at(6000))
        await track.publish(frame_at(9000))
        out += [await track.recv(), await track.recv(), await track.recv()]
        await track.finish()
        with pytest.raises(MediaStreamError):  # no visible copy at the end: it is released
            await track.recv()
        return out

    kinds = [
        ("packet", p.pts) if isinstance(p, av.Packet) else ("frame", p.pts)
        for p in asyncio.run(scenario())
    ]
    assert kinds == [("frame", 3000), ("packet", 3001), ("frame", 6000), ("frame", 9000),
                     ("packet", 9001)]  # fmt: skip
