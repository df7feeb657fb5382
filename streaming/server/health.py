"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from .state import ServerState, get_state

__all__ = ["router"]

router = APIRouter()


@router.get("/healthz")
async def healthz(state: ServerState = Depends(get_state)) -> dict:
    return {
        "status": "ok",
        "ready": state.ready.is_set(),
        "sessions": len(state.sessions),
        "max_sessions": state.settings.max_sessions,
        "models": {
            name: {"providers": model.session.providers}
            for name, model in state.models.loaded().items()
        },
        # One entry per camera being read, however many sessions and pipelines watch it.
        "sources": state.hub.stats(),
    }


@router.get("/readyz")
async def readyz(state: ServerState = Depends(get_state)) -> JSONResponse:
    if state.ready.is_set():
        return JSONResponse({"status": "ready"})
    message = state.startup_error or "models are still loading"
    return JSONResponse({"status": "not ready", "message": message}, status_code=503)


@router.get("/metrics")
async def metrics(state: ServerState = Depends(get_state)) -> Response:
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
