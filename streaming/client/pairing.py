"""Pairs returned video frames with their result messages by pts."""

from __future__ import annotations

from collections import OrderedDict
from fractions import Fraction
from typing import Any

import numpy as np

from ..protocol.messages import VideoMetadata

__all__ = ["PtsPairer", "rtp_ticks"]

Data = tuple[Any, VideoMetadata]
Paired = tuple[np.ndarray, Any, VideoMetadata]


def rtp_ticks(pts: int | None, time_base: float | Fraction | None) -> int | None:
    """A pts on the 90 kHz video clock (the clock both the track and the messages use)."""
    if pts is None:
        return None
    if time_base is None:
        return pts
    return round(pts * Fraction(time_base).limit_denominator(1 << 24) * 90000)


class PtsPairer:
    """Frames and messages each wait (bounded) for their partner within ``tolerance`` ticks.

    Both arrive in pts order, so once a pair forms, whatever older waits on the other side
    can no longer be paired and is dropped; ``unpaired_frames`` / ``unpaired_messages``
    count them.
    """

    def __init__(self, tolerance: int = 1, capacity: int = 32) -> None:
        self.tolerance = tolerance
        self._capacity = capacity
        self._frames: OrderedDict[int, np.ndarray] = OrderedDict()
        self._data: OrderedDict[int, Data] = OrderedDict()
        self.unpaired_frames = 0
        self.unpaired_messages = 0

    def add_frame(self, ticks: int, image: np.ndarray) -> Paired | None:
        key = self._match(ticks, self._data)
        if key is None:
            self.unpaired_frames += self._hold(self._frames, ticks, image)
            return None
        self.unpaired_messages += self._drop_older(self._data, key)
        data, metadata = self._data.pop(key)
        return image, data, metadata

    def add_data(self, ticks: int, data: Any, metadata: VideoMetadata) -> Paired | None:
        key = self._match(ticks, self._frames)
        if key is None:
            self.unpaired_messages += self._hold(self._data, ticks, (data, metadata))
            return None
        self.unpaired_frames += self._drop_older(self._frames, key)
        return self._frames.pop(key), data, metadata

    def _match(self, ticks: int, waiting: OrderedDict[int, Any]) -> int | None:
        for key in waiting:
            if abs(key - ticks) <= self.tolerance:
                return key
        return None

    def _hold(self, waiting: OrderedDict[int, Any], ticks: int, item: Any) -> int:
        waiting[ticks] = item
        if len(waiting) > self._capacity:
            waiting.popitem(last=False)
            return 1
        return 0

    @staticmethod
    def _drop_older(waiting: OrderedDict[int, Any], key: int) -> int:
        older = [k for k in waiting if k < key]
        for k in older:
            del waiting[k]
        return len(older)
