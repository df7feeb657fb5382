"""The camera URL schemes and how FFmpeg opens each: the one table of them for reading
(``kinds.CAMERA`` owns exactly these; ``LiveSource`` opens a URL as its scheme's entry says).
Masking a URL for display is ``sinks.masking``'s, which outbound video shares."""

from __future__ import annotations

from dataclasses import dataclass

from .demuxing import Demuxer

__all__ = ["CAMERA_SCHEMES", "Scheme", "scheme_for", "scheme_of"]


@dataclass(frozen=True)
class Scheme:
    """How a camera of one URL scheme is read."""

    demuxer: Demuxer | None = None
    """FFmpeg's format and options; None: decided by the URL (an HLS playlist's path) or,
    over HTTP, by the answer's content type."""
    http: bool = False
    """Asked over HTTP: its redirects refused, its content type sniffed, its Host kept."""
    relayed: bool = False
    """Read through a relay of its own (SRT: ``srt-live-transmit`` connects, by name, and
    hands MPEG-TS over UDP on loopback), which therefore gets no pinned address."""


_RTSP = Scheme(demuxer=(None, {"rtsp_transport": "tcp", "analyzeduration": "100000"}))
# No ``nobuffer``: it drops the probed packets, keyframe included, and the first frame then
# waits a whole GOP more (measured: 2.0 s to the first frame instead of 1.0 s).
_RTMP = Scheme(demuxer=("flv", {"rtmp_live": "live", "analyzeduration": "100000"}))
# A burst larger than the socket buffer is dropped, not fatal.
_MPEG_TS = ("mpegts", {"fifo_size": "1000000", "overrun_nonfatal": "1"})
_HTTP = Scheme(http=True)

CAMERA_SCHEMES: dict[str, Scheme] = {
    "rtsp": _RTSP,
    "rtsps": _RTSP,
    "http": _HTTP,
    "https": _HTTP,
    "rtmp": _RTMP,
    "rtmps": _RTMP,
    "udp": Scheme(demuxer=_MPEG_TS),
    "srt": Scheme(demuxer=_MPEG_TS, relayed=True),
}


def scheme_of(reference: str) -> str:
    """A URL's scheme in lower case; empty for a path or device."""
    scheme, separator, _ = reference.partition("://")
    return scheme.lower() if separator else ""


def scheme_for(url: str) -> Scheme:
    """How ``url`` is read (a scheme no camera has: FFmpeg's probe, as given)."""
    return CAMERA_SCHEMES.get(scheme_of(url), Scheme())
