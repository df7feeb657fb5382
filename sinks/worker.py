"""One thread working through a queue, for everything that must not make its caller wait on
a disk or a network (webhook deliveries, event evidence, recording segments).

``put`` never blocks: a bounded queue that is full either drops its oldest item (counted by
the owner's ``on_drop``) or refuses the new one. ``close`` stops taking items and either
works through what waits or abandons it, then joins the thread within a deadline; it is
idempotent. ``stopping`` is set from the moment ``close`` starts, so a worker's own waits (a
retry's backoff) end early. A failing item is logged and the next one taken: one bad item
never ends the thread.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["QueueWorker"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class QueueWorker(Generic[T]):
    """``work(item)`` on a thread of its own (named ``name``), in the order items were put."""

    def __init__(
        self,
        name: str,
        work: Callable[[T], None],
        *,
        capacity: int | None = None,
        drop_oldest: bool = False,
        on_drop: Callable[[T], None] | None = None,
        on_start: Callable[[], None] | None = None,
        on_stop: Callable[[], None] | None = None,
        lazy: bool = False,
    ) -> None:
        """``capacity``: items waiting at most (None: unbounded); when full, ``drop_oldest``
        makes room (``on_drop`` hears of each dropped item) or the new item is refused.
        ``on_start``/``on_stop``: on the thread, before the first item and after the last.
        ``lazy``: the thread starts with the first item (a worker that may never get one)."""
        self._name = name
        self._work = work
        self._capacity = capacity
        self._drop_oldest = drop_oldest
        self._on_drop = on_drop
        self._on_start = on_start
        self._on_stop = on_stop
        self._items: deque[T] = deque()
        self._changed = threading.Condition()
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None
        if not lazy:
            self._start()

    @property
    def thread_id(self) -> int | None:
        """The thread's native id once started (for measuring its CPU)."""
        return self._thread.native_id if self._thread is not None else None

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def put(self, item: T) -> bool:
        """Queues ``item``; False when refused (full, or closing)."""
        with self._changed:
            if self.stopping.is_set():
                return False
            if self._capacity is not None and len(self._items) >= self._capacity:
                if not self._drop_oldest:
                    return False
                dropped = self._items.popleft()
                if self._on_drop is not None:
                    self._on_drop(dropped)
            self._items.append(item)
            if self._thread is None:
                self._start()
            self._changed.notify()
        return True

    def pending(self) -> int:
        with self._changed:
            return len(self._items)

    def _run(self) -> None:
        try:
            if self._on_start is not None:
                self._on_start()
            while True:
                with self._changed:
                    self._changed.wait_for(lambda: self._items or self.stopping.is_set())
                    if not self._items:
                        return  # closing, and nothing left
                    item = self._items.popleft()
                try:
                    self._work(item)
                except Exception:  # the owner handles what it expects; this is a bug of ours
                    log.exception("%s: an item failed", self._name)
        finally:
            if self._on_stop is not None:
                self._on_stop()

    def close(self, *, abandon: bool = False, timeout_s: float = 30.0) -> int:
        """Stops taking items; what waits is worked through, or (``abandon``) dropped and
        its number returned. Waits up to ``timeout_s`` for the thread. Idempotent."""
        with self._changed:
            self.stopping.set()
            abandoned = len(self._items) if abandon else 0
            if abandon:
                self._items.clear()
            self._changed.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        return abandoned
