"""What every HTTP route shares: the one way a route is authenticated, request bodies read
within their limit, and the one 422 shape.

Authentication, one style: a route whose key can come only in the header or the query takes
``dependencies=[AUTHENTICATED]`` (or its router does); a route with a body takes its body
from ``authenticated_body``, which checks a header or query key before a byte of the body is
read, so a caller without the key cannot make the server read (or wait for) a body; only a
key that can come in nothing but the body (inference-sdk's JSON routes) waits for it.
Either way the caller's ``Principal`` must have the role ``access.ROUTES`` names for the
route (a 403 otherwise), and is kept for the route (``principal_of``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from ..access import OPEN, Principal, route_role
from ..config import Settings
from ..errors import RequestTooLarge, error_body
from .auth import body_api_key, client_address
from .state import ServerState, get_state

__all__ = [
    "AUTHENTICATED",
    "authenticated_body",
    "authorize",
    "current_caller",
    "current_principal",
    "guarded_body",
    "principal_of",
    "read_limited_body",
    "require_api_key",
    "validation_response",
]


async def read_limited_body(request: Request, limit: int) -> bytes:
    """The body, refusing (413) anything over ``limit`` bytes without reading it all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(f"request body of {declared} bytes exceeds the limit of {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RequestTooLarge(f"request body exceeds the limit of {limit} bytes")
    return bytes(body)


async def guarded_body(
    request: Request, state: ServerState, limit: int, *, key_in_body: bool = True
) -> bytes:
    """The body of a request the API key guards, the key checked as early as it can be:
    from the header or query before the body is read, from the body's ``api_key`` (where
    ``key_in_body``: the inference-sdk's JSON routes) once it is."""
    if not key_in_body or state.auth.presented_outside_body(request):
        _admit(request, state.auth.check(request))
        return await read_limited_body(request, limit)
    raw = await read_limited_body(request, limit)
    _admit(request, state.auth.check(request, body_api_key(raw)))
    return raw


_CURRENT: ContextVar[tuple[Principal, str]] = ContextVar("principal", default=(OPEN, "unknown"))


def authorize(request: Request, state: ServerState, body_key: str | None = None) -> Principal:
    """The caller, with the route's role (401, 403 or 429 otherwise): for a route that
    checks its caller itself (inside its own error shape, as the V2 routes do)."""
    principal = state.auth.check(request, body_key)
    _admit(request, principal)
    return principal


def _admit(request: Request, principal: Principal) -> None:
    """The caller has the route's role (``access.ROUTES``), and is kept for the route (its
    dependencies and handler run in this request's task: ``current_principal``)."""
    route = request.scope.get("route")
    path = getattr(route, "path", request.url.path)
    principal.require(route_role(request.method, path), f"{request.method} {path}")
    request.state.principal = principal
    _CURRENT.set((principal, principal.caller(client_address(request))))


def current_principal() -> Principal:
    """The guarded request's caller, for what the route calls (compiling its workflow)."""
    return _CURRENT.get()[0]


def current_caller() -> str:
    """What the server's shared resources ration the guarded request's caller by."""
    return _CURRENT.get()[1]


def principal_of(request: Request) -> Principal:
    """Who the guarded request comes from (resolved before the route ran)."""
    principal: Principal = request.state.principal
    return principal


def authenticated_body(limit: Callable[[Settings], int], *, key_in_body: bool = True) -> Any:
    """A route parameter: the request's body (at most ``limit(settings)`` bytes), once the
    caller's key is known to be right (``guarded_body``)."""

    async def body(request: Request, state: ServerState = Depends(get_state)) -> bytes:
        return await guarded_body(request, state, limit(state.settings), key_in_body=key_in_body)

    return Depends(body)


async def require_api_key(request: Request, state: ServerState = Depends(get_state)) -> None:
    """For routes whose key can only come in the header."""
    _admit(request, state.auth.check(request))


AUTHENTICATED = Depends(require_api_key)
"""``dependencies=[AUTHENTICATED]``: the route (or router) needs the key."""


def validation_response(errors: Sequence[Any]) -> JSONResponse:
    """The one 422 body, for pydantic's errors from FastAPI's validation or our own."""
    first = errors[0] if errors else {"loc": (), "msg": "invalid"}
    path = [str(p) for p in first["loc"] if p != "body"]
    # A body that is not JSON at all is located at a character offset: say "body".
    where = "body" if all(p.isdigit() for p in path) else ".".join(path)
    detail = json.loads(json.dumps(list(errors), default=str))
    for entry in detail:
        entry.pop("input", None)  # whatever the caller sent (an API key, say) is not echoed
    body = error_body(
        f"invalid request: {where}: {first['msg']}",
        "invalid_body",
        "RequestValidationError",
        detail,
    )
    return JSONResponse(status_code=422, content=body)
