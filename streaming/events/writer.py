"""Events reach the store on a thread of their own: a producer (a workflow step on a frame,
a camera's reader) only appends to a bounded queue, so a slow or stopped database never
holds up a frame. The thread inserts in batches; while the database is unreachable it keeps
its batch and retries, the queue fills, and what does not fit is dropped and counted. An
event is acknowledged when its batch commits: from then on a restart keeps it.

Retention runs on the same thread: events past their age or beyond the newest ``max_count``
are deleted with their evidence files.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError

from ..config import Settings
from ..metrics import Metrics
from .records import EventRecord
from .store import EventStore

__all__ = ["EventRetention", "EventWriter", "event_writer"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EventRetention:
    max_age_s: float | None = 30 * 86400.0
    max_count: int | None = 5_000_000
    every_s: float = 60.0
    """How often retention runs (and once at start)."""


class EventWriter:
    """``record`` from any thread; ``close`` writes what is queued (within ``close_timeout_s``
    when the database is down) and stops the thread. Idempotent."""

    def __init__(
        self,
        store: EventStore,
        *,
        evidence_dir: Path | None = None,
        max_queued: int = 10_000,
        batch: int = 500,
        retention: EventRetention = EventRetention(),
        metrics: Metrics | None = None,
        retry_max_s: float = 5.0,
        close_timeout_s: float = 10.0,
        linger_s: float = 0.1,
    ) -> None:
        """``linger_s``: how long a first event waits for others to share its transaction."""
        self.store = store
        self._evidence = evidence_dir.resolve() if evidence_dir is not None else None
        # Unbounded underneath so that ``close`` can always wake the thread (None); the bound
        # is ``max_queued``, kept by ``record``.
        self._queue: queue.SimpleQueue[EventRecord | None] = queue.SimpleQueue()
        self._max_queued = max_queued
        self._batch = batch
        self._retention = retention
        self._metrics = metrics
        self._retry_max_s = retry_max_s
        self._close_timeout_s = close_timeout_s
        self._linger_s = linger_s
        self._stopping = threading.Event()
        self._settled = threading.Condition()
        self._expiring = threading.Lock()
        self._accepted = 0
        self._done = 0
        """Accepted events written or given up on: ``flush`` waits for it to catch up."""
        self.written = 0
        self.dropped = 0
        self.error: str | None = None
        """Why the last write failed, while the database stays unreachable; None when fine."""
        self._retry_s = 0.1
        self._next_retention = 0.0
        self._stop_by: float | None = None
        """When closing gives up on a database that stays away (monotonic)."""
        self._thread = threading.Thread(target=self._run, name="event-writer", daemon=True)
        self._thread.start()

    def record(self, event: EventRecord) -> None:
        """Queues ``event``; never blocks, never raises."""
        if self._stopping.is_set():
            self._drop(1, "closed")
            return
        with self._settled:
            if self._accepted - self._done >= self._max_queued:
                full = True
            else:
                full = False
                self._accepted += 1
                self._queue.put(event)
        if full:
            self._drop(1, "queue_full")
            return
        if self._metrics is not None:
            self._metrics.events_queued.set(self.queued)

    def flush(self, timeout: float) -> bool:
        """Waits until every event recorded before the call is written or dropped."""
        with self._settled:
            target = self._accepted
            return self._settled.wait_for(lambda: self._done >= target, timeout)

    @property
    def queued(self) -> int:
        """Accepted and not yet written (nor given up on)."""
        return self._accepted - self._done

    def stats(self) -> dict[str, Any]:
        return {
            "database": self.store.shown,
            "written": self.written,
            "dropped": self.dropped,
            "queued": self.queued,
            "error": self.error,
        }

    def _drop(self, count: int, reason: str) -> None:
        self.dropped += count
        if self._metrics is not None:
            self._metrics.events_dropped.labels(reason).inc(count)

    def _settle(self, count: int) -> None:
        with self._settled:
            self._done += count
            self._settled.notify_all()

    # The writer thread: wait for a first event (running retention when it is due), gather
    # a batch, store it (retrying while the database is away), and stop once closing left
    # nothing queued or the close deadline passed.

    def _run(self) -> None:
        pending: list[EventRecord] = []
        while True:
            if not pending:
                first = self._first()
                if first is None:
                    if self._closing_and_empty():
                        return
                    continue
                pending.append(first)
            self._gather(pending)
            left = self._store(pending)
            if left is None:
                return  # given up at shutdown: the database stayed away
            pending = left

    def _first(self) -> EventRecord | None:
        """The next batch's first event; None when the wait for it ended without one."""
        if self._stop_by is None and time.monotonic() >= self._next_retention:
            self._next_retention = time.monotonic() + self._expire()
        return self._next(None if self._stop_by is not None else self._next_retention)

    def _closing_and_empty(self) -> bool:
        if self._stopping.is_set():
            self._begin_stop()
        return self._stop_by is not None and self._queue.empty()

    def _begin_stop(self) -> None:
        """Closing: what is queued is still written, until the close deadline."""
        if self._stop_by is None:
            self._stop_by = time.monotonic() + self._close_timeout_s

    def _gather(self, pending: list[EventRecord]) -> None:
        # Events come in bursts (a frame's crossings): gathering for ``linger_s`` makes
        # one transaction of them, where one each would compete with the frames for
        # the GIL (measured: benchmarks/events.py).
        gather_until = time.monotonic() + (self._linger_s if self._stop_by is None else 0.0)
        while len(pending) < self._batch:
            try:
                left = gather_until - time.monotonic()
                item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                return
            if item is None:  # close: the rest is still written, now
                self._begin_stop()
                gather_until = 0.0
            else:
                pending.append(item)

    def _store(self, pending: list[EventRecord]) -> list[EventRecord] | None:
        """Writes the batch: what is left to write (empty once written), None when the
        writer gives up (closing, the database away past the deadline)."""
        try:
            self.store.migrate()
            self.store.insert(pending)
        except Exception as exc:  # the database's, or ours: logged, retried, never fatal
            return self._failed(pending, exc)
        if self.error is not None:
            log.info("event store %s reachable again", self.store.shown)
            self.error = None
        self._retry_s = 0.1
        self._written(len(pending))
        return []

    def _failed(self, pending: list[EventRecord], exc: Exception) -> list[EventRecord] | None:
        if not _unreachable(exc):
            # Not the database being away: an event it refuses (a payload that does not
            # serialise) would be retried for ever and hold up every other.
            pending = self._insert_each(pending)
            if not pending:
                return []
        if self.error is None:
            log.warning(
                "event store %s unreachable, %d events waiting: %s",
                self.store.shown,
                self.queued,
                _first_line(exc),
            )
        self.error = _first_line(exc)
        if self._stopping.is_set():
            self._begin_stop()
            assert self._stop_by is not None
            if time.monotonic() >= self._stop_by:
                lost = len(pending) + self._drain()
                log.error("event store unreachable at shutdown: %d events lost", lost)
                self._drop(lost, "shutdown")
                self._settle(lost)
                return None
        self._stopping.wait(self._retry_s)
        self._retry_s = min(self._retry_s * 2, self._retry_max_s)
        return pending

    def _written(self, count: int) -> None:
        self.written += count
        if self._metrics is not None:
            self._metrics.events_written.inc(count)
            self._metrics.events_queued.set(self.queued)
        self._settle(count)

    def _insert_each(self, batch: list[EventRecord]) -> list[EventRecord]:
        """A refused batch, one event at a time: what the database refuses is dropped and
        counted (``invalid``); returns what is left when it became unreachable meanwhile."""
        for i, event in enumerate(batch):
            try:
                self.store.insert([event])
            except Exception as exc:
                if _unreachable(exc):
                    return batch[i:]
                log.error(
                    "event %s of %s refused by the store, dropped: %s",
                    event.kind,
                    event.pipeline,
                    _first_line(exc),
                )
                self._drop(1, "invalid")
                self._settle(1)
                continue
            self._written(1)
        return []

    def _next(self, until: float | None) -> EventRecord | None:
        """The next event, waiting until ``until`` (monotonic; None: not at all); None when
        the wait ends or ``close`` woke the thread."""
        try:
            if until is None:
                return self._queue.get_nowait()
            return self._queue.get(timeout=max(0.0, until - time.monotonic()))
        except queue.Empty:
            return None

    def _drain(self) -> int:
        count = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return count
            count += item is not None

    def enforce_retention(self) -> None:
        """Runs retention now (it runs by itself every ``EventRetention.every_s``)."""
        self._expire()

    def _expire(self) -> float:
        """Runs retention; returns the seconds until the next run."""
        with self._expiring:  # one run at a time: a caller's returns after the thread's
            return self._expire_now()

    def _expire_now(self) -> float:
        retention = self._retention
        if retention.max_age_s is None and retention.max_count is None:
            return retention.every_s
        before_ms = (
            round((time.time() - retention.max_age_s) * 1000)
            if retention.max_age_s is not None
            else None
        )
        try:
            self.store.migrate()
            paths = self.store.expire(before_ms=before_ms, keep=retention.max_count)
        except Exception as exc:  # retention must never stop the writer
            if not isinstance(exc, SQLAlchemyError | OSError):
                log.exception("event retention failed")
            log.warning("event retention skipped: %s", _first_line(exc))
            return min(retention.every_s, self._retry_max_s)
        for path in paths:
            self._remove_evidence(path)
        if paths:
            log.info("event retention removed %d evidence files", len(paths))
        return retention.every_s

    def _remove_evidence(self, relative: str) -> None:
        if self._evidence is None:
            return
        path = (self._evidence / relative).resolve()
        if not path.is_relative_to(self._evidence):  # a row never names a path outside
            return
        path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._stopping.is_set():
            return
        if self.error is not None:
            # Already unreachable: one more attempt, not a wait that holds up an exit.
            self._close_timeout_s = 0.0
        self._stopping.set()
        self._queue.put(None)
        self._thread.join(self._close_timeout_s + 5)
        self.store.close()


def _unreachable(exc: BaseException) -> bool:
    """The database is away (down, restarting, unreachable, the disk gone), as against an
    event it refuses: worth retrying."""
    return isinstance(exc, OperationalError | InterfaceError | OSError)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def event_writer(settings: Settings, metrics: Metrics | None) -> EventWriter | None:
    """The process's writer as the settings say (None: events are not kept). The database
    is reached on the writer's thread: one that is down at start delays nothing."""
    if not settings.store_events:
        return None
    url = settings.events_url or f"sqlite:///{settings.data_dir / 'events.sqlite3'}"
    age = settings.events_max_age_days
    return EventWriter(
        EventStore(url),
        evidence_dir=settings.sink_dir,
        max_queued=settings.events_queue,
        retention=EventRetention(
            max_age_s=age * 86400.0 if age is not None else None,
            max_count=settings.events_max_count,
        ),
        metrics=metrics,
    )
