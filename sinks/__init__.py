"""Result consumers with no WebRTC inside: video files, JSON lines, events with their
evidence, a webhook, an in-memory buffer, an OpenCV window."""

from .display import DisplayWindow
from .evidence import EventLog, Retention
from .jsonl import JsonLinesWriter
from .memory import MemorySink
from .video import RollingVideoRecorder, VideoRecorder
from .webhook import WebhookSink

__all__ = [
    "DisplayWindow",
    "EventLog",
    "JsonLinesWriter",
    "MemorySink",
    "Retention",
    "RollingVideoRecorder",
    "VideoRecorder",
    "WebhookSink",
]
