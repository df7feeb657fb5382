"""streaming.rtc: nothing changes on import, each install is explicit and scoped, a changed
aiortc is an error, and the marker-packet release works between two real aiortc peers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from aiortc import rtcrtpreceiver, rtcrtpsender, rtp
from aiortc.mediastreams import MediaStreamError

from streaming.rtc import RtcInstallError, encoder, jitter, releasing_on_marker, remb
from tests.support.peer import QueuedVideoTrack, loopback_peer

WAIT_S = 30.0


def run_python(code: str) -> str:
    """In a fresh interpreter: what these tests check is process-wide state."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_our_packages_changes_nothing_in_aiortc_or_aioice():
    out = run_python(
        """
        import aioice.ice
        from aiortc import rtcrtpreceiver, rtcrtpsender
        before = (rtcrtpreceiver.JitterBuffer, rtcrtpsender.get_encoder,
                  aioice.ice.get_host_addresses)
        import streaming, streaming.client, streaming.server.app, streaming.rtc, sources, sinks
        from streaming.server.app import create_app
        after = (rtcrtpreceiver.JitterBuffer, rtcrtpsender.get_encoder,
                 aioice.ice.get_host_addresses)
        print(all(a is b for a, b in zip(before, after)))
        """
    )
    assert out == "True"


def test_the_client_scope_makes_only_its_own_receivers_release_on_the_marker():
    out = run_python(
        """
        from aiortc import rtcrtpreceiver
        from streaming.rtc import releasing_on_marker
        from streaming.rtc.jitter import VideoJitterBuffer
        def kind():
            buffer = rtcrtpreceiver.JitterBuffer(capacity=512, is_video=True)
            return type(buffer).__name__
        with releasing_on_marker():
            inside = kind()
        print(inside, kind())
        """
    )
    assert out == "VideoJitterBuffer JitterBuffer"


def test_the_server_install_covers_every_receiver_and_sender_of_its_process():
    out = run_python(
        """
        import aioice.ice
        from aiortc import rtcrtpreceiver, rtcrtpsender
        from aiortc.rtcrtpparameters import RTCRtpCodecParameters
        from streaming.rtc import install_for_server
        from streaming.config import Settings
        from streaming.server.app import create_app
        from tests.support.media import video_frames
        install_for_server(["127.0.0.1"])
        create_app(Settings(ice_host_addresses=["127.0.0.1"], video_kbps_per_megapixel=1000))
        vp8 = RTCRtpCodecParameters(mimeType="video/VP8", clockRate=90000, payloadType=96)
        encoder = rtcrtpsender.get_encoder(vp8)
        encoder.target_bitrate = 1_500_000
        encoder.encode(video_frames(1, size=(640, 480))[0])
        print(type(rtcrtpreceiver.JitterBuffer(capacity=512, is_video=True)).__name__,
              type(encoder).__module__, encoder.codec.bit_rate,
              aioice.ice.get_host_addresses(True, True))
        """
    )
    # Installed twice (idempotent); the app's settings cap the bitrate by frame size.
    assert out == "VideoJitterBuffer streaming.rtc.encoder 307200 ['127.0.0.1']"


def test_an_aiortc_that_changed_shape_is_an_error_not_a_warning(monkeypatch):
    monkeypatch.setattr(rtcrtpreceiver, "JitterBuffer", lambda *a, **k: None)
    with pytest.raises(RtcInstallError, match="jitter buffer"):
        jitter.install(everywhere=False)
    monkeypatch.setattr(rtcrtpsender, "get_encoder", lambda codec: None)
    with pytest.raises(RtcInstallError, match="encoders"):
        encoder.install()


async def test_a_frame_arrives_on_its_own_marker_packet_between_real_peers():
    """aiortc's own buffer would hold this one frame until a next one came: none comes."""
    sender, receiver = loopback_peer(), loopback_peer()
    track = QueuedVideoTrack()
    sender.addTrack(track)
    received: asyncio.Queue = asyncio.Queue()

    def on_track(remote) -> None:
        async def read() -> None:
            try:
                while True:
                    received.put_nowait(await remote.recv())
            except MediaStreamError:
                pass

        tasks.append(asyncio.ensure_future(read()))

    tasks: list[asyncio.Future] = []
    receiver.on("track", on_track)
    try:
        await sender.setLocalDescription(await sender.createOffer())
        with releasing_on_marker():  # the receiver's buffer is made as the offer is applied
            await receiver.setRemoteDescription(sender.localDescription)
        await receiver.setLocalDescription(await receiver.createAnswer())
        await sender.setRemoteDescription(receiver.localDescription)
        track.send(np.full((96, 128, 3), 120, np.uint8))
        frame = await asyncio.wait_for(received.get(), WAIT_S)
        assert (frame.width, frame.height) == (128, 96)
    finally:
        await sender.close()
        await receiver.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_the_remb_ceiling_lowers_what_receivers_ask_clients_for(monkeypatch):
    monkeypatch.setattr(rtcrtpreceiver, "pack_remb_fci", rtp.pack_remb_fci)
    remb.install(1_000_000)
    remb.install(800_000)  # idempotent; the new ceiling
    assert rtp.unpack_remb_fci(rtcrtpreceiver.pack_remb_fci(5_000_000, [7])) == (800_000, [7])
    assert rtp.unpack_remb_fci(rtcrtpreceiver.pack_remb_fci(300_000, [7])) == (300_000, [7])
    remb.install(0)  # none: aiortc's estimate as it is
    assert rtp.unpack_remb_fci(rtcrtpreceiver.pack_remb_fci(5_000_000, [7]))[0] > 4_000_000
    monkeypatch.setattr(rtcrtpreceiver, "pack_remb_fci", lambda *a: b"")
    with pytest.raises(RtcInstallError, match="REMB"):
        remb.install(1)
