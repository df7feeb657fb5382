"""``GET /models``: the models directory, and where each loaded model runs."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Request

from .docs import ERROR_RESPONSES
from .state import ServerState, get_state

__all__ = ["router"]

router = APIRouter(responses=ERROR_RESPONSES)


@router.get("/models")
async def list_models(request: Request, state: ServerState = Depends(get_state)) -> dict:
    state.auth.check(request)
    return {"models": await asyncio.to_thread(state.models.describe)}
