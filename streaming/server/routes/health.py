"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import socket

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from sinks.masking import mask_credentials

from ...access import Forbidden
from ...errors import TooManyAttempts, Unauthorized
from ...metrics import merge_workers
from ...rtc.offer import open_peer_connections
from ..docs import ERROR_RESPONSES
from ..http import authorize
from ..state import ServerState, get_state

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz(request: Request, state: ServerState = Depends(get_state)) -> dict:
    """Liveness: 200 while the process serves HTTP; no key needed."""
    health = {
        "status": "ok",
        "ready": state.ready.is_set(),
        "sessions": len(state.sessions),
        "peer_connections": open_peer_connections(),
        "publishers": len(state.publishers),
        "max_sessions": state.settings.max_sessions,
        "models": _models(state),
        "ice": _ice(state),
        # One entry per camera being read, however many sessions and pipelines watch it.
        "sources": state.hub.stats(),
        # The event store's writer: written, dropped, waiting, and why the database is not
        # reachable now (its URL with the password masked).
        "events": state.events.stats() if state.events is not None else None,
        "workers": (
            await state.deployment.workers()
            if state.deployment is not None
            else [_this_worker(state)]
        ),
        # Which worker answered: behind Ray Serve's proxy, where its router sent this request.
        "served_by": state.deployment.worker if state.deployment is not None else "embedded",
    }
    return health if _authorized(request, state) else _public(health)


def _authorized(request: Request, state: ServerState) -> bool:
    """The caller presents the API key (or the server has none). A wrong key counts towards
    the address's throttle as anywhere else; health itself always answers."""
    try:
        state.auth.check(request)  # any known caller sees the full health
    except (Unauthorized, TooManyAttempts, Forbidden):
        return False
    return True


def _public(health: dict) -> dict:
    """Health for a caller without the key: counts and states, no address of anything (the
    cameras, the event database, the ICE servers), since URLs carry names, keys and tokens."""
    sources = [{k: v for k, v in s.items() if k not in _ADDRESSED} for s in health["sources"]]
    events = health["events"]
    if events is not None:
        events = {k: v for k, v in events.items() if k not in _ADDRESSED}
    return {**{k: v for k, v in health.items() if k != "ice"}, "sources": sources, "events": events}


# Fields of health entries that name an address (or hold a message that does).
_ADDRESSED = frozenset({"url", "last_error", "database", "error"})


def _ice(state: ServerState) -> dict:
    """The server peer's ICE settings, the TURN password masked."""
    settings = state.settings
    return {
        # turn:host:port?transport=udp: its query names a transport, never a secret (the
        # credentials are settings of their own, masked below).
        "servers": [mask_credentials(url) for url in settings.ice_servers],
        "username": settings.ice_username,
        "credential": "***" if settings.ice_credential is not None else None,
        "policy": settings.ice_transport_policy,
        "client_servers_allowed": settings.allow_client_ice_servers,
    }


def _this_worker(state: ServerState) -> dict:
    return {"worker": "embedded", "node": socket.gethostname(), **state.load()}


def _models(state: ServerState) -> dict:
    return {
        name: {
            "backend": model.session.backend,
            "device": model.session.device,
            "providers": model.session.providers,
            "degraded": model.session.degraded,
            "max_batch_size": model.batcher.max_batch_size,
        }
        for name, model in state.models.loaded().items()
    }


@router.get("/readyz")
async def readyz(state: ServerState = Depends(get_state)) -> JSONResponse:
    """Readiness: 200 once the default model is loaded, else 503 with why (no key needed)."""
    if state.draining:
        return JSONResponse({"status": "shutting down", "message": "draining"}, status_code=503)
    unready = await state.deployment.unready() if state.deployment is not None else None
    if state.ready.is_set() and unready is None:
        models = _models(state)
        # Still serving, but on less than asked for (say, CUDA requested and CPU in use).
        degraded = any(m["degraded"] for m in models.values())
        return JSONResponse({"status": "degraded" if degraded else "ready", "models": models})
    message = state.startup_error or unready or "models are still loading"
    return JSONResponse({"status": "not ready", "message": message}, status_code=503)


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={401: ERROR_RESPONSES[401], 429: ERROR_RESPONSES[429]},
)
async def metrics(request: Request, state: ServerState = Depends(get_state)) -> Response:
    """Prometheus metrics: sessions, pipelines, frames per path, model batches, latencies."""
    if state.settings.metrics_require_api_key:
        authorize(request, state)
    if state.deployment is not None:  # every worker's, each sample labelled with its worker
        body = merge_workers(await state.deployment.metrics())
    else:
        body = state.metrics.render()
    return Response(body, media_type=CONTENT_TYPE_LATEST)
