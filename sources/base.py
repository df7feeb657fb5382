"""The frame-source contract."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import TYPE_CHECKING, Protocol

import av
import cv2
import numpy as np
from av.video.reformatter import VideoReformatter

if TYPE_CHECKING:
    from .live import LiveStats
    from .packets import PacketSink

__all__ = [
    "RTP_CLOCK",
    "Converter",
    "FrameSource",
    "LiveFeed",
    "SourceError",
    "SourceFrame",
    "upright",
]

RTP_CLOCK = Fraction(1, 90000)
"""Live sources stamp frames on the 90 kHz video RTP clock."""


class SourceError(Exception):
    """A source cannot be opened or stopped producing; the message says which and why."""


_LUMA_FIRST = frozenset(
    ("yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p", "nv12", "nv21", "gray")
)
"""Pixel formats whose first plane is 8-bit luma: a grey copy is that plane, resized."""


def _full_range(frame: av.VideoFrame) -> bool:
    """Whether luma spans 0-255 (JPEG's range: the ``yuvj`` formats, or a frame that says
    so) rather than video's 16-235."""
    return (
        frame.format.name.startswith("yuvj")
        or frame.format.name == "gray"
        or (
            frame.color_range == 2  # AVCOL_RANGE_JPEG
        )
    )


class Converter:
    """One swscale context for a source's frames, used by one thread at a time. PyAV makes
    a context per frame otherwise, and setting one up is most of a small frame's conversion
    (640x360 to BGR: 0.40 ms of CPU, 0.15 ms with the context kept)."""

    def __init__(self) -> None:
        self._reformatter = VideoReformatter()
        self._lock = threading.Lock()

    def bgr(self, frame: av.VideoFrame) -> np.ndarray:
        with self._lock:
            return self._reformatter.reformat(frame, format="bgr24").to_ndarray()


class SourceFrame:
    """One frame from a source: BGR pixels and when it was taken.

    A decoded frame (``decoded``) is converted to BGR on first use of ``image``, on whichever
    thread uses it, once: a frame that ``max_fps`` samples away, or that only a motion check
    looks at (``grey``, made from the decoder's luma plane), is never converted."""

    __slots__ = (
        "_converter",
        "_decoded",
        "_image",
        "_lock",
        "_rotation",
        "index",
        "pts",
        "time_base",
    )

    def __init__(
        self,
        image: np.ndarray | None,
        pts: int,
        time_base: Fraction,
        index: int,
        *,
        decoded: av.VideoFrame | None = None,
        rotation: float = 0.0,
        converter: Converter | None = None,
    ) -> None:
        """``image`` (BGR, uint8, H x W x 3), or None with ``decoded``: PyAV's frame,
        turned by ``rotation`` degrees (a file's display matrix) when converted, through
        the source's ``converter`` where it has one."""
        if image is None and decoded is None:
            raise ValueError("a frame needs its image or its decoded frame")
        self._image = image
        self._decoded = decoded
        self._rotation = rotation
        self._converter = converter
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
                decoded, converter = self._decoded, self._converter
                assert decoded is not None
                bgr = converter.bgr(decoded) if converter else decoded.to_ndarray(format="bgr24")
                self._image = upright(bgr, self._rotation)
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
                if decoded.format.name in _LUMA_FIRST:
                    # The luma plane as it is, resized: 0.06 ms for 640x360, against 0.9
                    # through swscale (a context set up for each frame).
                    plane = decoded.planes[0]
                    count = plane.line_size * decoded.height
                    rows = np.frombuffer(memoryview(plane), np.uint8, count)
                    rows = rows.reshape(-1, plane.line_size)
                    luma = rows[:, : decoded.width]
                    small = cv2.resize(luma, (width, height), interpolation=cv2.INTER_AREA)
                    if not _full_range(decoded):  # 16-235 -> 0-255, as BGR's grey is
                        small = cv2.convertScaleAbs(small, alpha=255 / 219, beta=-16 * 255 / 219)
                    return upright(np.asarray(small), self._rotation)
                grey = decoded.reformat(width=width, height=height, format="gray")
                return upright(grey.to_ndarray(), self._rotation)
        assert image is not None
        height, full = image.shape[:2]
        width = min(width, full)
        size = (width, max(1, round(height * width / full)))
        # Made small first: the colour conversion then touches a few pixels, not all.
        small_bgr = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
        return np.asarray(cv2.cvtColor(small_bgr, cv2.COLOR_BGR2GRAY))


# av.VideoFrame.rotation is counter-clockwise degrees, FFmpeg's display-matrix convention.
_UPRIGHT = {90: cv2.ROTATE_90_COUNTERCLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_CLOCKWISE}


def upright(image: np.ndarray, rotation: float) -> np.ndarray:
    """``image`` turned as its display matrix says (multiples of 90 degrees only)."""
    code = _UPRIGHT.get(round(rotation / 90) * 90 % 360)
    return image if code is None else np.asarray(cv2.rotate(image, code))


class LiveFeed(Protocol):
    """A source that stays connected to something outside (a camera, a stream): what a
    pipeline's status reports, a recording taps and a session waits on for its first frame.
    A kind of source that is one says so through ``FrameSource.live``."""

    masked_url: str
    size: tuple[int, int] | None
    """Width and height, once the stream has said them."""

    @property
    def reconnects(self) -> int:
        """How often it has connected again after losing its source."""
        ...

    def stats(self) -> LiveStats: ...

    def wait_for(self, predicate: Callable[[LiveStats], bool], timeout: float) -> LiveStats: ...

    def add_listener(self, listener: Callable[[str, str, LiveStats], None]) -> None: ...

    def remove_listener(self, listener: Callable[[str, str, LiveStats], None]) -> None: ...

    def add_packet_sink(self, sink: PacketSink) -> None: ...

    def remove_packet_sink(self, sink: PacketSink) -> None: ...


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

    def live(self) -> LiveFeed | None:
        """The source as a live feed (state, stats, packets), or None: a file, a device or
        frames handed in have none."""
        return None

    def __iter__(self) -> Iterator[SourceFrame]:
        while (frame := self.read()) is not None:
            yield frame

    def __enter__(self) -> FrameSource:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
