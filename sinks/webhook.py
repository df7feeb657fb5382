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
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import Field, field_validator

from .base import SinkContext, SinkSettings, Written
from .masking import mask_url
from .pinning import Pin, pinned_request
from .worker import QueueWorker

__all__ = ["WebhookResultSink", "WebhookSink", "WebhookSinkConfiguration", "WebhookStats"]

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
    body: bytes | None
    params: dict[str, str | list[str]] | None
    headers: dict[str, str] | None
    method: str = "POST"
    files: dict[str, bytes] | None = None
    form: dict[str, str] | None = None


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
        pin: Pin | None = None,
    ) -> None:
        self.url = url
        self._pin = pin
        self.masked_url = mask_url(url)
        self.stats = WebhookStats()
        self._max_attempts = max_attempts
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._http = httpx.Client(timeout=timeout_s, headers=headers or {})
        self._draining = False
        self._worker: QueueWorker[_Delivery] = QueueWorker(
            f"webhook {self.masked_url}",
            self._deliver,
            capacity=queue_size,
            drop_oldest=True,
            on_drop=self._dropped,
        )

    def write(
        self,
        record: dict[str, Any] | None,
        *,
        params: dict[str, str | list[str]] | None = None,
        headers: dict[str, str] | None = None,
        method: str = "POST",
        files: dict[str, bytes] | None = None,
        form: dict[str, str] | None = None,
    ) -> None:
        """``record`` as the JSON body (None: no JSON); ``params`` join the URL's own query,
        ``headers`` the sink's, for this record. With ``files`` or ``form`` the body is a
        multipart or form-encoded one instead, as the reference's ``requests`` sends it."""
        body = None
        if record is not None and not files and not form:
            body = json.dumps(record, separators=(",", ":"), default=str).encode()
        self._worker.put(
            _Delivery(body, params or None, headers or None, method, files or None, form or None)
        )

    def pending(self) -> int:
        return self._worker.pending()

    def _dropped(self, delivery: _Delivery) -> None:
        self.stats.dropped += 1

    def _deliver(self, delivery: _Delivery) -> None:
        backoff = self._initial_backoff
        for attempt in range(1, self._max_attempts + 1):
            if self._worker.stopping.is_set() and (attempt > 1 or not self._draining):
                return  # closing: what is left is abandoned (draining: one try each)
            try:
                response = self._send(delivery)
                if response.is_success:
                    self.stats.delivered += 1
                    return
                error = f"HTTP {response.status_code}"
            except (httpx.HTTPError, OSError) as exc:  # OSError: the pin refused the host
                error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self.stats.last_error = f"{self.masked_url}: {error}"
            if attempt == self._max_attempts:
                break
            log.info(
                "webhook %s: attempt %d of %d failed (%s); again in %g s",
                self.masked_url,
                attempt,
                self._max_attempts,
                error,
                backoff,
            )
            self.stats.retries += 1
            if self._worker.stopping.wait(backoff):  # retry backoff, cut short by close()
                return
            backoff = min(self._max_backoff, backoff * 2)
        self.stats.failed += 1
        log.warning("webhook %s: gave up on a delivery: %s", self.masked_url, error)

    def _send(self, delivery: _Delivery) -> httpx.Response:
        headers = httpx.Headers(delivery.headers or {})  # names in any case, once each
        if delivery.body is not None and "content-type" not in headers:
            headers["content-type"] = "application/json"
        files = {name: (name, data) for name, data in (delivery.files or {}).items()}
        url = httpx.URL(self.url)
        extensions: dict[str, Any] = {}
        if self._pin is not None:  # resolved and checked once, for this attempt
            url, host, extensions = pinned_request(url, self._pin)
            headers.update(host)
        return self._http.request(
            delivery.method,
            url,
            content=delivery.body,
            params=delivery.params,
            headers=headers,
            files=files or None,
            data=delivery.form,
            extensions=extensions,
        )

    def close(self, *, drain_s: float = 0.0) -> None:
        """Idempotent; deliveries still queued are abandoned (counted as dropped), or with
        ``drain_s`` each first gets one try, all within that time (a workflow's webhook step
        at the end of an HTTP run: its request was already answered "sent")."""
        if self._worker.stopping.is_set():
            return
        self._draining = drain_s > 0
        abandoned = self._worker.close(
            abandon=not self._draining, timeout_s=drain_s if self._draining else 10
        )
        self.stats.dropped += abandoned
        if abandoned:
            log.warning(
                "webhook %s: %d queued deliveries dropped on close", self.masked_url, abandoned
            )
        self._http.close()


class WebhookSinkConfiguration(SinkSettings):
    """Ours: POST each result to a URL, with a bounded queue and retries."""

    url: str
    timeout_seconds: float = Field(default=5.0, gt=0)
    max_attempts: int = Field(default=5, ge=1, le=100)
    queue_size: int = Field(default=256, ge=1, le=100_000)

    def destinations(self) -> list[tuple[str, str]]:
        return [(self.url, "webhook url")]

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).hostname:
            raise ValueError("a webhook url is http(s)://host/...")
        return value

    def open(self, context: SinkContext) -> WebhookResultSink:
        return WebhookResultSink(
            WebhookSink(
                self.url,
                queue_size=self.queue_size,
                timeout_s=self.timeout_seconds,
                max_attempts=self.max_attempts,
                pin=context.pin,
            )
        )


class WebhookResultSink:
    """A pipeline's results, each POSTed (``ResultSink``)."""

    name = "webhook"

    def __init__(self, webhook: WebhookSink) -> None:
        self._webhook = webhook

    def add_source(self, source_id: int) -> None:
        pass  # one endpoint for every source: each record names its own

    def remove_source(self, source_id: int) -> None:
        pass

    def write(self, result: Written) -> None:
        self._webhook.write(result.record())

    def close(self) -> None:
        self._webhook.close()

    def stats(self) -> dict[str, Any]:
        return {**self._webhook.stats.__dict__, "pending": self._webhook.pending()}
