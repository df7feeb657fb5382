"""FrameBuffer: the one bounded queue between a producer and a consumer on the event loop.

Used by WebRTC sessions (input frames, outbound video), monitoring pipelines (one per source)
and the client. Strategies are the pipelines API's (reference: pipelines-api.md §2):

Filling (what ``put`` does when the buffer is full):
- ``WAIT``: ``put`` waits for room; nothing is ever lost.
- ``DROP_OLDEST``: the oldest buffered item is evicted.
- ``DROP_LATEST``: the new item is discarded; the buffer keeps its older ones.
- ``ADAPTIVE_DROP_OLDEST`` / ``ADAPTIVE_DROP_LATEST``: as above, and in addition a new item is
  discarded while the producer outpaces the consumer by more than 5 items/s (at most 16 in a
  row), so a slow consumer sheds load before its buffer fills and latency stays low. The
  reference's second, open-loop rule (announced vs. measured stream fps) is left out: it pins a
  camera that declares 30 fps and delivers 29.8 at 1 frame in 17 whatever the consumer does.

Consumption (what ``get`` returns): ``LAZY`` the oldest item; ``EAGER`` the newest, discarding
the older ones. ``max_fps``: with ``WAIT`` filling (files) ``get`` waits, pacing the file;
otherwise ``put`` keeps exactly ``max_fps`` of the stream's frames by their own timestamps
(``sampling.RateSampler``) and drops the rest before they are buffered.

Short names used by the sessions: ``latest`` (one slot, newest wins), ``drop_oldest``, ``wait``.
Every discarded item is counted in ``drops`` by reason; nothing here is ever unbounded.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from collections.abc import Callable
from enum import StrEnum
from typing import Generic, Literal, TypeVar

from .sampling import RateSampler

__all__ = ["BufferClosed", "Consumption", "Filling", "FrameBuffer", "Strategy"]

T = TypeVar("T")
Strategy = Literal["latest", "drop_oldest", "wait"]


class Filling(StrEnum):
    """What a full buffer does with a new frame (the reference's filling strategies)."""

    WAIT = "WAIT"
    DROP_OLDEST = "DROP_OLDEST"
    ADAPTIVE_DROP_OLDEST = "ADAPTIVE_DROP_OLDEST"
    DROP_LATEST = "DROP_LATEST"
    ADAPTIVE_DROP_LATEST = "ADAPTIVE_DROP_LATEST"


class Consumption(StrEnum):
    """Which frame a reader takes: the oldest (LAZY) or the newest, dropping the rest (EAGER)."""

    LAZY = "LAZY"
    EAGER = "EAGER"


_SHORT: dict[str, Filling] = {
    "latest": Filling.DROP_OLDEST,
    "drop_oldest": Filling.DROP_OLDEST,
    "wait": Filling.WAIT,
}
_ADAPTIVE_TOLERANCE = 5.0  # items per second the producer may run ahead of the consumer
_ADAPTIVE_MIN_SAMPLES = 10
_ADAPTIVE_MAX_IN_ROW = 16
_PACE_WINDOW = 30


class BufferClosed(Exception):
    """``put`` on a closed buffer."""


class _Pace:
    """Events per second over the last few events."""

    def __init__(self) -> None:
        self._times: deque[float] = deque(maxlen=_PACE_WINDOW)

    def tick(self, now: float) -> None:
        self._times.append(now)

    def __len__(self) -> int:
        return len(self._times)

    def rate(self, now: float) -> float:
        if len(self._times) < 2:
            return 0.0
        return (len(self._times) - 1) / max(1e-6, now - self._times[0])


class FrameBuffer(Generic[T]):
    """A bounded async buffer between one producer and one reader, with a strategy: keep the
    latest, drop the oldest, or make the producer wait; every drop is counted by reason."""

    def __init__(
        self,
        strategy: Strategy | Filling | str = Filling.DROP_OLDEST,
        capacity: int = 1,
        consumption: Consumption | str = Consumption.LAZY,
        max_fps: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        timestamp: Callable[[T], float | None] | None = None,
    ) -> None:
        """``timestamp``: an item's time on its stream's clock, which ``max_fps`` samples
        by (default, or None for an item: when it is put)."""
        if strategy == "latest":
            capacity = 1
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.filling = _SHORT.get(str(strategy)) or Filling(strategy)
        self.consumption = Consumption(consumption)
        self.capacity = capacity
        self.max_fps = max_fps
        self.drops: Counter[str] = Counter()
        self._items: deque[T] = deque()
        self._changed = asyncio.Condition()
        self._closed = False
        # Paces are only read by the adaptive rule: other buffers skip the bookkeeping.
        self._adaptive = self.filling in (
            Filling.ADAPTIVE_DROP_OLDEST,
            Filling.ADAPTIVE_DROP_LATEST,
        )
        self._produced = _Pace()
        self._consumed = _Pace()
        self._adaptive_in_row = 0
        self._next_due = 0.0
        self._clock = clock
        self._timestamp = timestamp
        # Streams are sampled where frames come in; a file (WAIT) is paced where it is read.
        self.sampler = (
            RateSampler(max_fps) if max_fps and self.filling is not Filling.WAIT else None
        )

    def __len__(self) -> int:
        return len(self._items)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def dropped(self) -> int:
        return sum(self.drops.values())

    def _drop(self, reason: str) -> int:
        self.drops[reason] += 1
        return 1

    def _adaptive_drop(self, now: float) -> bool:
        self._produced.tick(now)
        if (
            self._adaptive_in_row >= _ADAPTIVE_MAX_IN_ROW
            or len(self._produced) <= _ADAPTIVE_MIN_SAMPLES
            or len(self._consumed) <= _ADAPTIVE_MIN_SAMPLES
        ):
            self._adaptive_in_row = 0
            return False
        ahead = self._produced.rate(now) - self._consumed.rate(now)
        if ahead > _ADAPTIVE_TOLERANCE:
            self._adaptive_in_row += 1
            return True
        self._adaptive_in_row = 0
        return False

    async def put(self, item: T) -> int:
        """Add an item; returns how many items were discarded to do so (0 or 1)."""
        async with self._changed:
            if self.filling is Filling.WAIT:
                await self._changed.wait_for(
                    lambda: self._closed or len(self._items) < self.capacity
                )
            if self._closed:
                raise BufferClosed
            if self.sampler is not None:
                stamped = self._timestamp(item) if self._timestamp is not None else None
                if not self.sampler.keep(self._clock() if stamped is None else stamped):
                    return self._drop("max_fps")
            if self._adaptive and self._adaptive_drop(self._clock()):
                return self._drop("adaptive")
            discarded = 0
            if len(self._items) >= self.capacity:
                if self.filling in (Filling.DROP_LATEST, Filling.ADAPTIVE_DROP_LATEST):
                    return self._drop("drop_latest")
                self._items.popleft()
                discarded = self._drop("drop_oldest")
            self._items.append(item)
            self._changed.notify_all()
            return discarded

    async def get(self) -> T | None:
        """The next item (per the consumption strategy), or None once closed and empty."""
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: self._items or self._closed)
                if not self._items:
                    return None
                if self.consumption is Consumption.EAGER:
                    while len(self._items) > 1:
                        self._items.popleft()
                        self._drop("eager")
                item = self._items.popleft()
                self._changed.notify_all()
            now = self._clock()
            paced = self.max_fps and self.filling is Filling.WAIT
            if paced and now < self._next_due:
                await asyncio.sleep(self._next_due - now)  # pacing a file to max_fps
                now = self._clock()
            if paced and self.max_fps:
                self._next_due = max(now, self._next_due) + 1.0 / self.max_fps
            if self._adaptive:
                self._consumed.tick(now)
            return item

    async def close(self, discard: bool = False) -> None:
        """Idempotent. Consumers drain what is left (unless ``discard``), then get None."""
        async with self._changed:
            self._closed = True
            if discard:
                self._items.clear()
            self._changed.notify_all()
