"""Optional API key: body ``api_key``, query ``api_key`` or ``Authorization: Bearer``; the
header wins.

Every route but health, readiness and the page's files checks it (``tests/e2e/test_auth.py``
walks the served route table). Wrong keys from one address are throttled: after
``STREAMING_AUTH_FAILURES_PER_MINUTE`` failures in a minute that address gets 429 with
``Retry-After`` until the oldest failure leaves the window, right key or not, so a key cannot
be guessed at network speed. The key is compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
import json
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from fastapi import Request
from pydantic import SecretStr

from ..errors import TooManyAttempts, Unauthorized

__all__ = ["ApiKeyGuard", "body_api_key", "client_address"]

_WINDOW_S = 60.0
# Addresses with recent failures remembered at most; the oldest is forgotten first.
_MAX_ADDRESSES = 10_000


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


_NO_KEY = frozenset(("None", "null", "undefined"))
"""What clients send for a key they were not given: Python's, JSON's and JavaScript's."""


class ApiKeyGuard:
    """Checks the API key of every guarded request (constant-time), and throttles addresses
    that keep sending wrong ones."""

    def __init__(
        self,
        expected: SecretStr | None,
        failures_per_minute: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._expected = expected.get_secret_value().encode() if expected else None
        self._limit = failures_per_minute
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def check(self, request: Request, body_key: str | None = None) -> None:
        """Raises 401 for a missing or wrong key, 429 while the address is throttled."""
        if self._expected is None:
            return
        address = client_address(request)
        self._throttle(address)
        presented = _bearer(request) or body_key or request.query_params.get("api_key")
        if not presented:
            raise Unauthorized("this server requires an API key (api_key or Authorization: Bearer)")
        if not hmac.compare_digest(presented.encode(), self._expected):
            if presented in _NO_KEY:  # inference-sdk given api_key=None sends "None"
                raise Unauthorized(
                    f"this server requires an API key, and none was sent: the key is the "
                    f"text '{presented}' (a client given no key); pass this server's key"
                )
            self._fail(address)
            raise Unauthorized("invalid API key")

    def presented_outside_body(self, request: Request) -> bool:
        """The request carries a key in its header or query (checked before its body is
        read), or the server needs none."""
        return self._expected is None or bool(
            _bearer(request) or request.query_params.get("api_key")
        )

    def _recent(self, address: str) -> deque[float]:
        failures = self._failures.get(address)
        if failures is None:
            return deque()
        horizon = self._clock() - _WINDOW_S
        while failures and failures[0] <= horizon:
            failures.popleft()
        if not failures:
            del self._failures[address]
        return failures

    def _throttle(self, address: str) -> None:
        failures = self._recent(address)
        if len(failures) >= self._limit:
            retry_after = max(1, math.ceil(failures[0] + _WINDOW_S - self._clock()))
            raise TooManyAttempts(
                f"too many wrong API keys from {address}; try again in {retry_after} s",
                retry_after=retry_after,
            )

    def _fail(self, address: str) -> None:
        failures = self._failures.setdefault(address, deque())
        self._failures.move_to_end(address)
        failures.append(self._clock())
        while len(failures) > self._limit:
            failures.popleft()
        while len(self._failures) > _MAX_ADDRESSES:
            self._failures.popitem(last=False)


def _bearer(request: Request) -> str | None:
    """The key of ``Authorization: Bearer``. (inference-sdk's default "legacy" transport
    puts it in the query of its GETs instead: masked in the access log, access_log.py.)"""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def body_api_key(raw: bytes) -> str | None:
    """``api_key`` of a JSON object body, read before the body is validated: a caller
    without the key learns nothing from validation errors."""
    if not raw or b"api_key" not in raw:
        return None
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):  # nested past the parser's depth: no key found
        return None
    key = body.get("api_key") if isinstance(body, dict) else None
    return key if isinstance(key, str) else None
