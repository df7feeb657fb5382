"""Players we did not write, as the restream tests use them: FFmpeg's ``ffprobe`` and
``ffmpeg``, and GStreamer's ``playbin`` (``gst_player.py`` under Debian's Python); and the
check that a box was drawn where a detection is."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

__all__ = [
    "Played",
    "box_drawn",
    "ffmpeg_picture",
    "ffprobe_frames",
    "frame_rate",
    "gst_play",
    "rate",
]

GST_PLAYER = Path(__file__).with_name("gst_player.py")
SYSTEM_PYTHON = "/usr/bin/python3"  # has Debian's python3-gi
_TIME = "best_effort_timestamp_time"


@dataclass
class Played:
    width: int
    height: int
    frames: int
    pts_span: float
    arrival_span: float
    image: np.ndarray
    error: str | None = None


def gst_play(uri: str, seconds: float) -> Played:
    """``uri`` played by GStreamer's ``playbin`` for ``seconds`` after its first frame."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "frame.bgr"
        done = subprocess.run(
            [SYSTEM_PYTHON, str(GST_PLAYER), uri, str(seconds), str(out)],
            capture_output=True,
            text=True,
            timeout=seconds + 120,
            env={**os.environ, "GST_DEBUG": os.environ.get("GST_DEBUG", "*:2")},
        )
        lines = done.stdout.strip().splitlines()
        assert lines, f"gst_player said nothing: {done.stderr[-2000:]}"
        report = json.loads(lines[-1])
        if not report["frames"]:
            report["error"] = report.get("error") or f"no frame: {done.stderr[-3000:]}"
        width, height = report["width"], report["height"]
        raw = out.read_bytes() if out.exists() else b""
    image = np.frombuffer(raw, np.uint8)
    if width and height and image.size >= width * height * 3:
        # GStreamer pads each BGR row to 4 bytes.
        stride = image.size // height
        image = image.reshape(height, stride)[:, : width * 3].reshape(height, width, 3)
    return Played(
        width,
        height,
        report["frames"],
        report["pts_span"],
        report["arrival_span"],
        image,
        report.get("error"),
    )


def ffprobe_frames(url: str, seconds: float, *options: str) -> list[dict]:
    """The first ``seconds`` of ``url``'s video frames as ``ffprobe`` decodes them: each
    one's ``best_effort_timestamp_time``, ``width`` and ``height``."""
    done = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            *options,
            "-select_streams",
            "v:0",
            "-read_intervals",
            f"%+{seconds}",
            "-show_entries",
            f"frame={_TIME},width,height",
            "-of",
            "json",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 90,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout).get("frames", [])


def frame_rate(frames: list[dict]) -> float:
    """Frames a second of ``ffprobe_frames``, from their timestamps."""
    times = [
        float(f["best_effort_timestamp_time"]) for f in frames if "best_effort_timestamp_time" in f
    ]
    assert len(times) >= len(frames) - 1, frames[:5]
    return rate(times)


def rate(times: list[float]) -> float:
    """Frames a second, from their times."""
    assert len(times) >= 2, times
    return (len(times) - 1) / (max(times) - min(times))


def ffmpeg_picture(url: str, *options: str, skip: int = 5) -> np.ndarray:
    """One picture of ``url`` decoded by ``ffmpeg``: the one after ``skip`` others."""
    done = subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            *options,
            "-i",
            url,
            "-vf",
            f"select=gte(n\\,{skip})",
            "-frames:v",
            "1",
            "-f",
            "image2pipe",
            "-c:v",
            "png",
            "-",
        ],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout, done.stderr[-2000:].decode(errors="replace")
    image = cv2.imdecode(np.frombuffer(done.stdout, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None
    return image


def box_drawn(
    image: np.ndarray, box: tuple[float, float, float, float], bgr, inset: float
) -> float:
    """The share of points along ``box``'s edges, ``inset`` pixels inside them, whose colour
    is within 60 of ``bgr`` on every channel (video coding blurs a line's colour a little)."""
    x1, y1, x2, y2 = (round(v) for v in box)
    step = round(inset)
    height, width = image.shape[:2]
    points = []
    for t in np.linspace(0.2, 0.8, 13):
        x = int(x1 + t * (x2 - x1))
        y = int(y1 + t * (y2 - y1))
        points += [(x, y1 + step), (x, y2 - step), (x1 + step, y), (x2 - step, y)]
    close = 0
    for x, y in points:
        x, y = min(max(x, 0), width - 1), min(max(y, 0), height - 1)
        pixel = image[y, x].astype(int)
        close += int(np.all(np.abs(pixel - np.array(bgr)) <= 60))
    return close / len(points)
