"""The frame-source contract."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

__all__ = ["RTP_CLOCK", "FrameSource", "SourceError", "SourceFrame"]

RTP_CLOCK = Fraction(1, 90000)
"""Live sources stamp frames on the 90 kHz video RTP clock."""


class SourceError(Exception):
    """A source cannot be opened or stopped producing; the message says which and why."""


@dataclass
class SourceFrame:
    """One frame from a source: BGR pixels and when it was taken."""

    image: np.ndarray
    """BGR, uint8, H x W x 3."""
    pts: int
    time_base: Fraction
    index: int
    """0-based position in the source."""


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
