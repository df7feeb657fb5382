"""Test clips made with PyAV on the spot, so no media files live in the repository."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from sources import SyntheticSource


def write_clip(
    path: Path,
    images: Iterable[np.ndarray],
    fps: int = 30,
    rotation: int | None = None,
    faststart: bool = False,
) -> Path:
    """H.264 in MP4. ``rotation``: a display matrix (counter-clockwise degrees), as phones
    write; ``faststart`` puts the index first, so a truncated copy still opens."""
    options = {"movflags": "faststart"} if faststart else {}
    with av.open(str(path), "w", options=options) as container:
        stream = None
        for image in images:
            if stream is None:
                stream = container.add_stream("libx264", rate=fps)
                stream.height, stream.width = image.shape[:2]
                stream.pix_fmt = "yuv420p"
                stream.options = {"preset": "ultrafast", "crf": "18"}
                if rotation is not None:
                    stream.set_display_rotation(rotation)
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
            container.mux(stream.encode(frame))
        assert stream is not None, "a clip needs at least one frame"
        container.mux(stream.encode())
    return path


def stamped_clip(path: Path, frames: int = 150, size=(640, 480), fps: int = 30, **kw) -> Path:
    """``frames`` frames, each stamped with its index (``sources.decode_stamp`` reads it)."""
    width, height = size
    source = SyntheticSource(width, height, fps=fps, frames=frames, realtime=False)
    return write_clip(path, (f.image for f in source), fps, **kw)


def video_frames(count: int, size=(320, 240), noise: int = 0) -> list[av.VideoFrame]:
    """A moving synthetic pattern as yuv420p frames, 30 fps on the 90 kHz RTP clock; ``noise``
    adds uniform noise of that amplitude, so every frame has residual to code."""
    rng = np.random.default_rng(7)
    out = []
    for i, source in enumerate(SyntheticSource(*size, frames=count, realtime=False)):
        image = source.image
        if noise:
            image = image.astype(np.int16) + rng.integers(-noise, noise + 1, image.shape)
            image = np.clip(image, 0, 255).astype(np.uint8)
        frame = av.VideoFrame.from_ndarray(image, format="bgr24").reformat(format="yuv420p")
        frame.pts, frame.time_base = i * 3000, Fraction(1, 90000)
        out.append(frame)
    return out


def write_y4m(path: Path, images: Iterable[np.ndarray], fps: int = 30) -> Path:
    """Raw YUV 4:2:0 in a y4m file: what Chromium's fake camera plays (in a loop)."""
    with av.open(str(path), "w", format="yuv4mpegpipe") as container:
        stream = None
        for image in images:
            if stream is None:
                stream = container.add_stream("rawvideo", rate=fps)
                stream.height, stream.width = image.shape[:2]
                stream.pix_fmt = "yuv420p"
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
            container.mux(stream.encode(frame))
        assert stream is not None, "a clip needs at least one frame"
        container.mux(stream.encode())
    return path


def outline_difference(returned: np.ndarray, original: np.ndarray, p: dict) -> tuple[float, float]:
    """How much a returned frame differs from the original along a predicted box's left and
    right edges (where the server draws), and its median difference overall (VP8 loss)."""
    diff = np.abs(returned.astype(int) - original.astype(int)).sum(axis=2)
    h, w = diff.shape
    x1 = int(max(0, p["x"] - p["width"] / 2))
    x2 = int(min(w - 1, p["x"] + p["width"] / 2))
    y1 = int(max(0, p["y"] - p["height"] / 2))
    y2 = int(min(h - 1, p["y"] + p["height"] / 2))
    outline = np.concatenate(
        [
            diff[y1 : y2 + 1, max(0, x1 - 1) : x1 + 2].ravel(),
            diff[y1 : y2 + 1, max(0, x2 - 1) : x2 + 2].ravel(),
        ]
    )
    return float(outline.mean()), float(np.median(diff))


def walker_scene(
    person: np.ndarray, center_x: int, size: tuple[int, int] = (480, 640)
) -> np.ndarray:
    """``person`` (a cut-out) pasted on a plain gray frame of ``size`` (rows, columns),
    centred vertically, its middle at ``center_x``."""
    frame = np.full((*size, 3), 128, np.uint8)
    height, width = person.shape[:2]
    left, top = center_x - width // 2, (size[0] - height) // 2
    frame[top : top + height, left : left + width] = person
    return frame


def walking_back_and_forth(person, step: int = 4):
    """The camera's picture at each frame: the person walks across the whole frame and back,
    ``step`` pixels a frame (120 px/s at 30 fps: slow enough for the tracker when a loaded
    machine processes one frame in five), crossing x=320 twice a round."""
    half = person.shape[1] // 2 + 1
    there = list(range(half, 640 - half, step))
    path = there + there[::-1]
    return lambda index: walker_scene(person, path[index % len(path)])


def there_and_back_clip(person, path: Path) -> Path:
    """A clip of the person walking across the line at x=320 and back, 12 px a frame: one
    crossing each way."""
    half = person.shape[1] // 2 + 1
    there = list(range(half, 640 - half, 12))
    return write_clip(path, (walker_scene(person, x) for x in there + there[::-1]))


def on_disk_seconds(path: Path) -> float:
    """How much video a copy of ``path`` as it is on disk now holds (what a kill -9 leaves:
    the process's own buffers are lost, what it wrote is not)."""
    copy = path.with_name("copy-" + path.name.lstrip("."))
    shutil.copyfile(path, copy)
    try:
        with av.open(str(copy)) as container:
            stream = container.streams.video[0]
            stamps = [p.dts for p in container.demux(stream) if p.dts is not None and p.size]
        return float((max(stamps) - min(stamps)) * stream.time_base) if stamps else 0.0
    except (av.error.FFmpegError, IndexError):
        return 0.0
    finally:
        copy.unlink()
