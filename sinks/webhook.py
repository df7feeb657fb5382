"""POST each result as JSON to a URL, off the caller's thread, through a bounded queue.

A slow or dead endpoint never stalls the producer: ``write`` only enqueues; when the queue is
full the oldest waiting delivery is dropped and counted. Each delivery is retried with
exponential backoff (``initial_backoff`` doubling up to ``max_backoff``) for up to
``max_attempts`` attempts; a 2xx answer is a delivery, anything else (a 5xx, a timeout, a
refused connection) a failed attempt. ``stats`` counts all of it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

import httpx

from sources.urls import mask_url

__all__ = ["WebhookSink", "WebhookStats"]

log = logging.getLogger(__name__)


@dataclass
class WebhookStats:
    """What a webhook sink delivered, gave up on, and dropped."""

    delivered: int = 0
    failed: int = 0
    """Deliveries given up after ``max_attempts``."""
    retries: int = 0
    dropped: int = 0
    """Deliveries that never got a turn: the queue was full."""
    last_error: str | None = None


@dataclass(frozen=True, slots=True)
class _Delivery:
    body: bytes
    params: dict[str, str | list[str]] | None
    headers: dict[str, str] | None


class WebhookSink:
    """POSTs each record to a URL from a thread of its own: a bounded queue (the oldest dropped
    and counted), retries with backoff, a timeout per attempt."""

    def __init__(
        self,
        url: str,
        *,
        queue_size: int = 256,
        timeout_s: float = 5.0,
        max_attempts: int = 5,
        initial_backoff: float = 0.5,
        max_backoff: float = 10.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.url = url
        self.masked_url = mask_url(url)
        self.stats = WebhookStats()
        self._queue: deque[_Delivery] = deque()
        self._queue_size = queue_size
        self._max_attempts = max_attempts
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._changed = threading.Condition()
        self._closed = threading.Event()
        self._http = httpx.Client(
            timeout=timeout_s, headers={"content-type": "application/json", **(headers or {})}
        )
        self._thread = threading.Thread(
            target=self._run, name=f"webhook {self.masked_url}", daemon=True
        )
        self._thread.start()

    def write(
        self,
        record: dict[str, Any],
        *,
        params: dict[str, str | list[str]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """``params`` join the URL's own query, ``headers`` the sink's, for this record."""
        body = json.dumps(record, separators=(",", ":"), default=str).encode()
        delivery = _Delivery(body, params or None, headers or None)
        with self._changed:
            if self._closed.is_set():
                return
            if len(self._queue) >= self._queue_size:
                self._queue.popleft()
                self.stats.dropped += 1
            self._queue.append(delivery)
            self._changed.notify()

    def pending(self) -> int:
        with self._changed:
            return len(self._queue)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._queue or self._closed.is_set())
                if self._closed.is_set():
                    return
                delivery = self._queue.popleft()
            self._deliver(delivery)

    def _deliver(self, delivery: _Delivery) -> None:
        backoff = self._initial_backoff
        for attempt in range(1, self._max_attempts + 1):
            try:
                response = self._http.post(
                    self.url, content=delivery.body, params=delivery.params,
                    headers=delivery.headers,
                )  # fmt: skip
                if response.is_success:
                    self.stats.delivered += 1
                    return
                error = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self.stats.last_error = f"{self.masked_url}: {error}"
            if attempt == self._max_attempts:
                break
            self.stats.retries += 1
            if self._closed.wait(backoff):  # retry backoff, cut short by close()
                return
            backoff = min(self._max_backoff, backoff * 2)
        self.stats.failed += 1
        log.warning("webhook %s: gave up on a delivery: %s", self.masked_url, error)

    def close(self) -> None:
        """Idempotent; deliveries still queued are abandoned (counted as dropped)."""
        with self._changed:
            if self._closed.is_set():
                return
            self._closed.set()
            abandoned = len(self._queue)
            self.stats.dropped += abandoned
            self._queue.clear()
            self._changed.notify_all()
        if abandoned:
            log.warning(
                "webhook %s: %d queued deliveries dropped on close", self.masked_url, abandoned
            )
        self._thread.join(10)
        self._http.close()
