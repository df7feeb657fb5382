"""Frames to a video file (H.264 in MP4 by default) with PyAV."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

__all__ = ["VideoRecorder"]


class VideoRecorder:
    """Opens the file on the first frame, when the size is known; ``close`` is idempotent.

    Frames are timed by the caller's timestamps (seconds) so a stream with drops plays back
    at its real pace; without them, at ``fps``. Frames of another size are scaled to the
    first one's, as a container holds one size.
    """

    def __init__(self, path: str | Path, fps: float = 30.0, codec: str = "libx264") -> None:
        self.path = Path(path)
        self.fps = fps
        self.codec = codec
        self.frames = 0
        self._container: av.container.OutputContainer | None = None
        self._stream: av.video.stream.VideoStream | None = None
        self._time_base = Fraction(1, 1000)
        self._first: float | None = None
        self._last_pts = -1
        self._closed = False

    def write(self, image: np.ndarray, timestamp_s: float | None = None) -> None:
        if self._closed:
            raise RuntimeError(f"recorder for {self.path} is closed")
        if self._stream is None:
            self._open(image.shape[1], image.shape[0])
        assert self._container is not None and self._stream is not None
        if timestamp_s is None:
            timestamp_s = self.frames / self.fps
        self._first = timestamp_s if self._first is None else self._first
        # Milliseconds, strictly increasing as the muxer requires.
        pts = max(round((timestamp_s - self._first) * 1000), self._last_pts + 1)
        self._last_pts = pts
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
        if (frame.width, frame.height) != (self._stream.width, self._stream.height):
            frame = frame.reformat(width=self._stream.width, height=self._stream.height)
        frame.pts, frame.time_base = pts, self._time_base
        self._container.mux(self._stream.encode(frame))
        self.frames += 1

    def _open(self, width: int, height: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._container = av.open(str(self.path), mode="w")
        stream = self._container.add_stream(self.codec, rate=round(self.fps))
        # yuv420p needs even sizes.
        stream.width, stream.height = width - width % 2, height - height % 2
        stream.pix_fmt = "yuv420p"
        stream.time_base = self._time_base
        self._stream = stream

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._container is not None and self._stream is not None:
            self._container.mux(self._stream.encode(None))
            self._container.close()

    def __enter__(self) -> VideoRecorder:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
