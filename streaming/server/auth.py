"""Who a request comes from: the API key (body ``api_key``, query ``api_key`` or
``Authorization: Bearer``; the header wins), or the user an authenticating proxy vouches for.

Keys: ``VISIONSTREAM_API_KEY`` is one admin key; ``VISIONSTREAM_AUTH_KEYS_FILE`` holds named ones
with roles (``keys.py``). The proxy: a request whose connection comes from an address in
``VISIONSTREAM_AUTH_PROXIES`` (the direct peer, not ``X-Forwarded-For``) and carries its user
header is that user, with the highest role ``VISIONSTREAM_AUTH_GROUP_ROLES`` gives their groups;
from anyone else those headers are ignored. A server with none of these is open (everyone
an admin), as it is by default on 127.0.0.1.

Every route but health, readiness and the page's files resolves its caller here and checks
the role ``access.ROUTES`` names (``tests/e2e/test_auth.py`` walks the served route table).
Wrong keys from one address are throttled: after ``VISIONSTREAM_AUTH_FAILURES_PER_MINUTE``
failures in a minute that address gets 429 with ``Retry-After`` until the oldest failure
leaves the window, right key or not, so a key cannot be guessed at network speed. Keys are
compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from fastapi import Request
from pydantic import SecretStr

from ..access import OPEN, AuthSettings, Forbidden, Principal, Role
from ..errors import TooManyAttempts, Unauthorized
from .keys import KeyRing

__all__ = ["PEER", "ApiKeyGuard", "body_api_key", "client_address"]

PEER = "visionstream.peer"
"""The scope key of the connection's own address, kept before ``X-Forwarded-For`` from a
trusted proxy replaces ``client`` (``connections.DirectPeer``)."""

_WINDOW_S = 60.0
# Addresses with recent failures remembered at most; the oldest is forgotten first.
_MAX_ADDRESSES = 10_000


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


_NO_KEY = frozenset(("None", "null", "undefined"))
"""What clients send for a key they were not given: Python's, JSON's and JavaScript's."""


class ApiKeyGuard:
    """Resolves every guarded request to its ``Principal`` (a key, constant-time, or the
    authenticating proxy's user), and throttles addresses that keep sending wrong keys."""

    def __init__(
        self,
        expected: SecretStr | None,
        failures_per_minute: int,
        clock: Callable[[], float] = time.monotonic,
        auth: AuthSettings | None = None,
    ) -> None:
        auth = auth or AuthSettings()
        self._expected = expected.get_secret_value().encode() if expected else None
        self._keys = KeyRing(auth.keys_file) if auth.keys_file is not None else None
        self._auth = auth
        self._proxies = [ipaddress.ip_network(n, strict=False) for n in auth.proxies]
        self._limit = failures_per_minute
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    @property
    def open(self) -> bool:
        """No key and no proxy: everyone is the open admin."""
        return self._expected is None and self._keys is None and not self._proxies

    def check(self, request: Request, body_key: str | None = None) -> Principal:
        """The caller; 401 for a missing or wrong key, 429 while the address is throttled,
        403 for a proxy's user in no mapped group."""
        proxied = self._proxied(request)
        if proxied is not None:
            return proxied
        if self.open:
            return OPEN
        address = client_address(request)
        self._throttle(address)
        presented = _bearer(request) or body_key or request.query_params.get("api_key")
        if not presented:
            raise Unauthorized("this server requires an API key (api_key or Authorization: Bearer)")
        if self._expected is not None and hmac.compare_digest(presented.encode(), self._expected):
            return Principal("admin", Role.ADMIN)  # VISIONSTREAM_API_KEY
        named = self._keys.match(presented) if self._keys is not None else None
        if named is not None:
            return named
        if presented in _NO_KEY:  # inference-sdk given api_key=None sends "None"
            raise Unauthorized(
                f"this server requires an API key, and none was sent: the key is the "
                f"text '{presented}' (a client given no key); pass this server's key"
            )
        self._fail(address)
        raise Unauthorized("invalid API key")

    def _proxied(self, request: Request) -> Principal | None:
        """The proxy's user, when the connection comes from a named proxy that says one."""
        user = self._proxy_user(request)
        if user is None:
            return None
        groups = {g.strip() for g in request.headers.get(self._auth.groups_header, "").split(",")}
        roles = [role for group, role in self._auth.group_roles.items() if group in groups]
        if not roles:
            raise Forbidden(
                f"{user!r} is signed in, and none of their groups has a role here "
                "(VISIONSTREAM_AUTH_GROUP_ROLES)"
            )
        return Principal(user, max(roles), "proxy")

    def _proxy_user(self, request: Request) -> str | None:
        """The user header's value, when the connection itself comes from a named proxy
        (from anyone else the header means nothing)."""
        user = request.headers.get(self._auth.user_header, "").strip() if self._proxies else ""
        if not user:
            return None
        try:
            address = ipaddress.ip_address(request.scope.get(PEER) or client_address(request))
        except ValueError:
            return None
        return user if any(address in network for network in self._proxies) else None

    def presented_outside_body(self, request: Request) -> bool:
        """The request carries a key in its header or query (checked before its body is
        read), or the server needs none."""
        return self.open or bool(
            _bearer(request) or request.query_params.get("api_key") or self._proxy_user(request)
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
