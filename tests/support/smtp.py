"""A real SMTP server (aiosmtpd) on a free loopback port: implicit TLS, STARTTLS (required)
or plain, with one login, keeping every message it accepts for the test to read."""

from __future__ import annotations

import email
import email.policy
import ssl
import threading
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Literal

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.support.certs import loopback_certificate
from tests.support.server import free_port

USER = "alerts@example.test"
PASSWORD = "mail-s3cret-pw"


@dataclass(frozen=True)
class Received:
    sender: str
    recipients: list[str]
    message: EmailMessage


class MailServer:
    """Until ``stop``; ``received`` fills as messages arrive (``wait_for`` them)."""

    def __init__(self, directory: Path, tls: Literal["implicit", "starttls", "none"]) -> None:
        self.tls = tls
        self.ca_file, key = loopback_certificate(directory, f"smtp-{tls}")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.ca_file, key)
        self.port = free_port()
        self.received: list[Received] = []
        self.logins: list[bytes] = []
        """Each successful login's password (what a test's own step sent)."""
        self._arrived = threading.Condition()
        # aiosmtpd's auth_require_tls means "after STARTTLS": a connection that is TLS from
        # its first byte (implicit) offers AUTH without it.
        options: dict[str, Any] = {"authenticator": self._login, "auth_require_tls": False}
        if tls == "implicit":
            options["ssl_context"] = context
        elif tls == "starttls":
            options |= {"tls_context": context, "require_starttls": True,
                        "auth_require_tls": True}  # fmt: skip
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port,
                                      server_hostname="127.0.0.1", **options)  # fmt: skip
        self._controller.start()

    def _login(self, server: Any, session: Any, envelope: Any, mechanism: str,
               auth_data: Any) -> AuthResult:  # fmt: skip
        ok = isinstance(auth_data, LoginPassword) and (
            auth_data.login.decode(), auth_data.password.decode()) == (USER, PASSWORD)  # fmt: skip
        if ok:
            self.logins.append(auth_data.password)
        return AuthResult(success=ok, handled=False)  # aiosmtpd answers 535 for a failure

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        with self._arrived:
            self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message))
            self._arrived.notify_all()
        return "250 OK"

    def wait_for(self, subject: str, count: int = 1, timeout: float = 30.0) -> list[Received]:
        """The messages with ``subject`` (each test its own), once ``count`` have come."""

        def mine() -> list[Received]:
            return [r for r in self.received if r.message["Subject"] == subject]

        with self._arrived:
            assert self._arrived.wait_for(lambda: len(mine()) >= count, timeout), (
                f"{len(mine())} of {count} messages '{subject}' arrived"
            )
            return mine()

    def with_subject(self, subject: str) -> list[Received]:
        with self._arrived:
            return [r for r in self.received if r.message["Subject"] == subject]

    def stop(self) -> None:
        self._controller.stop()
