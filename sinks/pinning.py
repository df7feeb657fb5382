"""Connecting to the address that was checked, not to whatever a name resolves to later.

A host a caller names is checked against the server's egress policy; if the connection then
resolved the name again, a DNS answer that changes in between (rebinding) would reach an
address the check refused. So a connection made for a caller asks a ``Pin`` for its address:
the name resolved once, every address checked, one of them returned; the connection goes to
that address while TLS still checks the certificate against the name (SNI) and HTTP still
sends the name as ``Host``.
"""

from __future__ import annotations

import smtplib
import socket
import ssl
from collections.abc import Callable
from typing import Any

import httpx

__all__ = [
    "Pin",
    "PinnedSMTP",
    "PinnedSMTPSSL",
    "PinnedTransport",
    "RefusedAddress",
    "pinned_request",
    "pinned_url",
]

Pin = Callable[[str, int | None], str]
"""``(host, port)`` -> the address to connect to, checked; raises ``OSError`` (with the
reason) when the host may not be reached."""


def pinned_request(url: httpx.URL, pin: Pin) -> tuple[httpx.URL, dict[str, str], dict[str, Any]]:
    """``url`` aimed at its host's checked address, the ``Host`` header and the TLS name
    (httpx's ``sni_hostname`` extension) that keep the request what it was."""
    host = url.host
    address = pin(host, url.port)
    if address == host:
        return url, {}, {}
    return (
        url.copy_with(host=address),
        {"Host": _host_header(host, url.port)},
        {"sni_hostname": host},
    )


class RefusedAddress(httpx.ConnectError):
    """The egress policy refused the address a request was aimed at (not worth a retry)."""


class PinnedTransport(httpx.BaseTransport):
    """An httpx transport whose every request goes to its host's checked address (the
    ``Host`` header and the TLS name kept): for clients that build their own requests
    (the ``openai`` package), so no request of theirs skips the egress policy."""

    def __init__(self, pin: Pin, inner: httpx.BaseTransport) -> None:
        self._pin = pin
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            url, _, extensions = pinned_request(request.url, self._pin)
        except OSError as exc:  # refused: as a failed connection is, to the client
            raise RefusedAddress(str(exc), request=request) from None
        request.url = url  # the Host header was set from the name when the request was made
        request.extensions = {**request.extensions, **extensions}
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def pinned_url(url: str, pin: Pin) -> tuple[str, str | None]:
    """``url`` (any scheme: a camera's) with its host replaced by the checked address, and
    the ``Host`` header an HTTP request to it should carry (None: the host was an address)."""
    parsed = httpx.URL(url)
    address = pin(parsed.host, parsed.port)
    if address == parsed.host:
        return url, None
    return str(parsed.copy_with(host=address)), _host_header(parsed.host, parsed.port)


def _host_header(host: str, port: int | None) -> str:
    name = f"[{host}]" if ":" in host else host
    return name if port is None else f"{name}:{port}"


# smtplib opens its socket in ``_get_socket(host, port, timeout)`` (SMTP_SSL wraps it there
# with ``server_hostname=self._host``): a stable hook of the standard library since 3.0,
# overridden here so the name is kept for TLS and only the address is pinned.
assert callable(getattr(smtplib.SMTP, "_get_socket", None)), "smtplib changed shape"


class PinnedSMTP(smtplib.SMTP):
    """``smtplib.SMTP`` that connects to ``pin``'s address for the host it is given."""

    def __init__(self, host: str, port: int, *, pin: Pin, timeout: float) -> None:
        self._pin = pin
        super().__init__(host, port, timeout=timeout)

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        return socket.create_connection((self._pin(host, port), port), timeout)


class PinnedSMTPSSL(smtplib.SMTP_SSL):
    """``smtplib.SMTP_SSL`` likewise; the certificate is checked against the host's name."""

    def __init__(
        self, host: str, port: int, *, pin: Pin, timeout: float, context: ssl.SSLContext
    ) -> None:
        self._pin = pin
        super().__init__(host, port, timeout=timeout, context=context)

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        raw = socket.create_connection((self._pin(host, port), port), timeout)
        return self.context.wrap_socket(raw, server_hostname=host)
