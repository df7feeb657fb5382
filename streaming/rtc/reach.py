"""Why two peers' media could not meet, in words that say what to set: read from the two
descriptions (the addresses each offered) and from where the server was asked.

The page (``web/protocol.js``, ``connectionProblem``) says the same from the same facts; the
server says at start when it will offer nothing a peer could reach (``unreachable_server``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from urllib.parse import urlsplit

from .ice import scanned_host_addresses

__all__ = ["connection_problem", "hopeless", "offered_addresses", "unreachable_server"]

NO_ADDRESS = (
    "the server offered no address for its media: its machine has no network address but "
    "loopback, which ICE never offers on its own; set the server's "
    "VISIONSTREAM_ICE_HOST_ADDRESSES (127.0.0.1 to stream from that machine)"
)
FIREWALL = (
    "no pair of the addresses offered connected (the server's: {server}): a firewall or NAT "
    "between them blocks UDP. A TURN server relays it (visionstream stream --turn URL, "
    "StreamConfig.turn_server, or the server's VISIONSTREAM_ICE_SERVERS)"
)


def offered_addresses(sdp: str) -> list[str]:
    """The candidate addresses a description offers, in its order, without repeats."""
    found: list[str] = []
    for line in sdp.splitlines():
        if line.startswith("a=candidate:"):
            fields = line.split()
            if len(fields) > 5 and fields[4] not in found:
                found.append(fields[4])
    return found


def _loopback(address: str) -> bool | None:
    """Whether an address is loopback; None for a name (it may resolve to either)."""
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return True if address == "localhost" else None


def connection_problem(local_sdp: str, remote_sdp: str, server_url: str) -> str:
    """Why the connection to the server at ``server_url`` did not come up, from what each
    side offered."""
    remote = ", ".join(offered_addresses(remote_sdp))
    return hopeless(local_sdp, remote_sdp, server_url) or FIREWALL.format(server=remote)


def hopeless(local_sdp: str, remote_sdp: str, server_url: str) -> str | None:
    """Why the connection cannot come up, seen before it is tried (no address offered that
    the other side could reach); None when it may."""
    remote = offered_addresses(remote_sdp)
    if not remote:
        return NO_ADDRESS
    host = urlsplit(server_url).hostname or ""
    if all(_loopback(a) for a in remote) and _loopback(host) is False:
        return (
            f"the server offered only {', '.join(remote)} for its media, which only its own "
            f"machine reaches; set the server's VISIONSTREAM_ICE_HOST_ADDRESSES to an address "
            f"of it this machine reaches ({host}, say)"
        )
    # The client's own description may list no address and still connect (a browser that
    # keeps its host addresses to itself: the server learns them from its checks).
    return None


def unreachable_server(host_addresses: Sequence[str], ice_servers: Sequence[str]) -> str | None:
    """What to say when the server starts and no peer could reach its media: it offers no
    address of its own choosing, ICE's scan finds none but loopback (which it never offers),
    and no TURN server relays. None when a peer can."""
    if host_addresses or any(url.startswith(("turn:", "turns:")) for url in ice_servers):
        return None
    if scanned_host_addresses():
        return None
    return (
        "WebRTC: this machine has no network address but loopback, and ICE never offers "
        "loopback: no browser or program could connect to the video. To stream from this "
        "machine set VISIONSTREAM_ICE_HOST_ADDRESSES=127.0.0.1; for other machines give it a "
        "network address, or a TURN server (VISIONSTREAM_ICE_SERVERS)"
    )
