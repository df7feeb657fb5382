"""Oldest-first retention, one rule for everything the server keeps on disk (recording
segments, event evidence): while any limit is exceeded, the oldest item goes, whole."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Kept", "Limits", "remove_oldest"]


@dataclass(frozen=True)
class Kept:
    """One item retention may remove: its files go together."""

    made: float
    """Seconds since the epoch; its age is counted from here."""
    size: int
    paths: tuple[Path, ...]


@dataclass(frozen=True)
class Limits:
    """What is kept at most; None: no limit of that kind."""

    max_items: int | None = None
    max_age_s: float | None = None
    max_bytes: int | None = None
    too_full: Callable[[], bool] = lambda: False
    """Asked before each removal: the disk itself has too little room."""


def remove_oldest(items: Sequence[Kept], limits: Limits, now: float | None = None) -> list[Kept]:
    """Removes items, oldest first, while any limit is exceeded; returns those kept."""
    kept = sorted(items, key=lambda item: item.made)
    total = sum(item.size for item in kept)
    now = time.time() if now is None else now
    while kept:
        oldest = kept[0]
        exceeded = (
            (limits.max_items is not None and len(kept) > limits.max_items)
            or (limits.max_age_s is not None and now - oldest.made > limits.max_age_s)
            or (limits.max_bytes is not None and total > limits.max_bytes)
            or limits.too_full()
        )
        if not exceeded:
            break
        for path in oldest.paths:
            path.unlink(missing_ok=True)
        total -= oldest.size
        kept.pop(0)
    return kept
