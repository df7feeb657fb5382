"""The Python client: inference-sdk's ``client.webrtc.stream(source=...)`` API, plus an
asyncio form (``astream``), bounded reassembly, ACKs whenever the server waits for them, and
``results()`` pairing each returned frame with its own result message."""

from ..protocol.messages import VideoMetadata
from .blocking import WebRTCSession
from .client import Client, WebRTCClient
from .config import StreamConfig
from .errors import InvalidParameterError, SessionStartError
from .session import AsyncWebRTCSession, SessionStats, VideoBytes
from .sources import (
    FrameSourceStream,
    ManualSource,
    MJPEGSource,
    PipelineSource,
    RTSPSource,
    StreamSource,
    UploadProgressCallback,
    VideoFileSource,
    WebcamSource,
)

__all__ = [
    "AsyncWebRTCSession",
    "Client",
    "FrameSourceStream",
    "InvalidParameterError",
    "MJPEGSource",
    "ManualSource",
    "PipelineSource",
    "RTSPSource",
    "SessionStartError",
    "SessionStats",
    "StreamConfig",
    "StreamSource",
    "UploadProgressCallback",
    "VideoBytes",
    "VideoFileSource",
    "VideoMetadata",
    "WebRTCClient",
    "WebRTCSession",
    "WebcamSource",
]
