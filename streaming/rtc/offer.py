"""A caller's SDP offer, from text to answer: the checks before aiortc sees it, applying it
and making the complete answer, and the process-wide registry of the peer connections made.

Every server-side peer connection (a session's, a WHIP publisher's, a WHEP player's) is made
through here, so the checks and the error each failure gets are the same everywhere.
"""

from __future__ import annotations

import asyncio
import weakref

from aiortc import MediaStreamTrack, RTCConfiguration, RTCPeerConnection, RTCSessionDescription

from ..errors import InvalidOffer, RelayUnavailable, UpstreamTimeout
from .ice import relay_problem

__all__ = [
    "MAX_MEDIA_SECTIONS",
    "answer_offer",
    "check_offer_sdp",
    "is_sent",
    "open_peer_connections",
    "track_peer_connection",
]


# A session uses a video section, the data channel and perhaps an upload channel (which
# shares the data section); browsers add audio. Far above that is not a client of ours.
MAX_MEDIA_SECTIONS = 8


# Every server peer connection this process made, for ``open_peer_connections``; weak, so
# it keeps none alive.
_peer_connections: weakref.WeakSet[RTCPeerConnection] = weakref.WeakSet()


def track_peer_connection(pc: RTCPeerConnection) -> None:
    """Counted by ``open_peer_connections`` until closed (a WHIP publisher's, say)."""
    _peer_connections.add(pc)


def open_peer_connections() -> int:
    """Server peer connections not closed yet (a leak shows here and in the fds)."""
    return sum(pc.connectionState != "closed" for pc in list(_peer_connections))


def check_offer_sdp(sdp: str) -> None:
    """Reject what is plainly not an SDP offer before aiortc sees it.

    aiortc parses leniently: text that is not SDP at all yields an empty description and an
    obscure error later, so the basic shape (RFC 8866: v=0 first, at least one m= section)
    is checked here to give the caller a precise message.
    """
    lines = sdp.strip().splitlines()
    if not lines or lines[0].strip() != "v=0":
        raise InvalidOffer("webrtc_offer.sdp is not SDP: it must start with 'v=0'")
    sections = sum(line.startswith("m=") for line in lines)
    if not sections:
        raise InvalidOffer("webrtc_offer.sdp has no media or data-channel section (m=)")
    if sections > MAX_MEDIA_SECTIONS:
        # aiortc would build a transceiver (and its tasks) for each: bounded before it sees it.
        raise InvalidOffer(
            f"webrtc_offer.sdp has {sections} media sections; at most {MAX_MEDIA_SECTIONS} "
            "are accepted (a session needs a video and a data-channel section)"
        )


async def answer_offer(
    pc: RTCPeerConnection,
    sdp: str,
    ice: RTCConfiguration,
    gathering_timeout_s: float,
    named: str,
) -> str:
    """Apply an offer (``named`` in errors) and make the complete answer (every candidate
    gathered): 400 for an offer aiortc cannot take, 504 when gathering outlasts its timeout,
    502 when a relay-only peer got no relay (saying why)."""
    try:
        await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
    except Exception as exc:
        raise InvalidOffer(f"{named} is not a valid SDP offer: {exc}") from None
    try:
        await asyncio.wait_for(pc.setLocalDescription(await pc.createAnswer()), gathering_timeout_s)
    except TimeoutError:
        raise UpstreamTimeout("ICE gathering did not complete in time") from None
    except Exception as exc:
        raise InvalidOffer(f"cannot answer this offer: {exc}") from None
    if problem := await relay_problem(ice, pc.localDescription.sdp):
        raise RelayUnavailable(problem)
    return str(pc.localDescription.sdp)


def is_sent(pc: RTCPeerConnection, track: MediaStreamTrack) -> bool:
    """Whether the answer sends ``track`` (a client that receives no video never pulls it)."""
    return any(
        transceiver.sender.track is track
        and transceiver.currentDirection in ("sendrecv", "sendonly")
        for transceiver in pc.getTransceivers()
    )
