"""visionstream: real-time video inference over WebRTC.

The client API is re-exported here (``from streaming import Client, ManualSource``) and
imported on first use, so importing the server's modules does not pay for it.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_CLIENT_NAMES = {
    "AsyncWebRTCSession",
    "Client",
    "InvalidParameterError",
    "MJPEGSource",
    "PipelineSource",
    "ManualSource",
    "RTSPSource",
    "SessionStartError",
    "StreamConfig",
    "VideoFileSource",
    "VideoMetadata",
    "WebRTCClient",
    "WebRTCSession",
    "WebcamSource",
}


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'streaming' has no attribute {name!r}")
