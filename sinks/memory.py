"""The in-memory results buffer a monitoring pipeline's ``consume`` reads from."""

from __future__ import annotations

import threading
from collections import deque
from typing import Generic, TypeVar

__all__ = ["MemorySink"]

T = TypeVar("T")


class MemorySink(Generic[T]):
    """Bounded FIFO: when full, the oldest entry goes (counted in ``dropped``); ``size`` 0
    keeps nothing. ``pop`` never waits: an empty sink answers None."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError("results_buffer_size must be >= 0")
        self.size = size
        self.dropped = 0
        self.written = 0
        self._entries: deque[T] = deque()
        self._lock = threading.Lock()

    def write(self, entry: T) -> None:
        with self._lock:
            self.written += 1
            if self.size == 0:
                self.dropped += 1
                return
            if len(self._entries) >= self.size:
                self._entries.popleft()
                self.dropped += 1
            self._entries.append(entry)

    def pop(self) -> T | None:
        with self._lock:
            return self._entries.popleft() if self._entries else None

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        with self._lock:
            self._entries.clear()
