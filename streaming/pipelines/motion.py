"""MotionGate: whether anything moved in a pipeline source's frame, so that its models run
only when something did (issue 40).

Most camera time shows nothing moving, and every sampled frame used to run the detector.
Here each sampled frame gets a cheap check first: a small grey copy (``width`` pixels wide,
made from the decoder's luma plane: no colour conversion), blurred, compared with a running
average of the last frames (``cv2.accumulateWeighted``, ``alpha`` a frame: a scene that
changes slowly, such as daylight, becomes the background), thresholded, masked by the
``ignore`` regions (a clock, trees) and opened (compression's specks go). When less than
``min_area`` of the frame changed, the frame is still: the workflow's models on the whole
frame give their last outputs again (``Block.holds_when_still``), so a parked car keeps its
box, its tracker id and its time in the zone, a line counter sees no crossing, and the frame
still yields a result. The models run at least every ``refresh_seconds`` of the stream's
time however still it is (a thing that appears without moving, a slow change of light), on
a source's first frame and after a reconnection.

An object that stops stays in the difference until the average has taken it in (about
``1/alpha`` frames): the models keep running meanwhile, and what they last saw is where it
stopped. What motion misses: a thing that appears or leaves without moving (a light turned
off, a slow fade) until the next refresh, and motion under ``min_area`` (a small object far
away: lower ``min_area`` or widen ``width``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import cv2
import numpy as np

from sources import SourceFrame

from ..workflows.blocks.base import FrameState
from ..workflows.engine import CompiledWorkflow
from ..workflows.runner import FrameFacts, FrameRun, run_frame
from .models import MotionGating

__all__ = ["MotionGate", "MotionStats", "run_gated"]

_ALPHA = 0.1
"""Weight of each frame in the running background: at 5 fps a thing that stops is taken
in within about 3 s (its contrast falls below the threshold)."""
_BLUR = (5, 5)
_OPEN = np.ones((3, 3), np.uint8)


@dataclass(frozen=True)
class MotionStats:
    """What a source's gate has decided: frames the models ran on, frames they were held
    on (nothing moved), and how much of the last frame moved (a fraction)."""

    frames_detected: int
    frames_gated: int
    motion_area: float | None

    def to_dict(self) -> dict[str, int | float | None]:
        return {
            "frames_detected": self.frames_detected,
            "frames_gated": self.frames_gated,
            "motion_area": self.motion_area,
        }


class MotionGate:
    """One source's gate. ``still`` is called on the worker that runs the frame (one frame
    of a source at a time); ``record`` says what the workflow then did."""

    def __init__(self, settings: MotionGating) -> None:
        self.settings = settings
        self._background: np.ndarray | None = None
        self._mask: np.ndarray | None = None
        self._restarts = 0
        self._last_run: float | None = None
        self._lock = threading.Lock()  # the status reads the counters from the loop
        self._detected = 0
        self._gated = 0
        self._area: float | None = None

    def still(self, frame: SourceFrame, t: float, restarts: int = 0) -> bool:
        """Whether the models may skip the frame taken at ``t`` (seconds, the stream's
        clock): nothing moved, and they ran less than ``refresh_seconds`` ago."""
        settings = self.settings
        grey = cv2.GaussianBlur(frame.grey(settings.width), _BLUR, 0)
        background = self._background
        fresh = background is None or background.shape != grey.shape
        if fresh or restarts != self._restarts:
            self._restarts = restarts
            self._background = grey.astype(np.float32)
            self._mask = self._ignored(grey.shape) if settings.ignore else None
            self._area = None
            return False
        assert background is not None
        diff = cv2.absdiff(grey, cv2.convertScaleAbs(background))
        _, changed = cv2.threshold(diff, settings.threshold - 1, 255, cv2.THRESH_BINARY)
        if self._mask is not None:
            changed = cv2.bitwise_and(changed, self._mask)
        changed = cv2.morphologyEx(changed, cv2.MORPH_OPEN, _OPEN)
        cv2.accumulateWeighted(grey, background, _ALPHA)
        area = cv2.countNonZero(changed) / changed.size
        with self._lock:
            self._area = area
        last = self._last_run
        due = last is None or t < last or t - last >= settings.refresh_seconds
        return area < settings.min_area and not due

    def record(self, t: float, held: bool) -> None:
        """The workflow ran on the frame taken at ``t``: its models were ``held`` (they
        gave their last outputs), or ran."""
        with self._lock:
            if held:
                self._gated += 1
            else:
                self._detected += 1
                self._last_run = t

    def _ignored(self, shape: tuple[int, ...]) -> np.ndarray:
        """255 where motion counts, 0 inside the ``ignore`` polygons (fractions of the
        frame's width and height, so one mask fits any resolution of the camera)."""
        height, width = shape[:2]
        mask = np.full((height, width), 255, np.uint8)
        scale = np.array([width, height], np.float64)
        polygons = [
            np.round(np.array(p, np.float64) * scale).astype(np.int32) for p in self.settings.ignore
        ]
        cv2.fillPoly(mask, polygons, 0)
        return mask

    def stats(self) -> MotionStats:
        with self._lock:
            area = None if self._area is None else round(self._area, 5)
            return MotionStats(self._detected, self._gated, area)


def run_gated(
    workflow: CompiledWorkflow, gate: MotionGate | None, frame: SourceFrame, facts: FrameFacts
) -> FrameRun:
    """Blocking, on a worker: one frame of a pipeline source through its workflow, its
    motion checked first when the source is gated. The BGR pixels are made only if a step
    reads them (none does on a still frame of a detector's workflow)."""
    state = FrameState()
    t = float(frame.pts * frame.time_base)  # the stream's clock, as max_fps samples by
    if gate is not None:
        state.still = gate.still(frame, t, facts.stream_restarts)
    run = run_frame(workflow, lambda: frame.image, facts, state)
    if gate is not None and run.error is None:
        gate.record(t, held=state.held_steps > 0)
    return run
