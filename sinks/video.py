"""Frames to a video file (H.264 in MP4 by default) with PyAV."""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
from pydantic import Field

from .base import NamedSinkSettings, SinkContext, Written

__all__ = ["RollingVideoRecorder", "VideoFileSink", "VideoFileSinkConfiguration", "VideoRecorder"]


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
        assert isinstance(stream, av.VideoStream)
        # yuv420p needs even sizes.
        stream.width, stream.height = width - width % 2, height - height % 2
        stream.pix_fmt = "yuv420p"
        stream.time_base = self._time_base
        # The encoder counts in milliseconds too: at 1/fps, two frames of a live source less
        # than a frame interval apart would share a timestamp, which the muxer refuses.
        stream.codec_context.time_base = self._time_base
        if self.codec == "libx264":
            # No B-frames or lookahead: frames are written as they come (a recording of a live
            # stream is readable up to its last segment), and irregular timestamps from a
            # live source never produce out-of-order DTS when the encoder is flushed.
            stream.options = {"preset": "veryfast", "tune": "zerolatency"}
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


class RollingVideoRecorder:
    """Consecutive MP4 segments of at most ``segment_s`` seconds each: ``<stem>-0001.mp4``, ...

    A finished segment is complete and playable while the next is being written, so a camera
    recorded for days never leaves one huge file that is only readable once closed.
    """

    def __init__(
        self, directory: str | Path, stem: str, segment_s: float = 300.0, fps: float = 30.0
    ) -> None:
        self.directory = Path(directory)
        self.stem = stem
        self.segment_s = segment_s
        self.fps = fps
        self.segments: list[Path] = []
        self._current: VideoRecorder | None = None
        self._started: float | None = None

    def write(self, image: np.ndarray, timestamp_s: float) -> None:
        if self._current is None or timestamp_s - (self._started or 0.0) >= self.segment_s:
            self._roll(timestamp_s)
        assert self._current is not None
        self._current.write(image, timestamp_s)

    def _roll(self, timestamp_s: float) -> None:
        finished, self._current = self._current, None
        try:
            if finished is not None:
                finished.close()
        finally:  # a segment that failed to close never stops the next one
            path = self.directory / f"{self.stem}-{len(self.segments) + 1:04d}.mp4"
            self.segments.append(path)
            self._current = VideoRecorder(path, self.fps)
            self._started = timestamp_s

    def close(self) -> None:
        if self._current is not None:
            self._current.close()
            self._current = None


class VideoFileSinkConfiguration(NamedSinkSettings):
    """Ours: record each source's rendered frames to rolling MP4 segments
    (``<name>-source<id>-<started>-0001.mp4``, ...)."""

    segment_seconds: float = Field(default=300.0, gt=0)
    output: str | None = None
    """Workflow output to record (default: the first image output)."""

    def open(self, context: SinkContext) -> VideoFileSink:
        return VideoFileSink(self, context)


class VideoFileSink:
    """Each source's frames in segments of its own (``ResultSink``)."""

    name = "video_file"

    def __init__(self, settings: VideoFileSinkConfiguration, context: SinkContext) -> None:
        self._settings = settings
        self._context = context
        self._recorders: dict[int, RollingVideoRecorder] = {}

    def add_source(self, source_id: int) -> None:
        stem = f"{self._settings.name}-source{source_id}-{self._context.started}"
        self._recorders[source_id] = RollingVideoRecorder(
            self._context.directory, stem, self._settings.segment_seconds
        )

    def remove_source(self, source_id: int) -> None:
        recorder = self._recorders.pop(source_id, None)
        if recorder is not None:
            recorder.close()

    def write(self, result: Written) -> None:
        recorder = self._recorders.get(result.source_id)
        if recorder is not None:
            recorder.write(result.image(self._settings.output), time.monotonic())

    def close(self) -> None:
        failures = []
        for recorder in self._recorders.values():
            try:
                recorder.close()
            except Exception as exc:  # every other source's file is still finished
                failures.append(exc)
        if failures:
            raise failures[0]

    def stats(self) -> dict[str, Any]:
        return {str(i): [p.name for p in r.segments] for i, r in self._recorders.items()}
