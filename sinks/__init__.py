"""Result consumers with no WebRTC inside: video files, JSON lines, a webhook, an in-memory
buffer, an OpenCV window."""

from .display import DisplayWindow
from .jsonl import JsonLinesWriter
from .memory import MemorySink
from .video import RollingVideoRecorder, VideoRecorder
from .webhook import WebhookSink

__all__ = [
    "DisplayWindow",
    "JsonLinesWriter",
    "MemorySink",
    "RollingVideoRecorder",
    "VideoRecorder",
    "WebhookSink",
]
