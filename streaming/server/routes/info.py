"""``GET /info``: which server this is, as inference-sdk's ``get_server_info`` reads it.
Open like the health routes (the SDK sends no key for it): a name, a version and this
process's id, nothing about what it runs.

``GET /auth/me``: who the caller is and what their role lets them do (what the pages show
and hide)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request

from ... import __version__
from ...access import Role
from ..docs import ERROR_RESPONSES
from ..http import AUTHENTICATED, principal_of

__all__ = ["router"]

router = APIRouter(tags=["health"])

_SERVER_ID = str(uuid.uuid4())
"""This process's id: a restarted server (or another replica) has another."""


@router.get("/info")
async def info() -> dict:
    """The server's name and version, as inference-sdk's `get_server_info` reads them."""
    return {"name": "visionstream", "version": __version__, "uuid": _SERVER_ID}


@router.get(
    "/auth/me",
    dependencies=[AUTHENTICATED],
    responses={status: ERROR_RESPONSES[status] for status in (401, 403, 429)},
)
async def me(request: Request) -> dict:
    """The caller (a key's name, the proxy's user, or `anonymous` on an open server), their
    role, and what it allows: `watch`, `run` (sessions, pipelines, workflows), `admin`."""
    principal = principal_of(request)
    role = principal.role
    can = {"watch": True, "run": role >= Role.OPERATOR, "admin": role >= Role.ADMIN}
    return {**principal.describe(), "can": can}
