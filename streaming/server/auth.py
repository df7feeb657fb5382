"""Optional API key: body ``api_key`` or ``Authorization: Bearer``; the header wins."""

from __future__ import annotations

import hmac

from fastapi import Request
from pydantic import SecretStr

from ..errors import Unauthorized

__all__ = ["check_api_key"]


def check_api_key(expected: SecretStr | None, request: Request, body_key: str | None) -> None:
    if expected is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    presented = token.strip() if scheme.lower() == "bearer" and token.strip() else body_key
    if not presented:
        raise Unauthorized("this server requires an API key (api_key or Authorization: Bearer)")
    if not hmac.compare_digest(presented.encode(), expected.get_secret_value().encode()):
        raise Unauthorized("invalid API key")
