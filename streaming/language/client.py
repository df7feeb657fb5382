"""What every provider's API module shares: a concurrency limit per provider, retries with
backoff on 429/5xx and timeouts, a bound on the answer, usage counted, a pinned connection.

An API module implements ``_send`` (one HTTP exchange, its errors mapped to ``Retry`` or
``ProviderRefused``); everything around it is here, once."""

from __future__ import annotations

import json
import logging
import random
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

import httpx

from sinks.pinning import Pin, PinnedTransport, RefusedAddress

from ..settings.language import ProviderSettings
from .answers import Answer, Prompt, ProviderError, ProviderRefused, ProviderUnavailable

__all__ = ["ProviderClient", "Retry", "UsageSink", "error_message", "refusal", "retry_after"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class UsageSink(Protocol):
    """Where requests and tokens are counted (the server's Prometheus metrics)."""

    def vlm_request(self, provider: str, model: str, outcome: str) -> None: ...

    def vlm_token_counts(
        self, provider: str, model: str, input_tokens: int, output: int
    ) -> None: ...


@dataclass
class Retry(Exception):
    """Worth another try (429, 5xx, a timeout, no connection): ``after`` is the provider's
    ``Retry-After`` in seconds, where it said one."""

    reason: str
    after: float | None = None


def refusal(status: int, body: str) -> ProviderError | Retry:
    """An HTTP error answer, as ``_send`` raises it: 429 and 5xx are tried again."""
    text = " ".join(body.split())[:300]
    if status == 429 or status >= 500:
        return Retry(f"HTTP {status}: {text}")
    return ProviderRefused(f"HTTP {status}: {text}", status)


def error_message(body: str) -> str:
    """The ``error.message`` of an error answer (every API here nests it so), else the body."""
    try:
        error = json.loads(body).get("error", {})
        return str(error.get("message") or body) if isinstance(error, dict) else str(error)
    except (ValueError, AttributeError):
        return body


def retry_after(headers: httpx.Headers) -> float | None:
    """``Retry-After`` in seconds (the date form is not used by model servers)."""
    value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class ProviderClient(ABC):
    """One provider, shared by every step and description of the server: ``describe`` is
    called from worker threads (never the event loop) and blocks until the answer, at most
    ``(retries + 1) * timeout_s`` plus the backoff; ``close`` ends waits at once."""

    api: ClassVar[str]

    def __init__(
        self, name: str, spec: ProviderSettings, *, pin: Pin | None, usage: UsageSink | None
    ) -> None:
        self.name = name
        self.spec = spec
        self._usage = usage
        self._slots = threading.BoundedSemaphore(spec.max_concurrency)
        self._closed = threading.Event()
        transport: httpx.BaseTransport = httpx.HTTPTransport()
        if pin is not None:  # every connection to the checked address
            transport = PinnedTransport(pin, transport)
        # A server a caller names (openai_compatible's base_url) could answer without end:
        # the body is refused past a bound before it is all in memory.
        transport = BoundedTransport(transport, spec.max_answer_chars * 8 + 65536)
        self.http = httpx.Client(
            transport=transport, timeout=spec.timeout_s, follow_redirects=False
        )

    @property
    def url(self) -> str:
        return self.spec.url()

    def key(self, prompt: Prompt) -> str | None:
        if prompt.api_key:
            return prompt.api_key
        return self.spec.api_key.get_secret_value() if self.spec.api_key else None

    def model(self, prompt: Prompt) -> str:
        model = prompt.model or self.spec.model
        if not model:
            raise ProviderRefused(f"provider {self.name!r}: no model named (set its 'model')")
        return model

    def describe(self, prompt: Prompt) -> Answer:
        """The model's answer; raises ``ProviderRefused`` or ``ProviderUnavailable``."""
        model = self.model(prompt)
        answer = self._tried(model, lambda: self._checked(self._send(prompt, model)))
        if self._usage is not None:
            usage = answer.usage
            self._usage.vlm_token_counts(self.name, model, usage.input_tokens, usage.output_tokens)
        return answer

    def embed(self, texts: list[str], model: str | None = None) -> list[list[float]]:
        """One vector per text, by ``model`` (None: the provider's), tried as ``describe``
        is; an API without embeddings refuses."""
        named = self.model(Prompt("", model=model))
        vectors = self._tried(named, lambda: self._embed(texts, named))
        if len(vectors) != len(texts):
            raise ProviderRefused(
                f"provider {self.name!r} gave {len(vectors)} vectors for {len(texts)} texts"
            )
        return vectors

    def _tried(self, model: str, send: Callable[[], T]) -> T:
        last = "closed"
        for attempt in range(self.spec.retries + 1):
            if self._closed.is_set():
                break
            try:
                with self._slot():
                    done = send()
            except Retry as exc:
                last = exc.reason
                wait = self._backoff(attempt, exc.after)
                log.info("vlm %s: %s; try %d in %.1fs", self.name, exc.reason, attempt + 2, wait)
                if attempt < self.spec.retries and self._closed.wait(wait):
                    break
                continue
            except ProviderError:
                self._count(model, "refused")
                raise
            self._count(model, "answered")
            return done
        self._count(model, "unavailable")
        raise ProviderUnavailable(
            f"provider {self.name!r} gave no answer after {self.spec.retries + 1} tries: {last}"
        )

    def _checked(self, answer: Answer) -> Answer:
        if len(answer.text) > self.spec.max_answer_chars:
            raise ProviderRefused(
                f"provider {self.name!r} answered {len(answer.text)} characters, over its "
                f"max_answer_chars ({self.spec.max_answer_chars})"
            )
        return answer

    def _slot(self) -> _Slot:
        return _Slot(self._slots, self.spec.timeout_s, self.name)

    def _backoff(self, attempt: int, after: float | None) -> float:
        wait = after if after is not None else 0.5 * 2**attempt * (0.5 + random.random())
        return min(wait, self.spec.max_backoff_s)

    def _count(self, model: str, outcome: str) -> None:
        if self._usage is not None:
            self._usage.vlm_request(self.name, model, outcome)

    @abstractmethod
    def _send(self, prompt: Prompt, model: str) -> Answer:
        """One request: the answer, or ``Retry`` / ``ProviderRefused``."""

    def _embed(self, texts: list[str], model: str) -> list[list[float]]:
        """One request for ``texts``' vectors (an API that has embeddings says how)."""
        raise ProviderRefused(
            f"provider {self.name!r} speaks {self.api}, which has no embeddings API here: "
            "VISIONSTREAM_VLM_EMBEDDINGS names an OpenAI-compatible provider"
        )

    def post(self, url: str, headers: dict[str, str], body: dict[str, object]) -> httpx.Response:
        """One POST of JSON; a timeout or a failed connection is a ``Retry``."""
        try:
            return self.http.post(url, headers=headers, json=body)
        except (RefusedAddress, AnswerTooLarge) as exc:
            raise ProviderRefused(f"provider {self.name!r}: {exc}") from None
        except httpx.TimeoutException:
            raise Retry(f"no answer within {self.spec.timeout_s}s") from None
        except (httpx.TransportError, OSError) as exc:
            raise Retry(f"no connection: {type(exc).__name__}: {exc}") from None

    def answered(self, response: httpx.Response) -> dict[str, Any]:
        """An answer's JSON; an error status raised as ``refusal`` says (its
        ``Retry-After`` kept), a body that is no JSON object refused."""
        if response.status_code != 200:
            error = refusal(response.status_code, error_message(response.text))
            if isinstance(error, Retry):
                error.after = retry_after(response.headers)
            raise error
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise ProviderRefused(f"provider {self.name!r} answered no JSON object")
        return answer

    def close(self) -> None:
        self._closed.set()
        self.http.close()


class AnswerTooLarge(httpx.ReadError):
    """An answer's body went past ``BoundedTransport``'s bound (not worth a retry)."""


class BoundedTransport(httpx.BaseTransport):
    """Every response's body read at most ``most`` bytes: past it, ``AnswerTooLarge``."""

    def __init__(self, inner: httpx.BaseTransport, most: int) -> None:
        self._inner, self._most = inner, most

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)
        assert isinstance(response.stream, httpx.SyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Bounded(response.stream, self._most, request),
            extensions=response.extensions,
            request=request,
        )

    def close(self) -> None:
        self._inner.close()


class _Bounded(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, most: int, request: httpx.Request) -> None:
        self._inner, self._most, self._request = inner, most, request

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        for chunk in self._inner:
            seen += len(chunk)
            if seen > self._most:
                raise AnswerTooLarge(
                    f"the answer is over {self._most} bytes", request=self._request
                )
            yield chunk

    def close(self) -> None:
        self._inner.close()


class _Slot:
    """One of the provider's ``max_concurrency`` places, waited for up to a timeout."""

    def __init__(self, slots: threading.BoundedSemaphore, timeout: float, name: str) -> None:
        self._slots, self._timeout, self._name = slots, timeout, name

    def __enter__(self) -> None:
        if not self._slots.acquire(timeout=self._timeout):
            raise Retry(f"all of provider {self._name!r}'s places stayed busy")

    def __exit__(self, *exc: object) -> None:
        self._slots.release()
