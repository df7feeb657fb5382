"""The restream outputs, one entry each: what a status and the stream page list for a source.
A new protocol is its module in this package and one entry here (plus its route or server)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["OUTPUTS", "Output"]


@dataclass(frozen=True)
class Output:
    name: str
    scheme: Literal["http", "rtsp"]
    path: str
    """After the source's base: ``/restream/<pipeline>/<source>`` over HTTP,
    ``/<pipeline>/<source>`` over RTSP."""
    players: str


OUTPUTS: tuple[Output, ...] = (
    Output("rtsp", "rtsp", "", "VLC, NVRs, Home Assistant's stream, ffmpeg, GStreamer"),
    Output("hls", "http", "/index.m3u8", "Safari, hls.js, TVs, Home Assistant's stream"),
    Output("mjpeg", "http", "/mjpeg", "browsers' <img>, Home Assistant's MJPEG camera"),
    Output("snapshot", "http", "/snapshot.jpg", "Home Assistant picture cards, any HTTP client"),
)
