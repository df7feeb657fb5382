"""Deterministic test patterns that carry their frame counter and send time in pixels.

A receiver decodes the stamp from the frame it gets back (after video coding and server-side
drawing) and measures latency against its own clock, without trusting timestamps on the wire.
The stamp is a band of black/white blocks across the top: 32 bits of frame counter, 48 bits
of send time (microseconds, modulo 2**48) and an 8-bit checksum.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .base import FrameSource, SourceFrame

__all__ = ["Stamp", "SyntheticSource", "decode_stamp", "stamp_image"]

_COLUMNS = 22
_ROWS = 4
_BITS = _COLUMNS * _ROWS  # 88 = 32 counter + 48 time + 8 checksum
_TIME_MASK = (1 << 48) - 1
MIN_WIDTH = 8 * (_COLUMNS + 2)


@dataclass(frozen=True)
class Stamp:
    """What a synthetic frame carries in its pixels: its index and when it was made."""

    index: int
    sent_us: int
    """``time.time_ns() // 1000`` modulo 2**48 when the frame was made."""

    def age_ms(self, now_us: int | None = None) -> float:
        now = (time.time_ns() // 1000 if now_us is None else now_us) & _TIME_MASK
        return ((now - self.sent_us) & _TIME_MASK) / 1000


def _block(width: int) -> int:
    return width // (_COLUMNS + 2)


def _checksum(value: int) -> int:
    # XOR-ed with a constant so that a plain black (or white) band does not check out.
    return (sum((value >> s) & 0xFF for s in range(0, 80, 8)) & 0xFF) ^ 0xA5


def stamp_image(image: np.ndarray, index: int, sent_us: int) -> None:
    """Write the stamp into ``image`` in place."""
    block = _block(image.shape[1])
    value = (index & 0xFFFFFFFF) | ((sent_us & _TIME_MASK) << 32)
    value |= _checksum(value) << 80
    for bit in range(_BITS):
        row, column = divmod(bit, _COLUMNS)
        y, x = row * block, (column + 1) * block
        image[y : y + block, x : x + block] = 255 if (value >> bit) & 1 else 0


def decode_stamp(image: np.ndarray) -> Stamp | None:
    """The stamp in a (possibly re-encoded) frame, or None if it does not check out."""
    block = _block(image.shape[1])
    if block < 8 or image.shape[0] < _ROWS * block:
        return None
    band = image[: _ROWS * block]  # only the stamp rows: this runs on every received frame
    # The blocks are black or white: one channel tells, at a third of the work (this runs in
    # the benchmarks' receiving clients, on the cores the server also needs).
    gray = band[:, :, 1] if band.ndim == 3 else band
    margin = block // 4
    value = 0
    for bit in range(_BITS):
        row, column = divmod(bit, _COLUMNS)
        y, x = row * block + margin, (column + 1) * block + margin
        if gray[y : y + block - 2 * margin, x : x + block - 2 * margin].mean() > 127:
            value |= 1 << bit
    payload = value & ((1 << 80) - 1)
    if value >> 80 != _checksum(payload):
        return None
    return Stamp(payload & 0xFFFFFFFF, payload >> 32)


class SyntheticSource(FrameSource):
    """``frames`` frames (None: endless) of ``width`` x ``height`` at ``fps``.

    In real time each ``read`` waits for its frame's slot; otherwise frames come as fast as
    they are read. The picture (moving bars under the stamp) is a function of the index only.
    """

    def __init__(
        self,
        width: int = 640,
        height: int = 480,
        fps: float = 30.0,
        frames: int | None = None,
        realtime: bool = True,
        picture: Callable[[int], np.ndarray] | None = None,
    ) -> None:
        """``picture``: the frame for an index (a scene a test draws), sent as it is, with
        no stamp; by default the moving bars, stamped."""
        if width < MIN_WIDTH or height < _ROWS * _block(width) + 16:
            raise ValueError(f"synthetic frames must be at least {MIN_WIDTH} pixels wide")
        if fps <= 0:
            raise ValueError("fps must be positive")
        self.width, self.height = width, height
        self.fps = float(fps)
        self._interval = 1 / self.fps
        self.frame_count = frames
        self.realtime = realtime
        self._picture = picture
        self._index = 0
        self._time_base = Fraction(1, 90000)
        self._step = round(90000 / fps)
        self._closed = threading.Event()
        self._started: float | None = None
        columns = np.arange(width, dtype=np.int32)
        self._ramp = ((columns * 255) // max(1, width - 1)).astype(np.uint8)

    def read(self) -> SourceFrame | None:
        if self._closed.is_set():
            return None
        index = self._index
        if self.frame_count is not None and index >= self.frame_count:
            return None
        if self.realtime:
            now = time.monotonic()
            self._started = now if self._started is None else self._started
            # Media pacing, interruptible by close().
            if self._closed.wait(max(0.0, self._started + index * self._interval - now)):
                return None
        self._index += 1
        if self._picture is not None:
            image = self._picture(index)
        else:
            image = self._pattern(index)
            stamp_image(image, index, time.time_ns() // 1000)
        return SourceFrame(image, index * self._step, self._time_base, index)

    def _pattern(self, index: int) -> np.ndarray:
        image = np.empty((self.height, self.width, 3), dtype=np.uint8)
        shifted = np.roll(self._ramp, index * 4)
        image[:, :, 0] = shifted
        image[:, :, 1] = shifted[::-1]
        image[:, :, 2] = (index * 3) % 256
        return image

    def close(self) -> None:
        self._closed.set()
