"""EgressPolicy: where a caller may make this server connect.

Callers name URLs the server then opens: a session's ``rtsp_url``/``mjpeg_url``, a pipeline's
``video_reference`` and webhook sink, the ICE servers a client sends in ``webrtc_config``.
Each host is resolved and every address it resolves to must lie in
``VISIONSTREAM_ALLOWED_NETWORKS`` (default: anywhere, so LAN cameras in private ranges work).
Loopback (the server itself), link-local (cloud metadata at 169.254.169.254), unspecified and
multicast addresses are refused even then, unless a listed network lies inside that range
(``127.0.0.0/8`` to reach cameras on this machine, as the tests do).

A connection made for a caller goes to an address that was checked, never to a name resolved
again later (a DNS answer that changes in between would reach a refused address): webhooks and
custom SMTP servers resolve through ``pin`` as they connect (``sinks.pinning``), image URLs
are fetched from the address ``check_url`` returns.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from sinks.masking import mask_url

from .errors import InvalidRequest

__all__ = ["EgressPolicy", "EgressRefused", "Network", "PinRefused", "ice_server_host"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_SPECIAL: list[tuple[str, Network]] = [
    ("loopback (this server itself)", ipaddress.ip_network("127.0.0.0/8")),
    ("loopback (this server itself)", ipaddress.ip_network("::1/128")),
    ("link-local (cloud metadata lives there)", ipaddress.ip_network("169.254.0.0/16")),
    ("link-local (cloud metadata lives there)", ipaddress.ip_network("fe80::/10")),
    ("unspecified", ipaddress.ip_network("0.0.0.0/8")),
    ("unspecified", ipaddress.ip_network("::/128")),
    ("multicast", ipaddress.ip_network("224.0.0.0/4")),
    ("multicast", ipaddress.ip_network("ff00::/8")),
]

_SETTING = "VISIONSTREAM_ALLOWED_NETWORKS"


class EgressRefused(InvalidRequest):
    """A URL whose host this server may not connect to; the message names the setting."""

    code = "egress_refused"


class PinRefused(OSError):
    """A host a connection may not reach (``EgressPolicy.pin``): what a sink reports."""


class EgressPolicy:
    """Which hosts the server may connect to for a caller (cameras, webhooks, ICE servers)."""

    def __init__(self, allowed: Iterable[str | Network], setting: str = _SETTING) -> None:
        self.allowed: list[Network] = [ipaddress.ip_network(n, strict=False) for n in allowed]
        self.setting = setting
        """The setting that lists ``allowed``: what a refusal names."""

    def refusal(self, address: Address) -> str | None:
        """Why ``address`` may not be reached, or None when it may."""
        mapped = getattr(address, "ipv4_mapped", None)
        if mapped is not None:
            address = mapped  # ::ffff:127.0.0.1 is 127.0.0.1
        containing = [n for n in self.allowed if n.version == address.version and address in n]
        if not containing:
            return f"not in {self.setting}"
        for label, special in _SPECIAL:
            if address in special and not any(n.subnet_of(special) for n in containing):  # type: ignore[arg-type]
                return f"{label}; to allow it, add {special} (or a part of it) to {self.setting}"
        return None

    async def check_host(self, host: str, port: int | None, what: str, shown: str) -> str:
        """The address to connect to; raises ``EgressRefused`` unless every address
        ``host`` resolves to is allowed."""
        try:
            literal = ipaddress.ip_address(host.strip("[]"))
            addresses: list[Address] = [literal]
        except ValueError:
            addresses = await _resolve(host, port, what, shown)
        return self._checked(addresses, f"{what} {shown}")

    def _checked(self, addresses: list[Address], named: str) -> str:
        for address in addresses:
            reason = self.refusal(address)
            if reason is not None:
                raise EgressRefused(f"{named}: {address} is {reason}: refused")
        return str(addresses[0])

    def pin(self, host: str, port: int | None) -> str:
        """Blocking (a sink's thread): ``host`` resolved once and checked, the address to
        connect to; ``PinRefused`` (an ``OSError``) when it may not be reached."""
        try:
            addresses = [ipaddress.ip_address(host.strip("[]"))]
        except ValueError:
            try:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except (OSError, UnicodeError) as exc:
                raise PinRefused(f"cannot resolve {host!r}: {exc}") from None
            addresses = [_address(info[4][0]) for info in infos]
        try:
            return self._checked(addresses, host)
        except EgressRefused as exc:
            raise PinRefused(str(exc)) from None

    async def check_url(self, url: str, what: str) -> str:
        """``scheme://host[:port]/...``: its host checked (the URL shown masked); the
        address to connect to."""
        shown = mask_url(url)
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError as exc:
            raise InvalidRequest(f"{what} {shown} is not a valid URL: {exc}") from None
        if not host:
            raise InvalidRequest(f"{what} {shown} has no host")
        return await self.check_host(host, port, what, shown)

    async def check_ice_server(self, url: str) -> None:
        host, port = ice_server_host(url)
        await self.check_host(host, port, "ICE server", url.split("?")[0])


def ice_server_host(url: str) -> tuple[str, int | None]:
    """``stun:host[:port]``, ``turn:[v6]:port?transport=udp`` -> (host, port)."""
    scheme, _, rest = url.partition(":")
    if scheme.lower() not in ("stun", "stuns", "turn", "turns") or not rest:
        raise InvalidRequest(f"ICE server {url!r}: expected stun:, stuns:, turn: or turns:host")
    rest = rest.removeprefix("//").split("?")[0]
    if rest.startswith("["):
        host, _, after = rest[1:].partition("]")
        port_text = after.removeprefix(":")
    else:
        host, _, port_text = rest.partition(":")
    try:
        port = int(port_text) if port_text else None
    except ValueError:
        raise InvalidRequest(f"ICE server {url!r}: the port is not a number") from None
    if not host:
        raise InvalidRequest(f"ICE server {url!r} has no host")
    return host, port


async def _resolve(host: str, port: int | None, what: str, shown: str) -> list[Address]:
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except (OSError, UnicodeError) as exc:
        raise InvalidRequest(f"{what} {shown}: cannot resolve {host!r}: {exc}") from None
    return [_address(info[4][0]) for info in infos]


def _address(text: object) -> Address:
    return ipaddress.ip_address(str(text).split("%")[0])
