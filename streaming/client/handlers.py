"""Handlers: the callbacks a program registers on a session (frames, data, one output, errors)."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any

from ..protocol.messages import VideoMetadata

__all__ = ["Handlers", "call_handler"]

log = logging.getLogger(__name__)

Handler = Callable[..., Any]


@functools.lru_cache(maxsize=256)
def _positional_arity(handler: Handler) -> int:
    try:
        parameters = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return 2
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return 2
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)


async def call_handler(handler: Handler, *args: Any) -> None:
    """Calls a user's handler; coroutines are awaited."""
    try:
        outcome = handler(*args)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:
        # A user's handler failing must not end the session (inference-sdk logs them too).
        log.exception("handler %s failed", getattr(handler, "__qualname__", handler))


async def _invoke(handler: Handler, value: Any, metadata: VideoMetadata) -> None:
    """``handler(value, metadata)`` or ``handler(value)``, by the handler's signature."""
    if _positional_arity(handler) >= 2:
        await call_handler(handler, value, metadata)
    else:
        await call_handler(handler, value)


class Handlers:
    """What a program asked to be called with; each call isolated (a failing handler is
    logged, the session goes on)."""

    def __init__(self) -> None:
        self.frame: list[Handler] = []
        self._data: list[Handler] = []
        self._fields: dict[str, list[Handler]] = {}
        self._errors: list[Handler] = []

    def add_data(self, handler: Handler, field: str | None = None) -> None:
        if field is None:
            self._data.append(handler)
        else:
            self._fields.setdefault(field, []).append(handler)

    def add_error(self, handler: Handler) -> None:
        self._errors.append(handler)

    async def errors(self, errors: list[str], metadata: VideoMetadata) -> None:
        for handler in self._errors:
            await _invoke(handler, errors, metadata)

    async def data(self, data: Any, metadata: VideoMetadata) -> None:
        """The whole ``serialized_output_data``, then each output to its own handlers."""
        for handler in self._data:
            await _invoke(handler, data, metadata)
        if isinstance(data, dict):
            for name, value in data.items():
                for handler in self._fields.get(name, ()):
                    await _invoke(handler, value, metadata)
