"""visionstream: real-time video inference over WebRTC."""

__version__ = "0.1.0"
