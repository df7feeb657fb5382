"""ICE configuration: which servers the server peer uses and which host addresses it offers.

Two pitfalls shape this module: aiortc falls back to a public STUN server when given no
configuration (so we always pass an explicit, possibly empty, list), and aioice never offers
127.0.0.1 while offering every other interface (so loopback-only tests, or a server that must
announce one specific address, need the host-address list restricted).

A third: aioice swallows a TURN allocation that fails (wrong credentials, a server that is not
there) and gathers without a relay candidate. Under a relay-only policy that peer can never
connect, and would only say so when the connect timeout ends: ``relay_problem`` notices it in
the gathered description and asks the TURN server once more to say why.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
from collections.abc import Sequence
from typing import Literal

import aioice.ice
import aioice.stun
import aioice.turn
from aiortc import RTCConfiguration, RTCIceServer, RTCIceTransportPolicy
from aiortc.rtcicetransport import parse_stun_turn_uri

from ..protocol.messages import IceServer

__all__ = [
    "IcePolicy",
    "build_configuration",
    "candidate_types",
    "relay_problem",
    "restrict_host_addresses",
    "scanned_host_addresses",
]

IcePolicy = Literal["all", "relay"]
"""Which candidates a peer may use: every kind, or relayed only (no host address exposed)."""

_TURN_PROBE_S = 3.0

log = logging.getLogger(__name__)

_original_get_host_addresses = aioice.ice.get_host_addresses


def scanned_host_addresses() -> list[str]:
    """The addresses aioice's own interface scan finds (never loopback), whatever
    ``restrict_host_addresses`` set."""
    return list(_original_get_host_addresses(use_ipv4=True, use_ipv6=True))


def restrict_host_addresses(addresses: Sequence[str]) -> None:
    """Make every ICE agent in this process offer exactly these host addresses.

    aioice reads host addresses through the module-level ``get_host_addresses`` function and
    has no per-connection option, so this process-wide switch is the one place we change it.
    An empty list restores aioice's own interface scan.
    """
    if not addresses:
        aioice.ice.get_host_addresses = _original_get_host_addresses
        return
    parsed = [ipaddress.ip_address(a) for a in addresses]

    def restricted(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        return [
            str(a) for a in parsed if (a.version == 4 and use_ipv4) or (a.version == 6 and use_ipv6)
        ]

    aioice.ice.get_host_addresses = restricted
    log.info("ICE host candidates restricted to %s", ", ".join(str(a) for a in parsed))


def build_configuration(
    configured: Sequence[str],
    client: Sequence[IceServer],
    *,
    username: str | None = None,
    credential: str | None = None,
    policy: IcePolicy = "all",
) -> RTCConfiguration:
    """Servers from settings (``username``/``credential`` for their TURN URLs) plus those
    the client sent; never None (see module docstring). aiortc uses the first TURN URL it
    can (udp, tcp, or turns over tcp) and the first STUN URL."""
    servers = [
        RTCIceServer(urls=url, username=username, credential=credential) for url in configured
    ]
    servers += [
        RTCIceServer(urls=list(s.urls), username=s.username, credential=s.credential)
        for s in client
    ]
    transport = RTCIceTransportPolicy.RELAY if policy == "relay" else RTCIceTransportPolicy.ALL
    return RTCConfiguration(iceServers=servers, iceTransportPolicy=transport)


def candidate_types(sdp: str) -> set[str]:
    """The candidate types (host, srflx, prflx, relay) a description offers."""
    types = set()
    for line in sdp.splitlines():
        if line.startswith("a=candidate:"):
            fields = line.split()
            if "typ" in fields[:-1]:
                types.add(fields[fields.index("typ") + 1])
    return types


def turn_url(configuration: RTCConfiguration) -> tuple[str, RTCIceServer] | None:
    """The TURN URL aiortc uses from this configuration (the first it supports), and its
    server entry."""
    for server in configuration.iceServers or []:
        for url in [server.urls] if isinstance(server.urls, str) else server.urls:
            try:
                parsed = parse_stun_turn_uri(url)
            except ValueError:
                continue
            if parsed["scheme"] in ("turn", "turns") and parsed.get("transport") in ("udp", "tcp"):
                return url, server
    return None


async def relay_problem(configuration: RTCConfiguration, local_sdp: str) -> str | None:
    """Why a peer under the relay-only policy cannot connect, or None when it can: it has no
    TURN server, or its TURN server gave no relay candidate (the server's own answer, asked
    once more, says why: wrong credentials, no answer)."""
    if configuration.iceTransportPolicy != RTCIceTransportPolicy.RELAY:
        return None
    if "relay" in candidate_types(local_sdp):
        return None
    turn = turn_url(configuration)
    if turn is None:
        return "the ICE policy is relay-only but no TURN server is configured or was sent"
    url, server = turn
    return f"TURN server {url} gave no relay candidate: {await _ask_turn(url, server)}"


async def _ask_turn(url: str, server: RTCIceServer) -> str:
    parsed = parse_stun_turn_uri(url)
    secure = ssl.create_default_context() if parsed["scheme"] == "turns" else None
    try:
        async with asyncio.timeout(_TURN_PROBE_S):
            transport, _ = await aioice.turn.create_turn_endpoint(
                asyncio.DatagramProtocol,
                (parsed["host"], parsed["port"]),
                server.username,
                server.credential,
                ssl=secure,
                transport=parsed["transport"],
            )
        transport.close()
    except aioice.stun.TransactionFailed as exc:
        code, reason = exc.response.attributes.get("ERROR-CODE", (0, "error"))
        if code == 401:
            return f"it refused the credentials of user {server.username!r} (401 {reason})"
        return f"it refused the allocation ({code} {reason})"
    except aioice.stun.TransactionTimeout:
        return "it did not answer"
    except TimeoutError:
        return f"it did not answer within {_TURN_PROBE_S:g} s"
    except (OSError, ssl.SSLError) as exc:
        return f"it could not be reached ({exc.strerror or exc})"
    return "it allocates now; it may have been unreachable a moment ago"
