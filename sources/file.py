"""A video file decoded by PyAV, paced in real time or as fast as the consumer reads.

Frames come out upright: a display matrix (what phones write instead of rotating pixels)
is applied, so the workflow sees what a player shows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av

from .base import FrameSource, SourceError, SourceFrame

__all__ = ["FileSource"]


class FileSource(FrameSource):
    """``label`` names the file in error messages (default: its path); a server passes a
    neutral one so that callers never learn its temporary paths.

    Opening probes the file, which can take a while for a large or odd one: with
    ``defer_open`` the constructor does nothing blocking, and ``open`` (or the first
    ``read``) does it, on whichever thread the owner chooses. ``close`` is safe at any point.
    """

    def __init__(
        self,
        path: str | Path,
        realtime: bool = False,
        label: str | None = None,
        *,
        defer_open: bool = False,
    ) -> None:
        self.path = Path(path)
        self.label = label or f"video file {self.path}"
        self.realtime = realtime
        self._container: av.container.InputContainer | None = None
        self._frames: Iterator[av.VideoFrame] | None = None
        self._time_base = Fraction(1, 90000)
        self._index = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._started: float | None = None
        self._first_pts: int | None = None
        if not defer_open:
            self.open()

    def open(self) -> None:
        """Blocking and idempotent; raises ``SourceError`` if it is not a readable video."""
        with self._lock:
            if self._closed.is_set():
                raise SourceError(f"{self.label} is closed")
            if self._container is not None:
                return
            try:
                container = av.open(str(self.path))
            except (OSError, av.error.FFmpegError) as exc:
                raise SourceError(f"cannot open {self.label}: {_reason(exc)}") from None
            if not container.streams.video:
                container.close()
                raise SourceError(f"{self.label} has no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            self._time_base = stream.time_base or self._time_base
            rate = stream.average_rate or stream.guessed_rate
            self.fps = float(rate) if rate else None
            self.frame_count = stream.frames or None
            self._container, self._frames = container, container.decode(stream)

    def read(self) -> SourceFrame | None:
        try:
            self.open()
        except SourceError as exc:
            self.error = None if self._closed.is_set() else str(exc)
            return None
        with self._lock:
            if self._closed.is_set() or self._frames is None:
                return None
            try:
                decoded = next(self._frames)
            except StopIteration:
                if self.frame_count and self._index < self.frame_count:
                    # FFmpeg ends a file cut short silently when its index came first.
                    self.error = (
                        f"{self.label} ended after {self._index} of its {self.frame_count} "
                        "frames: it is truncated or damaged"
                    )
                return None
            except av.error.FFmpegError as exc:
                self.error = (
                    f"cannot decode {self.label} after {self._index} frames: {_reason(exc)}"
                )
                return None
            pts = decoded.pts if decoded.pts is not None else self._index
            frame = SourceFrame(
                None,
                pts,
                self._time_base,
                self._index,
                decoded=decoded,
                rotation=decoded.rotation,
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
        with self._lock:  # waits out a read or an open in progress on another thread
            if self._container is not None:
                self._container.close()
                self._container, self._frames = None, None


def _reason(exc: Exception) -> str:
    # FFmpegError's str() repeats the file name; its strerror is the reason alone.
    return getattr(exc, "strerror", None) or str(exc)
