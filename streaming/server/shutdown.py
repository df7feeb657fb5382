"""Graceful shutdown: on SIGTERM (or Ctrl-C) the server drains before uvicorn stops.

Draining: new sessions and pipelines are answered 503 and ``/readyz`` says so; every live
session gets a completion message whose ``termination_reason`` is ``server_shutdown`` and
closes (its upload deleted); pipelines stop and close their sinks (recordings finalised,
JSONL flushed, queued webhooks dropped with a count). All of it within
``VISIONSTREAM_SHUTDOWN_DRAIN_S``; whatever is left then is closed regardless. A second signal
skips the drain.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from types import FrameType

import uvicorn
from fastapi import FastAPI

from .fences import check_server
from .state import ServerState

__all__ = ["SHUTDOWN_REASON", "DrainingServer", "drain"]

log = logging.getLogger("visionstream")

SHUTDOWN_REASON = "server_shutdown"


async def drain(state: ServerState) -> None:
    """Idempotent; bounded by the drain setting."""
    if state.draining:
        return
    state.draining = True
    timeout = state.settings.shutdown_drain_s
    log.info(
        "shutting down: draining %d sessions and %d pipelines (at most %g s)",
        len(state.sessions),
        len(state.pipelines),
        timeout,
    )
    ending = asyncio.gather(
        state.sessions.drain(SHUTDOWN_REASON, timeout), state.pipelines.close_all()
    )
    try:
        # The sessions' own bound is the drain time; closing what is left takes a moment more.
        await asyncio.wait_for(ending, timeout + 5.0)
    except TimeoutError:
        log.warning("shutdown: the drain outlasted %g s; closing what is left", timeout)
    await state.sessions.close_all()


class DrainingServer(uvicorn.Server):
    """uvicorn's server, draining the app's sessions on the first signal before it stops."""

    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        check_server()  # raises UvicornShapeError before anything is served
        super().__init__(config)
        self._app = app
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining: asyncio.Task[None] | None = None
        app.state.binds_http = True  # its "ready:" line waits for the socket (startup below)

    @property
    def _state(self) -> ServerState | None:
        """Built by the app's lifespan: None before it has run."""
        return getattr(self._app.state, "server", None)

    async def serve(self, sockets: list | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)  # the lifespan has run, the socket is bound
        state = self._state
        if state is not None and state.listening is not None:
            state.listening.set()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._draining is not None or self._state is None or self._loop is None:
            super().handle_exit(sig, frame)  # a second signal, or nothing to drain yet
            self.force_exit = self._draining is not None
            return
        # Signal handlers run between bytecodes of the loop's own thread: schedule, not run.
        self._loop.call_soon_threadsafe(self._start_drain)

    def _start_drain(self) -> None:
        if self._draining is None and self._state is not None:
            self._draining = asyncio.ensure_future(self._drain_then_exit(self._state))

    async def _drain_then_exit(self, state: ServerState) -> None:
        try:
            await drain(state)
        finally:
            self.should_exit = True
