"""Give freed heap back to the operating system after sessions end.

A session's decoding, encoding and inference run on worker threads, and glibc gives each
thread its own malloc arena; when a session ends its buffers are freed into those arenas but
not returned to the system, so the process's RSS creeps up with session churn although
nothing is alive (``benchmarks churn`` measures it). ``malloc_trim(0)`` returns the free
pages. Only where glibc is the allocator; elsewhere this does nothing.
"""

from __future__ import annotations

import asyncio
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
    """``after_session()`` when a session has closed: trims at once unless it trimmed in the
    last ``interval_s``, and then once more when closes have been quiet that long (so the
    last of a burst of closes is trimmed too). Trimming runs off the loop."""

    def __init__(self, enabled: bool, interval_s: float = 2.0) -> None:
        self._trim = _malloc_trim() if enabled else None
        self._interval = interval_s
        self._last = 0.0
        self._lock = threading.Lock()
        self._pending: asyncio.TimerHandle | None = None

    def after_session(self) -> None:
        """On the event loop."""
        if self._trim is None:
            return
        loop = asyncio.get_running_loop()
        if time.monotonic() - self._last >= self._interval:
            loop.run_in_executor(None, self.trim)
        elif self._pending is None:
            self._pending = loop.call_later(self._interval, self._trailing, loop)

    def _trailing(self, loop: asyncio.AbstractEventLoop) -> None:
        self._pending = None
        loop.run_in_executor(None, self.trim)

    def trim(self) -> None:
        """Blocking (milliseconds on a large heap)."""
        if self._trim is None:
            return
        with self._lock:
            self._last = time.monotonic()
            self._trim(0)

    def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
