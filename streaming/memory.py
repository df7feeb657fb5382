"""Give freed heap back to the operating system after sessions end.

A session's decoding, encoding and inference run on worker threads, and glibc gives each
thread its own malloc arena; when a session ends its buffers are freed into those arenas but
not returned to the system, so the process's RSS creeps up with session churn although
nothing is alive (``benchmarks churn`` measures it). ``malloc_trim(0)`` returns the free
pages. Only where glibc is the allocator; elsewhere this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time

__all__ = ["MemoryTrimmer"]


def _malloc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS)
        return None


class MemoryTrimmer:
    """``trim()`` after a session closes; at most once per ``interval_s``. Thread-safe."""

    def __init__(self, enabled: bool, interval_s: float = 2.0) -> None:
        self._trim = _malloc_trim() if enabled else None
        self._interval = interval_s
        self._last = 0.0
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self._trim is not None

    def trim(self) -> bool:
        """Blocking (milliseconds); run it off the event loop. True when it ran."""
        if self._trim is None:
            return False
        with self._lock:
            now = time.monotonic()
            if now - self._last < self._interval:
                return False
            self._last = now
        self._trim(0)
        return True
