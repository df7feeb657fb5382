"""A ceiling on the bitrate the server's REMB lets a client send its video at.

aiortc's receiver estimates the bandwidth from packet arrival times and sends it back as
REMB; the client's encoder climbs to it. Between two processes on one machine (or a LAN) the
estimate keeps rising, so every client ends at its encoder's maximum (aiortc's 1.5 Mbps,
a browser's 2.5 Mbps and more), and each packet costs the server Python time (SRTP, RTP,
the jitter buffer): the hour-long soak drifted 25 ms as four clients' uploads rose and the
shared cores starved (``benchmarks/README.md``), and held steady with the uploads at 500 kbps.

aiortc builds each REMB with the module name ``pack_remb_fci`` in ``rtcrtpreceiver``;
``install`` replaces that name with one that lowers the bitrate to the ceiling first.
"""

from __future__ import annotations

from typing import Any

from aiortc import rtcrtpreceiver, rtp

from .errors import RtcInstallError

__all__ = ["install"]


class _CappedRemb:
    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling

    def __call__(self, bitrate: int, ssrcs: list[int]) -> Any:
        if self.ceiling > 0:
            bitrate = min(bitrate, self.ceiling)
        return rtp.pack_remb_fci(bitrate, ssrcs)


def install(ceiling: int) -> None:
    """REMBs this process sends say at most ``ceiling`` bit/s (0: aiortc's estimate).
    Idempotent; raises ``RtcInstallError`` if aiortc no longer builds REMBs this way."""
    current = getattr(rtcrtpreceiver, "pack_remb_fci", None)
    if isinstance(current, _CappedRemb):
        current.ceiling = ceiling
        return
    if current is not rtp.pack_remb_fci:
        raise RtcInstallError(
            "aiortc's receiver no longer builds REMB through rtcrtpreceiver.pack_remb_fci: "
            "clients' upload bitrates would be unbounded"
        )
    rtcrtpreceiver.pack_remb_fci = _CappedRemb(ceiling)
