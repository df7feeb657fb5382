"""A model's answer off the frame's path: in a live stream a step asks in the background and
each frame carries the last answer, with its age, as a still frame carries a held model's
outputs. A slow, failing or hung provider then costs the stream nothing: the frame never
waits, and a step has at most one question in flight.

In a run that waits for its answers (an HTTP run) the question is asked on the caller's
thread, and the answer is the frame's own."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from .answers import Answer, ProviderError, Usage

__all__ = ["Held", "Holder", "asked"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Held:
    """An answer (or why there is none) and when it came."""

    text: str | None
    error: str | None
    at: float
    """``time.monotonic()`` when it came."""
    usage: Usage | None = None
    """The tokens the answer cost, where the provider said."""

    def age(self, now: float | None = None) -> float:
        return round((time.monotonic() if now is None else now) - self.at, 3)


PENDING = "no answer yet: the first question is in flight"


def asked(question: Callable[[], Answer]) -> Held:
    """The question asked now, on this thread; a provider's failure is the answer's error."""
    try:
        answer = question()
    except ProviderError as exc:
        return Held(None, str(exc), time.monotonic())
    return Held(answer.text, None, time.monotonic(), answer.usage)


class Holder:
    """One live step's answers, by element (0: the frame; a crop's position otherwise): the
    last one each, and at most one question in flight for the step."""

    def __init__(self, executor: Executor, min_interval_s: float) -> None:
        self._executor = executor
        self._min_interval = min_interval_s
        self._lock = threading.Lock()
        self._held: dict[int, Held] = {}
        self._in_flight = False
        self._last_asked = -float("inf")
        self._closed = False

    def answer(self, element: int, prepare: Callable[[], Callable[[], Answer]]) -> Held:
        """The element's last answer (a placeholder error before the first); a new question
        sent in the background when none is in flight and ``min_interval_s`` has passed.
        ``prepare`` makes that question from the frame, on this thread, and only then: a
        frame no question is sent for is not encoded for one."""
        now = time.monotonic()
        with self._lock:
            held = self._held.get(element, Held(None, PENDING, now))
            if self._in_flight or self._closed or now - self._last_asked < self._min_interval:
                return held
            self._in_flight, self._last_asked = True, now
        try:
            self._executor.submit(self._ask, element, prepare())
        except BaseException as exc:  # no question is in flight: the next frame asks
            with self._lock:
                self._in_flight = False
            if not isinstance(exc, RuntimeError):  # RuntimeError: the server is closing
                raise
        return held

    def _ask(self, element: int, question: Callable[[], Answer]) -> None:
        try:
            held = asked(question)
        except Exception as exc:  # a bug of ours: said on the step, and it asks again
            log.exception("a live step's question failed")
            held = Held(None, f"{type(exc).__name__}: {exc}", time.monotonic())
        with self._lock:
            self._held[element] = held
            self._in_flight = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
