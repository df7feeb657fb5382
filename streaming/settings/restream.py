"""Restreaming: each pipeline source's annotated picture for the players people already have
(RTSP, HLS, MJPEG, a snapshot), and what it may cost."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings

__all__ = ["RestreamSettings"]


class RestreamSettings(BaseSettings):
    """Restreaming: a pipeline source's annotated picture at URLs for RTSP, HLS, MJPEG and
    snapshot players. One encoder per source, running only while someone watches. A part of
    ``Settings`` (``VISIONSTREAM_<NAME>``)."""

    restream_fps: float = Field(default=10.0, gt=0, le=60)
    """Frames a second of every restream, at most (the pipeline's own rate when lower)."""
    restream_max_width: int = Field(default=1280, ge=16, le=7680)
    """Widest restreamed picture: a larger one is scaled down, keeping its shape."""
    restream_max_height: int = Field(default=720, ge=16, le=4320)
    """Tallest restreamed picture: a larger one is scaled down, keeping its shape."""
    restream_encoder: Literal["libx264", "h264_nvenc", "h264_vaapi", "h264_qsv"] = "libx264"
    """The H.264 encoder (FFmpeg's name). A hardware one that does not open falls back to
    libx264 (``ultrafast``, ``zerolatency``), said in one log line."""
    restream_kbps: int = Field(default=2000, ge=100, le=50000)
    """The H.264 bitrate of every restream."""
    restream_keyframe_s: float = Field(default=1.0, ge=0.2, le=10)
    """Seconds between keyframes: the length of an HLS segment, and the longest a new
    player of a running restream waits for its first picture."""
    restream_hls_segments: int = Field(default=4, ge=2, le=30)
    """Segments an HLS playlist lists (the newest)."""
    restream_hls_idle_s: float = Field(default=30.0, gt=0)
    """An HLS restream nobody has asked for a playlist or segment of for this long stops."""
    restream_jpeg_quality: int = Field(default=75, ge=1, le=100)
    """Quality of MJPEG frames and snapshots."""
    restream_rtsp_port: int | None = Field(default=None, ge=1, le=65535)
    """Where the RTSP server listens (on ``host``); None: no RTSP server. RTP goes over the
    RTSP connection (TCP); players asking for UDP are told so and retry over TCP."""
    restream_stall_s: float = Field(default=10.0, gt=0)
    """A player that has taken nothing for this long (its connection full) is dropped; the
    others never wait for it."""
    restream_max_viewers: int = Field(default=32, ge=1)
    """Players of one source at once (RTSP, MJPEG; HLS counts once); more are answered 503."""
    restream_push_max_backoff_s: float = Field(default=5.0, gt=0, le=300)
    """Longest wait between two tries to reach a push target that went away (the waits
    start at half a second and double)."""
    restream_public_url: str | None = None
    """The server as players reach it (``https://nvr.example:9001``), for the restream URLs
    the status lists; None: the address each request came to. Its host is the RTSP URLs'."""
    restream_token_secret: SecretStr | None = None
    """Signs the tokens in restream URLs (players that cannot send a header). None: a
    random one, kept in ``data_dir`` so URLs outlive restarts. Changing it revokes them all."""
    restream_token_ttl_s: int = Field(default=7 * 86400, ge=60)
    """How long a restream URL's token is good for, at most (a caller may ask for less)."""
