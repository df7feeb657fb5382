"""``GET /info``: which server this is, as inference-sdk's ``get_server_info`` reads it.

Open like the health routes (the SDK sends no key for it): a name, a version and this
process's id, nothing about what it runs."""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from ... import __version__

__all__ = ["router"]

router = APIRouter(tags=["health"])

_SERVER_ID = str(uuid.uuid4())
"""This process's id: a restarted server (or another replica) has another."""


@router.get("/info")
async def info() -> dict:
    """The server's name and version, as inference-sdk's `get_server_info` reads them."""
    return {"name": "visionstream", "version": __version__, "uuid": _SERVER_ID}
