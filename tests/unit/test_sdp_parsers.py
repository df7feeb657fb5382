"""What we read out of SDP ourselves (the codec an answer settled on, the candidate types a
description offers): exact on real descriptions, and never an exception on anything else."""

from __future__ import annotations

import asyncio

import pytest
from aiortc import RTCPeerConnection
from hypothesis import given
from hypothesis import strategies as st

from streaming.config import Settings
from streaming.egress import EgressPolicy
from streaming.errors import InvalidOffer
from streaming.rtc.candidates import CandidateScreen
from streaming.rtc.codecs import negotiated_video_codec, preferring
from streaming.rtc.ice import build_configuration, candidate_types, relay_problem

SDP_LINES = st.lists(
    st.one_of(
        st.text(max_size=40),
        st.sampled_from(["m=video 9 UDP/TLS/RTP/SAVPF 96", "m=video", "a=rtpmap:96 VP8/90000",
                         "a=rtpmap:96", "a=candidate:1 1 udp 1 127.0.0.1 9 typ", "m=audio 9 x 0",
                         "a=candidate:1 1 udp 1 127.0.0.1 9 typ relay"]),
    ),
    max_size=12,
)  # fmt: skip


@given(SDP_LINES)
def test_the_parsers_never_raise_on_any_text(lines):
    sdp = "\r\n".join(lines)
    codec = negotiated_video_codec(sdp)
    assert codec is None or any(line.startswith("a=rtpmap:") for line in lines)
    kinds = candidate_types(sdp)
    assert all(isinstance(kind, str) for kind in kinds)


def test_a_real_offer_with_h264_preferred_names_it_and_its_host_candidates():
    async def offer() -> str:
        pc = RTCPeerConnection(build_configuration([], []))
        transceiver = pc.addTransceiver("video")
        transceiver.setCodecPreferences(preferring("h264"))
        await pc.setLocalDescription(await pc.createOffer())
        sdp = pc.localDescription.sdp
        await pc.close()
        return sdp

    sdp = asyncio.run(offer())
    assert negotiated_video_codec(sdp) == "H264"
    assert candidate_types(sdp) == {"host"}
    assert preferring("auto") == []
    assert preferring("vp8")[0].mimeType == "video/VP8"


def test_relay_only_without_a_turn_server_says_so_and_all_is_never_a_problem():
    relay = build_configuration([], [], policy="relay")
    sdp = "v=0\r\nm=video 9 x 96\r\n"
    message = asyncio.run(relay_problem(relay, sdp))
    assert message is not None and "no TURN server" in message
    assert asyncio.run(relay_problem(build_configuration([], []), sdp)) is None
    with_relay = sdp + "a=candidate:1 1 udp 1 127.0.0.1 9 typ relay raddr 0.0.0.0 rport 0\r\n"
    assert asyncio.run(relay_problem(relay, with_relay)) is None


CANDIDATE_LINES = st.lists(
    st.one_of(
        st.text(max_size=40),
        st.builds("a=candidate:1 1 udp 1 {} 9 typ host".format,
                  st.one_of(st.ip_addresses().map(str), st.text(max_size=12))),
        st.sampled_from(["a=candidate:", "a=candidate:1 1 udp", "a=candidate:x y z w [::1] 9",
                         "m=application 9 UDP/DTLS/SCTP webrtc-datachannel"]),
    ),
    max_size=12,
)  # fmt: skip
SCREEN = CandidateScreen(EgressPolicy(["0.0.0.0/0", "::/0"]), limit=6)


@given(CANDIDATE_LINES, st.sampled_from(["127.0.0.1", "192.0.2.7", "unknown", ""]))
def test_screening_candidates_keeps_lines_in_order_or_says_why(lines, caller):
    """Whatever an offer holds, the screen returns some of its lines in their order, or a
    400 (too many, or none left); never another exception."""
    sdp = "\r\n".join(lines) + "\r\n"
    try:
        screened = SCREEN.screen(sdp, caller, "the offer")
    except InvalidOffer as exc:
        assert "ICE candidate" in str(exc)
        return
    kept = screened.splitlines()
    assert kept == [line for line in sdp.splitlines() if line in kept]
    assert all(line in kept for line in sdp.splitlines() if not line.startswith("a=candidate:"))


def test_a_callers_own_loopback_is_kept_and_metadata_addresses_are_not():
    sdp = ("v=0\r\nm=application 9 x\r\na=candidate:1 1 udp 1 127.0.0.1 9 typ host\r\n"
           "a=candidate:2 1 udp 1 169.254.169.254 9 typ host\r\n"
           "a=candidate:3 1 udp 1 host.local 9 typ host\r\n")  # fmt: skip
    kept = SCREEN.screen(sdp, "127.0.0.1", "the offer")
    assert "127.0.0.1" in kept and "host.local" in kept and "169.254.169.254" not in kept
    remote = SCREEN.screen(sdp, "198.51.100.4", "the offer")  # not this machine's loopback
    assert "127.0.0.1" not in remote and "host.local" in remote


def test_peers_are_checked_as_peers_not_against_the_cameras_network():
    # The operator lists only the camera network; a viewer elsewhere still connects.
    settings = Settings(allowed_networks="127.0.0.9/32")
    sdp = ("v=0\r\nm=application 9 x\r\na=candidate:1 1 udp 1 198.51.100.7 9 typ host\r\n"
           "a=candidate:2 1 udp 1 127.0.0.1 9 typ host\r\n"
           "a=candidate:3 1 udp 1 224.0.0.251 9 typ host\r\n")  # fmt: skip
    kept = CandidateScreen.of(settings).screen(sdp, "198.51.100.7", "the offer")
    assert "198.51.100.7" in kept
    assert "127.0.0.1" not in kept and "224.0.0.251" not in kept  # never, from a remote caller
    # The peers' own list, where the operator sets one, names itself when it refuses.
    only = CandidateScreen.of(Settings(peer_networks="203.0.113.0/24"))
    with pytest.raises(InvalidOffer, match="not in VISIONSTREAM_PEER_NETWORKS"):
        only.screen(sdp.replace("127.0.0.1", "198.51.100.8"), "198.51.100.7", "the offer")
