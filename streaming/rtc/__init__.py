"""Everything of ours that depends on aiortc's and aioice's internals, in one package.

aiortc and aioice have no options for what we change, so each change replaces one name that
they look up in their own modules: the host addresses ICE offers (``ice``), the video jitter
buffer that releases a frame on its marker packet (``jitter``), the VP8 and H.264 encoders
(``encoder``), the DTLS cipher suites that let RSA-certificate peers connect (``dtls``), the
REMB ceiling on clients' uploads (``remb``). ``release`` (hidden frames for receivers that
hold frames) and
``track`` (any ``FrameSource`` as a track; frames of a remote track) use aiortc's public API
but only make sense with the rest. Nothing here changes anything on import:

- the server's app factory calls ``install_for_server`` for its own process;
- our client enters ``releasing_on_marker()`` around the connections it makes, so a user's
  own aiortc peers in the same process keep aiortc's behaviour (``Client(...,
  release_on_marker=False)`` opts out for ours too).

Each install checks aiortc still has the shape it was written for and raises
``RtcInstallError`` otherwise; pyproject pins aiortc to the range the tests ran on.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import dtls, encoder, jitter, remb
from .encoder import BitrateLimits
from .errors import RtcInstallError
from .ice import build_configuration, restrict_host_addresses
from .jitter import releasing_on_marker

__all__ = [
    "BitrateLimits",
    "RtcInstallError",
    "build_configuration",
    "install_for_server",
    "releasing_on_marker",
    "restrict_host_addresses",
]


def install_for_server(
    host_addresses: Sequence[str],
    kbps_per_megapixel: int = 0,
    limits: BitrateLimits | None = None,
    receive_ceiling: int = 0,
) -> None:
    """The server's process: ICE offers ``host_addresses`` (empty: every interface), every
    video receiver releases frames on the marker packet, VP8 (without the denoiser) and
    H.264 are encoded within ``limits`` and at most ``kbps_per_megapixel`` (0: no cap),
    REMBs ask clients for at most ``receive_ceiling`` bit/s (0: no ceiling), DTLS accepts
    peers with RSA certificates. Idempotent; raises ``RtcInstallError``."""
    restrict_host_addresses(host_addresses)
    jitter.install(everywhere=True)
    encoder.install(kbps_per_megapixel, limits)
    remb.install(receive_ceiling)
    dtls.install()
