"""Slow and idle HTTP clients cannot hold connections (slowloris).

uvicorn times out a keep-alive connection only between requests whose head has begun to
arrive; a client that connects and says nothing, or sends a request head a byte at a time, or
stops halfway through a body, holds its connection (and a file descriptor) forever.

- ``guarded_protocol``: uvicorn's own HTTP protocol (httptools where installed, else h11),
  closing a connection whose next request head is not complete within
  ``VISIONSTREAM_HTTP_HEADER_TIMEOUT_S`` of the connection opening or of the last response.
- ``BodyTimeout``: ASGI middleware answering 408 when a request body's next part takes longer
  than ``VISIONSTREAM_HTTP_BODY_TIMEOUT_S``, or the whole body longer than
  ``VISIONSTREAM_HTTP_BODY_DEADLINE_S`` (a byte a second would pass the first).
- ``VISIONSTREAM_MAX_CONNECTIONS`` (uvicorn's ``limit_concurrency``, set in ``cli.py``) caps the
  connections one process holds at all.
- ``DirectPeer``: keeps the connection's own address (``auth.PEER``) before uvicorn's
  ``ProxyHeadersMiddleware`` replaces ``client`` with a trusted proxy's ``X-Forwarded-For``:
  an authenticating proxy is recognised by where the connection comes from, never by a header.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import error_body
from .auth import PEER
from .fences import check_protocol

__all__ = ["BodyTimeout", "DirectPeer", "guarded_protocol"]


class _HeadDeadline:
    """Mixed into a uvicorn HTTP protocol class; uses only its public attributes
    (``cycle``, ``transport``, ``loop``) and lifecycle methods."""

    header_timeout_s = 10.0
    cycle: Any
    transport: Any
    loop: asyncio.AbstractEventLoop

    def _arm(self) -> None:
        self._disarm()
        self._waiting_after = self.cycle
        timeout = self.header_timeout_s
        self._head_timer: asyncio.TimerHandle | None = self.loop.call_later(
            timeout, self._head_overdue
        )

    def _disarm(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
            self._head_timer = None

    def _head_overdue(self) -> None:
        self._head_timer = None
        if self.cycle is self._waiting_after and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self.cycle is not getattr(self, "_waiting_after", None):
            self._disarm()  # a new request's head is complete

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]


def guarded_protocol(header_timeout_s: float) -> type:
    """uvicorn's ``auto`` HTTP protocol class, with the request-head deadline; raises
    ``UvicornShapeError`` if that class is not the shape the deadline was written for."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    except ImportError:  # httptools is optional for uvicorn
        from uvicorn.protocols.http.h11_impl import H11Protocol as base  # type: ignore[assignment]
    check_protocol(base)
    return type(
        f"Guarded{base.__name__}",
        (_HeadDeadline, base),
        {"header_timeout_s": header_timeout_s},
    )


class BodyTimeout:
    """408 when a request body stalls (its next part takes longer than ``timeout_s``) or
    trickles (it is not complete ``deadline_s`` after the request began); the app sees a
    disconnect and its answer is dropped.

    Only the body is timed: once it is complete, ``receive`` waits as long as the app likes
    (that is how apps learn of a disconnect)."""

    def __init__(self, app: ASGIApp, timeout_s: float, deadline_s: float = math.inf) -> None:
        self.app = app
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_done = False
        stalled: str | None = None
        deadline = asyncio.get_running_loop().time() + self.deadline_s

        async def timed_receive() -> Message:
            nonlocal body_done, stalled
            if body_done:
                return await receive()
            left = deadline - asyncio.get_running_loop().time()
            try:
                message = await asyncio.wait_for(receive(), min(self.timeout_s, max(left, 0)))
            except TimeoutError:
                body_done = True
                stalled = (
                    f"the request body stalled for {self.timeout_s:g} s"
                    if left > self.timeout_s
                    else f"the request body was not complete within {self.deadline_s:g} s"
                )
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def guarded_send(message: Message) -> None:
            if not stalled:
                await send(message)

        await self.app(scope, timed_receive, guarded_send)
        if stalled is not None:
            body = json.dumps(error_body(stalled, "body_timeout", "BodyTimeout")).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 408,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})


class DirectPeer:
    """ASGI middleware: the connection's own address kept as ``scope[PEER]``, then
    ``X-Forwarded-For`` believed from ``trusted`` proxies alone (uvicorn's own middleware,
    which ``cli.py`` then leaves off)."""

    def __init__(self, app: ASGIApp, trusted: list[str]) -> None:
        from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

        # uvicorn types ASGI with its own TypedDicts, Starlette with mappings: the same calls.
        self._app: Any = ProxyHeadersMiddleware(app, trusted) if trusted else app  # type: ignore[arg-type]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and scope.get("client"):
            scope[PEER] = scope["client"][0]
        await self._app(scope, receive, send)
