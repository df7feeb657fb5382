"""A real TURN server (Debian's coturn) on free loopback ports, with long-term credentials.

It listens for TURN over UDP and TCP on one port and over TLS on another, with a certificate
of its own for 127.0.0.1; ``ca_file`` is that certificate, for the peers' ``SSL_CERT_FILE``.
Peers on loopback are allowed (coturn refuses them by default), so relayed candidates on
127.0.0.1 reach each other.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

from tests.support.certs import loopback_certificate
from tests.support.server import LoggedProcess, free_port, wait_for

TURNSERVER = shutil.which("turnserver") or "/usr/bin/turnserver"

USER = "visionstream"
PASSWORD = "relay-s3cret-pw"
REALM = "visionstream.test"


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class TurnServer(LoggedProcess):
    """``turnserver`` until ``stop``; ``url(transport)`` names it for an ``iceServers`` entry."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.port, self.tls_port = free_port(), free_port()
        self.ca_file, key = loopback_certificate(directory, "turn")
        relay = free_port()  # a base for the relay range: 200 ports nobody else was given
        super().__init__(
            [TURNSERVER, "-n", "-v", "--no-cli", "--log-file", "stdout", "--simple-log",
             "-L", "127.0.0.1", "-E", "127.0.0.1", "--allow-loopback-peers",
             "-p", str(self.port), "--tls-listening-port", str(self.tls_port), "--no-dtls",
             "--min-port", str(min(relay, 65000)), "--max-port", str(min(relay, 65000) + 200),
             "--lt-cred-mech", "--user", f"{USER}:{PASSWORD}", "--realm", REALM,
             "--cert", str(self.ca_file), "--pkey", str(key),
             "--pidfile", str(directory / "turn.pid"), "--userdb", str(directory / "turndb")],
        )  # fmt: skip
        try:
            wait_for(
                lambda: _accepts(self.port) and _accepts(self.tls_port),
                20,
                "coturn listening:\n" + "\n".join(self.output),
            )
        except BaseException:
            self.stop()
            raise

    def url(self, transport: str = "udp") -> str:
        if transport == "tls":
            return f"turns:127.0.0.1:{self.tls_port}?transport=tcp"
        return f"turn:127.0.0.1:{self.port}?transport={transport}"

    def ice_server(self, transport: str = "udp", password: str = PASSWORD) -> dict[str, str]:
        """An ``iceServers`` entry as clients send it."""
        return {"urls": self.url(transport), "username": USER, "credential": password}

    def allocations(self) -> int:
        """Relay allocations coturn has logged creating so far."""
        return sum("ALLOCATE processed, success" in line for line in list(self.lines))
