"""Outbound live video: each pipeline source's annotated picture for the players people
already have. ``restream`` (one encoder per source, shared by every player and protocol,
running only while someone plays), ``encoding`` (H.264 and JPEG), one module per protocol
(``hls``, ``mjpeg``, ``rtsp``) and ``outputs`` (the table of them)."""

from .hls import HlsStream
from .mjpeg import mjpeg_parts, snapshot
from .outputs import OUTPUTS, Output
from .restream import Restream, RestreamConfig, RestreamFull, Subscription, idle_stats
from .rtsp import RtspRefused, RtspServer

__all__ = [
    "OUTPUTS",
    "HlsStream",
    "Output",
    "Restream",
    "RestreamConfig",
    "RestreamFull",
    "RtspRefused",
    "RtspServer",
    "Subscription",
    "idle_stats",
    "mjpeg_parts",
    "snapshot",
]
