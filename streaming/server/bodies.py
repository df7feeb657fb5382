"""Request bodies of guarded routes: size-limited, and never read for a caller whose key is
already known to be wrong.

The API key may come in the ``Authorization`` header, the query or the JSON body's
``api_key``. Where it comes in the header or the query it is checked before a byte of the
body is read, so a caller without the key cannot make the server read (or wait for) a body;
only a key that can come in nothing but the body waits for it.
"""

from __future__ import annotations

from fastapi import Request

from ..errors import RequestTooLarge
from .auth import body_api_key
from .state import ServerState

__all__ = ["guarded_body", "read_limited_body"]


async def read_limited_body(request: Request, limit: int) -> bytes:
    """The body, refusing (413) anything over ``limit`` bytes without reading it all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
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
        state.auth.check(request)
        return await read_limited_body(request, limit)
    raw = await read_limited_body(request, limit)
    state.auth.check(request, body_api_key(raw))
    return raw
