"""A real DNS server on 127.0.0.1:53 (dnspython's wire format, UDP and TCP), answering each
name from a list of addresses in turn, TTL 0: the first A query gets the first, the next the
second, the last repeated. What a name that rebinds looks like to a resolver.

Port 53 on loopback exists only inside the test namespace (``tests/run.sh``), so nothing
else on the machine sees it; a process reads it through a ``resolv.conf`` bound over
``/etc/resolv.conf`` in a mount namespace of its own (``resolving_through``).
"""

from __future__ import annotations

import socket
import socketserver
import threading
from pathlib import Path

import dns.message
import dns.rdatatype
import dns.rrset

__all__ = ["RebindingDns", "resolving_through"]


class RebindingDns:
    """Until ``stop``: A queries for each name answered from its list, in turn."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = {name.rstrip(".").lower() + ".": list(a) for name, a in answers.items()}
        self.asked: dict[str, int] = {}
        self._lock = threading.Lock()
        dns_server = self

        class Udp(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                data, sock = self.request
                sock.sendto(dns_server.reply(data), self.client_address)

        class Tcp(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                size = int.from_bytes(self.request.recv(2), "big")
                reply = dns_server.reply(self.request.recv(size))
                self.request.sendall(len(reply).to_bytes(2, "big") + reply)

        socketserver.ThreadingUDPServer.allow_reuse_address = True
        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self._servers = [
            socketserver.ThreadingUDPServer(("127.0.0.1", 53), Udp),
            socketserver.ThreadingTCPServer(("127.0.0.1", 53), Tcp),
        ]
        for server in self._servers:
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()

    def reply(self, data: bytes) -> bytes:
        query = dns.message.from_wire(data)
        response = dns.message.make_response(query)
        question = query.question[0]
        name = question.name.to_text().lower()
        if question.rdtype == dns.rdatatype.A and name in self.answers:
            with self._lock:
                turn = self.asked.get(name, 0)
                self.asked[name] = turn + 1
            addresses = self.answers[name]
            address = addresses[min(turn, len(addresses) - 1)]
            response.answer.append(dns.rrset.from_text(name, 0, "IN", "A", address))
        elif name not in self.answers:
            response.set_rcode(3)  # NXDOMAIN; AAAA of a known name: no data
        return response.to_wire()

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()


def resolving_through(directory: Path) -> list[str]:
    """The command prefix that runs a program resolving names through 127.0.0.1:53 alone
    (a ``resolv.conf`` of its own bound in a private mount namespace; needs root)."""
    conf = directory / "resolv.conf"
    conf.write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:2\n")
    return [
        "unshare",
        "--mount",
        "sh",
        "-c",
        f'mount --bind {conf} /etc/resolv.conf && exec "$@"',
        "sh",
    ]


def can_serve_dns() -> bool:
    """Root in a namespace of loopback only: port 53 is ours and mounts are allowed."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind(("127.0.0.1", 53))
    except OSError:
        return False
    # Only ``lo`` here: the namespace tests/run.sh makes, never the machine's own.
    return [name for _, name in socket.if_nameindex()] == ["lo"]
