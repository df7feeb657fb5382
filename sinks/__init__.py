"""Result consumers with no WebRTC inside: video recording, JSON lines, an OpenCV window."""

from .display import DisplayWindow
from .jsonl import JsonLinesWriter
from .video import VideoRecorder

__all__ = ["DisplayWindow", "JsonLinesWriter", "VideoRecorder"]
