"""``GET /models``: the models directory, and where each loaded model runs."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Request

from .auth import check_api_key
from .state import ServerState, get_state

__all__ = ["router"]

router = APIRouter()


@router.get("/models")
async def list_models(request: Request, state: ServerState = Depends(get_state)) -> dict:
    check_api_key(state.settings.api_key, request, None)
    return {"models": await asyncio.to_thread(state.models.describe)}
