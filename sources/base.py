"""The frame-source contract."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from fractions import Fraction

import av
import cv2
import numpy as np

__all__ = ["RTP_CLOCK", "FrameSource", "SourceError", "SourceFrame", "upright"]

RTP_CLOCK = Fraction(1, 90000)
"""Live sources stamp frames on the 90 kHz video RTP clock."""


class SourceError(Exception):
    """A source cannot be opened or stopped producing; the message says which and why."""


class SourceFrame:
    """One frame from a source: BGR pixels and when it was taken.

    A decoded frame (``decoded``) is converted to BGR on first use of ``image``, on whichever
    thread uses it, once: a frame that ``max_fps`` samples away, or that only a motion check
    looks at (``grey``, made from the decoder's luma plane), is never converted."""

    __slots__ = ("_decoded", "_image", "_lock", "_rotation", "index", "pts", "time_base")

    def __init__(
        self,
        image: np.ndarray | None,
        pts: int,
        time_base: Fraction,
        index: int,
        *,
        decoded: av.VideoFrame | None = None,
        rotation: float = 0.0,
    ) -> None:
        """``image`` (BGR, uint8, H x W x 3), or None with ``decoded``: PyAV's frame,
        turned by ``rotation`` degrees (a file's display matrix) when converted."""
        if image is None and decoded is None:
            raise ValueError("a frame needs its image or its decoded frame")
        self._image = image
        self._decoded = decoded
        self._rotation = rotation
        self._lock = threading.Lock()
        self.pts = pts
        self.time_base = time_base
        self.index = index
        """0-based position in the source."""

    def __reduce__(self) -> tuple[type[SourceFrame], tuple[np.ndarray, int, Fraction, int]]:
        """Pickled (a Ray actor's result to a watching replica) as its pixels: PyAV's frame
        and the lock do not cross processes."""
        return SourceFrame, (self.image, self.pts, self.time_base, self.index)

    @property
    def image(self) -> np.ndarray:
        """BGR, uint8, H x W x 3 (converted now, if this is its first use)."""
        image = self._image
        if image is not None:
            return image
        with self._lock:  # two readers of one frame (a hub's subscribers) convert it once
            if self._image is None:
                assert self._decoded is not None
                self._image = upright(self._decoded.to_ndarray(format="bgr24"), self._rotation)
                self._decoded = None  # the pixels are all that is needed from now on
            return self._image

    @property
    def converted(self) -> bool:
        """Whether ``image`` has been made (tests and the benchmarks count conversions)."""
        return self._image is not None

    def video_frame(self) -> av.VideoFrame:
        """As PyAV's frame, to encode: the decoded one itself where it needs no turning (an
        encoder converts it to its own format anyway), else made from ``image``. The caller
        sets its ``pts``: use this only for a frame of one's own, not a hub's shared one."""
        with self._lock:
            decoded = self._decoded
        if decoded is not None and not round(self._rotation / 90) % 4:
            return decoded
        return av.VideoFrame.from_ndarray(self.image, format="bgr24")

    def grey(self, width: int) -> np.ndarray:
        """A small grey copy, ``width`` pixels wide (never wider than the frame), the frame's
        aspect kept: from the luma plane when not converted yet (no colour conversion)."""
        with self._lock:  # PyAV's frame keeps one scaler: never two threads in it at once
            decoded, image = self._decoded, self._image
            if image is None and decoded is not None:
                width = min(width, decoded.width)
                height = max(1, round(decoded.height * width / decoded.width))
                small = decoded.reformat(width=width, height=height, format="gray")
                return upright(small.to_ndarray(), self._rotation)
        assert image is not None
        height, full = image.shape[:2]
        width = min(width, full)
        size = (width, max(1, round(height * width / full)))
        # Made small first: the colour conversion then touches a few pixels, not all.
        small_bgr = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
        return np.asarray(cv2.cvtColor(small_bgr, cv2.COLOR_BGR2GRAY))


# av.VideoFrame.rotation is counter-clockwise degrees, FFmpeg's display-matrix convention.
_UPRIGHT = {90: cv2.ROTATE_90_COUNTERCLOCKWISE, 180: cv2.ROTATE_180,
            270: cv2.ROTATE_90_CLOCKWISE}  # fmt: skip


def upright(image: np.ndarray, rotation: float) -> np.ndarray:
    """``image`` turned as its display matrix says (multiples of 90 degrees only)."""
    code = _UPRIGHT.get(round(rotation / 90) * 90 % 360)
    return image if code is None else np.asarray(cv2.rotate(image, code))


class FrameSource(ABC):
    """Produces frames, blocking: ``read()`` returns the next one or None at the end."""

    fps: float | None = None
    """Nominal frame rate, when the source knows it."""
    frame_count: int | None = None
    """Total frames, when known up front (files)."""
    error: str | None = None
    """Why ``read`` returned None early (a camera that failed), else None."""

    @abstractmethod
    def read(self) -> SourceFrame | None:
        """Blocking: the next frame, or None at the end or once closed."""

    @abstractmethod
    def close(self) -> None:
        """Idempotent; wakes a ``read`` blocked in another thread."""

    def __iter__(self) -> Iterator[SourceFrame]:
        while (frame := self.read()) is not None:
            yield frame

    def __enter__(self) -> FrameSource:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
