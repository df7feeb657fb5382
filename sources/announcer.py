"""Announcer: state changes made under their owner's lock, told to listeners once the lock is
released, in the order they were made, so that a listener may take the lock itself (ask the
owner for its stats) without deadlock."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["Announcer"]

Listener = Callable[..., None]


class Announcer:
    """The listeners of one owner, and the changes not yet told to them."""

    def __init__(self, lock: threading.Lock) -> None:
        """``lock``: the owner's, held while changes are made and queued."""
        self._lock = lock
        self._listeners: list[Listener] = []
        self._pending: deque[tuple[Any, ...]] = deque()
        self._telling = threading.RLock()  # keeps changes in order across threads

    def add(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove(self, listener: Listener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def queue(self, *change: Any) -> None:
        """Call with the lock held: ``change`` is told (as the listeners' arguments) at the
        next ``tell``."""
        self._pending.append(change)

    def tell(self) -> None:
        """Call without the lock: every queued change, to every listener, in order."""
        with self._telling:
            while True:
                with self._lock:
                    if not self._pending:
                        return
                    change = self._pending.popleft()
                    listeners = list(self._listeners)
                for listener in listeners:
                    listener(*change)
