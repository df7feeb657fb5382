"""ICE configuration: which servers the server peer uses and which host addresses it offers.

Two pitfalls shape this module: aiortc falls back to a public STUN server when given no
configuration (so we always pass an explicit, possibly empty, list), and aioice never offers
127.0.0.1 while offering every other interface (so loopback-only tests, or a server that must
announce one specific address, need the host-address list restricted).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence

import aioice.ice
from aiortc import RTCConfiguration, RTCIceServer

from ..protocol.messages import IceServer

__all__ = ["build_configuration", "restrict_host_addresses"]

log = logging.getLogger(__name__)

_original_get_host_addresses = aioice.ice.get_host_addresses


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


def build_configuration(configured: Sequence[str], client: Sequence[IceServer]) -> RTCConfiguration:
    """Servers from settings plus those the client sent; never None (see module docstring)."""
    servers = [RTCIceServer(urls=url) for url in configured]
    servers += [
        RTCIceServer(urls=list(s.urls), username=s.username, credential=s.credential)
        for s in client
    ]
    return RTCConfiguration(iceServers=servers)
