"""A video file decoded by PyAV, paced in real time or as fast as the consumer reads."""

from __future__ import annotations

import threading
import time
from fractions import Fraction
from pathlib import Path

import av

from .base import FrameSource, SourceError, SourceFrame

__all__ = ["FileSource"]


class FileSource(FrameSource):
    def __init__(self, path: str | Path, realtime: bool = False) -> None:
        self.path = Path(path)
        self.realtime = realtime
        try:
            self._container = av.open(str(self.path))
        except (OSError, av.error.FFmpegError) as exc:
            raise SourceError(f"cannot open video file {self.path}: {exc}") from None
        if not self._container.streams.video:
            self._container.close()
            raise SourceError(f"{self.path} has no video stream")
        stream = self._container.streams.video[0]
        stream.thread_type = "AUTO"
        self._time_base = stream.time_base or Fraction(1, 90000)
        rate = stream.average_rate or stream.guessed_rate
        self.fps = float(rate) if rate else None
        self.frame_count = stream.frames or None
        self._frames = self._container.decode(stream)
        self._index = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._started: float | None = None
        self._first_pts: int | None = None

    def read(self) -> SourceFrame | None:
        with self._lock:
            if self._closed.is_set():
                return None
            try:
                decoded = next(self._frames)
            except StopIteration:
                return None
            except av.error.FFmpegError as exc:
                self.error = f"cannot decode {self.path}: {exc}"
                return None
            pts = decoded.pts if decoded.pts is not None else self._index
            frame = SourceFrame(
                decoded.to_ndarray(format="bgr24"), pts, self._time_base, self._index
            )
            self._index += 1
        if self.realtime:
            self._pace(pts)
        return None if self._closed.is_set() else frame

    def _pace(self, pts: int) -> None:
        now = time.monotonic()
        if self._started is None or self._first_pts is None:
            self._started, self._first_pts = now, pts
            return
        due = self._started + float((pts - self._first_pts) * self._time_base)
        # Media pacing, interruptible by close().
        self._closed.wait(max(0.0, due - now))

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            self._container.close()
