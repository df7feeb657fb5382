"""RateSampler: ``max_fps`` out of a faster stream, exactly.

Keeping a frame when "the interval has passed since the last one kept" loses rate: from a
15 fps camera at ``max_fps: 5``, the frame due at 200 ms arrives a little early or late, is
dropped or kept late, and the next slot is counted from it. Measured, that gave 4.1-4.3
results a second, not 5 (issue 40).

Here the slots are a fixed grid on the frames' own timestamps, one every ``1/max_fps``: a
frame is kept when its time reaches the next slot, less nine tenths of the stream's frame
interval (at most 3/4 of a period: a frame a little early for its slot is its frame), and
the grid moves on by exactly one period, never by where the kept frame fell. So the grid
cannot drift: over any stretch the kept rate is ``max_fps``, within 2 % for timestamps off
their place by up to a third of a frame interval (``tests/unit/test_sampling.py``). A stream
that stops, jumps or goes back (a reconnect) restarts the grid at its next frame; one slower
than ``max_fps`` keeps every frame.
"""

from __future__ import annotations

import statistics
from collections import deque

__all__ = ["RateSampler"]

_EARLY = 0.75
_WITHIN = 0.9
_STEPS = 15
"""Frame intervals the stream's interval is the median of."""
_WINDOW = 30
"""Kept frames the achieved rate is measured over."""


class RateSampler:
    """Decides, frame by frame, which frames of a stream make ``fps`` frames a second."""

    def __init__(self, fps: float) -> None:
        if fps <= 0:
            raise ValueError("fps must be positive")
        self.period = 1.0 / fps
        self._due: float | None = None
        self._last: float | None = None
        self._steps: deque[float] = deque(maxlen=_STEPS)
        self._kept: deque[float] = deque(maxlen=_WINDOW)

    def keep(self, t: float) -> bool:
        """Whether the frame taken at ``t`` (seconds, the stream's clock) is kept."""
        last, self._last = self._last, t
        if last is not None and 0 < t - last < max(1.0, 2 * self.period):  # not a gap
            self._steps.append(t - last)
        due = self._due
        if due is None or last is None or t < last or t - due > self.period:
            due = t  # the first frame, a jump back, or a gap of over a period: a new grid
        # The first frame of the last interval before the slot (the median of the last
        # intervals: jitter moves it little), at most 3/4 of a period early: a frame a
        # little early for its slot is its frame, not one too many.
        interval = statistics.median(self._steps) if self._steps else 0.0
        if t < due - min(_EARLY * self.period, _WITHIN * interval):
            return False
        self._due = due + self.period  # exactly a period on: the rate never drifts
        self._kept.append(t)
        return True

    @property
    def achieved(self) -> float | None:
        """Frames kept per second of the stream's time, over the last ones kept."""
        if len(self._kept) < 2 or self._kept[-1] <= self._kept[0]:
            return None
        return (len(self._kept) - 1) / (self._kept[-1] - self._kept[0])
