"""Dynamic batching across sessions.

Frames from every session that uses a model queue here; a worker takes the first waiting
request and everything queued behind it (up to ``max_batch_size`` images), runs one batch and
hands each caller its own slice. While another batch of the model is running (the device is
busy, so waiting costs it nothing) the worker keeps collecting until the batch is full,
``max_queue_delay_ms`` has passed since its first request (Triton's bound), or the device
frees; with the device idle it runs at once: a lone session never waits for company that is
not coming (on an H100 a fixed 2 ms wait made its 0.6 ms frame 3.1-3.5 ms,
benchmarks/README.md "The batcher on the GPU"). With ``max_batch_size`` 1 there is no queue
and no thread at all: callers run the session directly (on CPU, batching rarely pays).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from .session import InferenceSession

__all__ = ["BatchStats", "DynamicBatcher"]


@dataclass
class _Request:
    blob: np.ndarray
    future: Future[tuple[list[np.ndarray], BatchStats]] = field(default_factory=Future)
    queued_at: float = field(default_factory=time.perf_counter)


@dataclass
class BatchStats:
    """What one call went through: the batch it ran in and how long it queued."""

    batch_size: int
    queue_ms: float
    compute_ms: float


REQUEST_BATCH = 32
"""The most images of one request run at once where a model takes any batch size (the
default of ``VISIONSTREAM_MAX_CROP_BATCH``): a frame's crops for a classifier in one run, not
one per crop, bounded so memory stays small."""


class DynamicBatcher:
    """Gathers frames from every session into batches for one model session (up to a size,
    waiting at most a delay after the first), runs them on worker threads, hands each
    caller its own result."""

    def __init__(
        self,
        session: InferenceSession,
        max_batch_size: int = 1,
        max_queue_delay_ms: float = 2.0,
        workers: int = 1,
        on_batch: Callable[[int, float], None] | None = None,
        name: str = "model",
        request_batch: int = REQUEST_BATCH,
    ) -> None:
        self.session = session
        self.max_batch_size = max(1, max_batch_size)
        self.max_queue_delay = max_queue_delay_ms / 1000.0
        self._request_batch = max(1, request_batch)
        self._on_batch = on_batch
        self._pending: deque[_Request] = deque()
        self._changed = threading.Condition()  # guards _pending, _in_flight and _closed
        self._in_flight = 0  # batches handed to the session and not yet back
        self._collecting = 0  # requests in a batch still gathering more
        self._closed = False
        self._workers = [
            threading.Thread(target=self._work, name=f"batcher-{name}-{i}", daemon=True)
            for i in range(workers if self.max_batch_size > 1 else 0)
        ]
        for worker in self._workers:
            worker.start()

    @property
    def batching(self) -> bool:
        return self.max_batch_size > 1

    def infer(self, blob: np.ndarray) -> tuple[list[np.ndarray], BatchStats]:
        """A batch of images (usually 1) -> its outputs, same batch size. Blocks; thread-safe.
        Only single images are queued: a request of several runs on its own, so no batch
        ever outgrows ``max_batch_size``."""
        if self._closed:
            raise RuntimeError("the model is closed")
        if not self.batching or len(blob) > 1:
            started = time.perf_counter()
            outputs = self.session.run(blob)
            compute = (time.perf_counter() - started) * 1000
            if self._on_batch is not None:
                self._on_batch(len(blob), compute)
            return outputs, BatchStats(len(blob), 0.0, compute)
        request = _Request(blob)
        with self._changed:
            if self._closed:
                raise RuntimeError("the model is closed")
            self._pending.append(request)
            self._changed.notify_all()  # an idle worker, or one collecting a batch
        outputs, stats = request.future.result()
        return outputs, stats

    @property
    def pending(self) -> int:
        """Requests waiting to run: queued, or in a batch still gathering more."""
        with self._changed:
            return len(self._pending) + self._collecting

    @property
    def request_limit(self) -> int:
        """The most images one caller's request runs at once (``infer_many``): the model's
        fixed batch size, or ``request_batch`` (``VISIONSTREAM_MAX_CROP_BATCH``) where it takes
        any."""
        static = self.session.inputs[0].shape[0] if self.session.inputs else -1
        return min(static, self._request_batch) if static > 0 else self._request_batch

    def infer_many(self, blobs: list[np.ndarray]) -> list[tuple[list[np.ndarray], BatchStats]]:
        """One caller's several images (a frame's crops, one blob each) in as few session
        runs as the model takes (``request_limit`` at a time), not one run each; each
        image's outputs (batch dimension 1), in order."""
        results: list[tuple[list[np.ndarray], BatchStats]] = []
        limit = self.request_limit
        for start in range(0, len(blobs), limit):
            chunk = blobs[start : start + limit]
            outputs, stats = self.infer(np.concatenate(chunk) if len(chunk) > 1 else chunk[0])
            shared = BatchStats(
                stats.batch_size, stats.queue_ms / len(chunk), stats.compute_ms / len(chunk)
            )
            results.extend(
                ([o[row : row + 1] for o in outputs], shared) for row in range(len(chunk))
            )
        return results

    def _next_batch(self) -> list[_Request] | None:
        """The next batch (counted in flight), once there is a first request; None once
        closed with nothing left queued."""
        with self._changed:
            # While another worker gathers a batch, what arrives is its: taking it here
            # would run a batch of one beside the one still waiting to fill.
            while not self._pending or self._collecting:
                if self._closed and not self._pending:
                    return None
                self._changed.wait()
            batch = [self._pending.popleft()]
            deadline = batch[0].queued_at + self.max_queue_delay
            while len(batch) < self.max_batch_size:  # queued requests are single images
                if self._pending:
                    batch.append(self._pending.popleft())
                    continue
                remaining = deadline - time.perf_counter()
                if self._in_flight == 0 or remaining <= 0 or self._closed:
                    break  # the device is idle (go now), or the wait is over
                self._collecting = len(batch)
                self._changed.wait(remaining)
                self._collecting = 0
            self._in_flight += 1
            if self._pending:
                self._changed.notify_all()  # the batch is full: the rest are another's
            return batch

    def _work(self) -> None:
        while (batch := self._next_batch()) is not None:
            try:
                self._run(batch)
            finally:
                with self._changed:
                    self._in_flight -= 1
                    self._changed.notify_all()  # a worker collecting: the device is free

    def _run(self, batch: list[_Request]) -> None:
        started = time.perf_counter()
        try:
            outputs = self.session.run(np.concatenate([r.blob for r in batch]))
        except BaseException as exc:
            for request in batch:
                request.future.set_exception(exc)
            return
        compute = (time.perf_counter() - started) * 1000
        if self._on_batch is not None:
            self._on_batch(len(batch), compute)
        for row, request in enumerate(batch):
            stats = BatchStats(len(batch), (started - request.queued_at) * 1000, compute)
            request.future.set_result(([o[row : row + 1] for o in outputs], stats))

    def close(self) -> None:
        """Finish what is queued, stop the workers (idempotent)."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            self._changed.notify_all()
        for worker in self._workers:
            worker.join()
