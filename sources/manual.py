"""Frames handed in by the program, one ``send`` at a time."""

from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np

from .base import RTP_CLOCK, FrameSource, SourceFrame

__all__ = ["ManualFrames"]

# Frames sent in a burst still get timestamps 1 ms apart: the video encoder rounds them
# through a microsecond clock and receivers pair by pts within one 90 kHz tick.
_MIN_GAP = 90


class ManualFrames(FrameSource):
    """A bounded mailbox: when the reader falls behind, the oldest frames are dropped.

    Frames are stamped with the time they were sent, so the stream's timing is the
    program's own.
    """

    def __init__(self, capacity: int = 10, fps: float | None = None) -> None:
        self.fps = fps
        self.dropped = 0
        self._frames: deque[tuple[np.ndarray, float]] = deque()
        self._capacity = capacity
        self._changed = threading.Condition()
        self._closed = False
        self._index = 0
        self._origin: float | None = None
        self._last_pts = -_MIN_GAP

    def send(self, image: np.ndarray) -> None:
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise ValueError(
                f"expected a BGR uint8 H x W x 3 image, got {image.dtype} {image.shape}"
            )
        with self._changed:
            if self._closed:
                raise RuntimeError("this source is closed")
            if len(self._frames) >= self._capacity:
                self._frames.popleft()
                self.dropped += 1
            self._frames.append((image, time.monotonic()))
            self._changed.notify_all()

    def read(self) -> SourceFrame | None:
        with self._changed:
            self._changed.wait_for(lambda: self._frames or self._closed)
            if self._closed:
                return None
            image, sent = self._frames.popleft()
        if self._origin is None:
            self._origin = sent
        pts = max(round((sent - self._origin) * 90000), self._last_pts + _MIN_GAP)
        self._last_pts = pts
        frame = SourceFrame(image, pts, RTP_CLOCK, self._index)
        self._index += 1
        return frame

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._frames.clear()
            self._changed.notify_all()
