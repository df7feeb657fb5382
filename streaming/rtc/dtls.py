"""DTLS that completes with peers whose certificate is RSA: GStreamer's webrtcbin (whipsink,
and any GStreamer publisher or player), among others.

aiortc's certificate is ECDSA and it offers only ECDHE-ECDSA cipher suites. That is enough
when it is the DTLS server, but whenever it answers an offer (a WHIP publisher's, a WHEP
player's) it is the DTLS client, and a server whose certificate is RSA finds no suite it can
use: GStreamer 1.22's answers "no shared cipher" and the connection fails the moment ICE
completes (measured: ``tests/e2e/test_whip.py``). Our own certificate stays ECDSA; we add the
ECDHE-RSA suites of the same strengths to those we accept.

aiortc builds each connection's SSL context in ``RTCCertificate._create_ssl_context`` with
no option for this, so ``install`` wraps that method: the context it returns gets the longer
list. An aiortc without the method is an ``RtcInstallError``.
"""

from __future__ import annotations

import functools
from typing import Any

from aiortc.rtcdtlstransport import RTCCertificate
from OpenSSL import SSL

from .errors import RtcInstallError

__all__ = ["install"]

# aiortc 1.16's own list, then the same strengths for RSA certificates. Set whole: a
# context's list cannot be read back without making a connection of it, after which
# pyOpenSSL refuses to change it.
_SUITES = b":".join(
    [
        b"ECDHE-ECDSA-AES128-GCM-SHA256",
        b"ECDHE-ECDSA-CHACHA20-POLY1305",
        b"ECDHE-ECDSA-AES128-SHA",
        b"ECDHE-ECDSA-AES256-SHA",
        b"ECDHE-RSA-AES128-GCM-SHA256",
        b"ECDHE-RSA-CHACHA20-POLY1305",
        b"ECDHE-RSA-AES128-SHA",
        b"ECDHE-RSA-AES256-SHA",
    ]
)
_MARK = "_visionstream_rsa_suites"


def _with_rsa_suites(create: Any) -> Any:
    @functools.wraps(create)
    def create_ssl_context(self: RTCCertificate, *args: Any, **kwargs: Any) -> SSL.Context:
        context = create(self, *args, **kwargs)
        context.set_cipher_list(_SUITES)
        return context

    setattr(create_ssl_context, _MARK, True)
    return create_ssl_context


def install() -> None:
    """Idempotent; raises ``RtcInstallError`` if aiortc no longer builds contexts this way."""
    create = getattr(RTCCertificate, "_create_ssl_context", None)
    if create is None or not callable(create):
        raise RtcInstallError(
            "aiortc's RTCCertificate no longer has _create_ssl_context: peers with RSA "
            "certificates (GStreamer) could not connect"
        )
    if getattr(create, _MARK, False):
        return
    RTCCertificate._create_ssl_context = _with_rsa_suites(create)  # type: ignore[method-assign]
