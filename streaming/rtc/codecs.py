"""Which video codec a connection uses: a preference to set on a transceiver, and what a
description settled on. aiortc answers with the offer's order of the codecs both sides have,
so a preference set on the answering side's transceiver (before the offer is applied) is how
a server picks one the offer also has."""

from __future__ import annotations

from typing import Literal

from aiortc import MediaStreamTrack, RTCPeerConnection, RTCRtpCodecCapability, RTCRtpSender

__all__ = ["VideoCodec", "add_video_track", "negotiated_video_codec", "preferring"]

VideoCodec = Literal["auto", "vp8", "h264"]

_MIME = {"vp8": "video/vp8", "h264": "video/h264"}


def preferring(codec: VideoCodec) -> list[RTCRtpCodecCapability]:
    """aiortc's video codecs with ``codec`` first, for ``setCodecPreferences``; empty for
    ``auto`` (the offer's order)."""
    if codec == "auto":
        return []
    codecs = RTCRtpSender.getCapabilities("video").codecs
    first = [c for c in codecs if c.mimeType.lower() == _MIME[codec]]
    return first + [c for c in codecs if c not in first]


def add_video_track(pc: RTCPeerConnection, track: MediaStreamTrack, codec: VideoCodec) -> None:
    """Send ``track`` on ``pc`` preferring ``codec``: before the offer is applied, so it binds
    to the offer's video m-line with the codec the server prefers (the offer's order if auto)."""
    sender = pc.addTrack(track)
    if preferred := preferring(codec):
        for transceiver in pc.getTransceivers():
            if transceiver.sender is sender:
                transceiver.setCodecPreferences(preferred)


def negotiated_video_codec(sdp: str) -> str | None:
    """The codec of a description's first video section (``VP8``, ``H264``), None without
    one: an answer's first format is what both sides send."""
    lines = sdp.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("m=video"):
            fields = line.split()
            if len(fields) < 4:
                return None
            payload_type = fields[3]
            for rtpmap in lines[i + 1 :]:
                if rtpmap.startswith("m="):
                    return None
                if rtpmap.startswith(f"a=rtpmap:{payload_type} "):
                    return rtpmap.split()[1].split("/")[0]
            return None
    return None
