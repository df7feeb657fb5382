"""Frame producers with no WebRTC inside, shared by the client and the server.

Each is a ``FrameSource``: a blocking ``read()`` that returns the next ``SourceFrame`` (BGR
image plus its timestamp) or None at the end, and an idempotent ``close()`` that also wakes a
pending ``read()``. ``streaming.rtc.track.FrameSourceTrack`` turns any of them into a WebRTC track.
"""

from sinks.masking import mask_url

from .base import FrameSource, LiveFeed, SourceError, SourceFrame
from .file import FileSource
from .live import LiveSource, LiveStats
from .manual import ManualFrames
from .synthetic import Stamp, SyntheticSource, decode_stamp
from .webcam import CameraSource, CaptureFactory, is_device

__all__ = [
    "CameraSource",
    "CaptureFactory",
    "FileSource",
    "FrameSource",
    "LiveFeed",
    "LiveSource",
    "LiveStats",
    "ManualFrames",
    "SourceError",
    "SourceFrame",
    "Stamp",
    "SyntheticSource",
    "decode_stamp",
    "is_device",
    "mask_url",
]
