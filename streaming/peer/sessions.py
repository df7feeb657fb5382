"""SessionRegistry: the live sessions of this process and the cap on their number."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import TooManySessions
from ..memory import MemoryTrimmer
from ..metrics import Metrics

if TYPE_CHECKING:
    from .worker import PeerWorker

__all__ = ["SessionRegistry"]


class SessionRegistry:
    """Slots are taken per client address as well: one address cannot take them all."""

    def __init__(
        self,
        max_sessions: int,
        metrics: Metrics,
        max_per_address: int = 0,
        trimmer: MemoryTrimmer | None = None,
    ) -> None:
        self._trimmer = trimmer
        self._max = max_sessions
        self._max_per_address = max_per_address or max_sessions
        self._metrics = metrics
        self._reserved = 0
        self._by_address: Counter[str] = Counter()
        self._workers: dict[str, PeerWorker] = {}
        self._addresses: dict[str, str] = {}
        self._empty = asyncio.Event()
        self._empty.set()
        self.on_change: Callable[[], None] | None = None
        """Told whenever the count changes (a Ray replica reports its load at once)."""

    def __len__(self) -> int:
        return self._reserved

    def reserve(self, address: str) -> None:
        """Take a slot before any work is done for a new session; 429 when none is left."""
        if self._reserved >= self._max:
            raise TooManySessions(
                f"this server already runs {self._max} sessions (VISIONSTREAM_MAX_SESSIONS)"
            )
        if self._by_address[address] >= self._max_per_address:
            raise TooManySessions(
                f"{address} already has {self._max_per_address} sessions on this server "
                "(VISIONSTREAM_MAX_SESSIONS_PER_ADDRESS)"
            )
        self._reserved += 1
        self._empty.clear()
        self._by_address[address] += 1
        self._changed()

    def release(self, address: str) -> None:
        self._reserved -= 1
        if not self._reserved:
            self._empty.set()
        self._by_address[address] -= 1
        if self._by_address[address] <= 0:
            del self._by_address[address]
        self._changed()

    def _changed(self) -> None:
        self._metrics.sessions.set(self._reserved)
        if self.on_change is not None:
            self.on_change()

    def add(self, worker: PeerWorker, address: str) -> None:
        self._workers[worker.session_id] = worker
        self._addresses[worker.session_id] = address
        self._metrics.sessions_total.inc()

    def remove(self, worker: PeerWorker) -> None:
        if self._workers.pop(worker.session_id, None) is not None:
            self.release(self._addresses.pop(worker.session_id))
            if self._trimmer is not None:
                self._trimmer.after_session()

    def workers(self) -> list[PeerWorker]:
        return list(self._workers.values())

    async def wait_empty(self) -> None:
        """Until no session holds a slot (every one closed, every reservation released)."""
        await self._empty.wait()

    async def close_all(self) -> None:
        await asyncio.gather(*(w.close() for w in list(self._workers.values())))

    async def drain(self, reason: str, timeout: float) -> None:
        """Tells every session why it ends (its completion message carries ``reason``), gives
        them ``timeout`` s to send it and close, then closes what is left."""
        workers = list(self._workers.values())
        for worker in workers:
            await worker.terminate(reason)
        closing = [asyncio.ensure_future(w.closed.wait()) for w in workers]
        if closing:
            _, pending = await asyncio.wait(closing, timeout=timeout)
            for waiter in pending:
                waiter.cancel()
        await self.close_all()
