"""Loaded by every Python process of the reference server (on PYTHONPATH), including the
process it spawns per WebRTC session: offer ICE host candidates on the addresses in
BENCH_ICE_HOST_ADDRESSES only (aioice never offers 127.0.0.1 by itself), so the side-by-side
benchmark stays on loopback as ours does."""

import os

_addresses = [a for a in os.environ.get("BENCH_ICE_HOST_ADDRESSES", "").split(",") if a]
if _addresses:
    import aioice.ice

    def _host_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        return [a for a in _addresses if (":" in a and use_ipv6) or (":" not in a and use_ipv4)]

    aioice.ice.get_host_addresses = _host_addresses
