"""FrameBuffer: the one bounded queue between a producer and a consumer on the event loop.

Strategies (one name each):
- ``latest``: one slot, a new item replaces the old one (realtime: latency stays flat).
- ``drop_oldest``: up to ``capacity`` items; when full the oldest is evicted and counted.
- ``wait``: up to ``capacity`` items; ``put`` waits for room (nothing is lost).
Every eviction is counted in ``dropped``; nothing here is ever unbounded.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, Literal, TypeVar

__all__ = ["BufferClosed", "FrameBuffer", "Strategy"]

T = TypeVar("T")
Strategy = Literal["latest", "drop_oldest", "wait"]


class BufferClosed(Exception):
    """``put`` on a closed buffer."""


class FrameBuffer(Generic[T]):
    def __init__(self, strategy: Strategy, capacity: int = 1) -> None:
        if strategy == "latest":
            capacity = 1
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.strategy = strategy
        self.capacity = capacity
        self.dropped = 0
        self._items: deque[T] = deque()
        self._changed = asyncio.Condition()
        self._closed = False

    def __len__(self) -> int:
        return len(self._items)

    @property
    def closed(self) -> bool:
        return self._closed

    async def put(self, item: T) -> int:
        """Add an item; returns how many items were evicted to make room (0 or 1)."""
        async with self._changed:
            if self.strategy == "wait":
                await self._changed.wait_for(
                    lambda: self._closed or len(self._items) < self.capacity
                )
            if self._closed:
                raise BufferClosed
            evicted = 0
            if len(self._items) >= self.capacity:
                self._items.popleft()
                evicted = 1
                self.dropped += 1
            self._items.append(item)
            self._changed.notify_all()
            return evicted

    async def get(self) -> T | None:
        """The next item, or None once the buffer is closed and empty."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._items or self._closed)
            if not self._items:
                return None
            item = self._items.popleft()
            self._changed.notify_all()
            return item

    async def close(self, discard: bool = False) -> None:
        """Idempotent. Consumers drain what is left (unless ``discard``), then get None."""
        async with self._changed:
            self._closed = True
            if discard:
                self._items.clear()
            self._changed.notify_all()
