"""E-mail over SMTP, off the caller's thread, through a bounded queue (the oldest waiting
message dropped and counted when full), each message tried a few times with backoff.

The connection is always encrypted unless the operator says otherwise: implicit TLS
(``SMTP_SSL``, the reference's only way) on port 465, STARTTLS elsewhere, and a server that
does not offer STARTTLS is an error rather than a password sent in the clear. The server's
certificate is checked against the system's CAs, or the one ``ca_file`` names.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Literal

from .pinning import Pin, PinnedSMTP, PinnedSMTPSSL
from .worker import QueueWorker

__all__ = ["EmailSender", "EmailStats", "SmtpServer", "TlsMode", "compose"]

log = logging.getLogger(__name__)

TlsMode = Literal["auto", "implicit", "starttls", "none"]


@dataclass(frozen=True)
class SmtpServer:
    """Where mail goes and how the connection is secured; ``password`` is never logged."""

    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: TlsMode = "auto"
    """``auto``: implicit TLS on 465, STARTTLS elsewhere; ``none`` only when told."""
    ca_file: Path | None = None
    timeout_s: float = 10.0
    pin: Pin | None = field(default=None, compare=False, repr=False)
    """For a server a caller named: the address checked for it (``sinks.pinning``)."""

    @property
    def mode(self) -> TlsMode:
        if self.tls != "auto":
            return self.tls
        return "implicit" if self.port == 465 else "starttls"

    def connect(self) -> smtplib.SMTP:
        context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
        smtp: smtplib.SMTP
        timeout, pin = self.timeout_s, self.pin
        if self.mode == "implicit" and pin is not None:
            smtp = PinnedSMTPSSL(self.host, self.port, pin=pin, timeout=timeout, context=context)
        elif self.mode == "implicit":
            smtp = smtplib.SMTP_SSL(self.host, self.port, timeout=timeout, context=context)
        elif pin is not None:
            smtp = PinnedSMTP(self.host, self.port, pin=pin, timeout=timeout)
        else:
            smtp = smtplib.SMTP(self.host, self.port, timeout=timeout)
        try:
            if self.mode == "starttls":
                smtp.starttls(context=context)  # SMTPNotSupportedError when not offered
            if self.username:
                smtp.login(self.username, self.password or "")
        except BaseException:
            smtp.close()
            raise
        return smtp


def compose(
    *,
    sender: str,
    to: list[str],
    cc: list[str],
    bcc: list[str],
    subject: str,
    text: str,
    html: str | None = None,
    inline_images: dict[str, bytes] | None = None,
    attachments: dict[str, bytes] | None = None,
) -> EmailMessage:
    """A message with a plain-text body (and an HTML one, its ``cid:`` images inline), and
    files attached. ``Bcc`` recipients get it; the header is not sent (``send_message``)."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = ", ".join(to)
    if cc:
        message["Cc"] = ", ".join(cc)
    if bcc:
        message["Bcc"] = ", ".join(bcc)
    message["Subject"] = subject
    message.set_content(text)
    if html is not None:
        message.add_alternative(html, subtype="html")
        body = next(p for p in message.iter_parts() if p.get_content_type() == "text/html")
        for cid, data in (inline_images or {}).items():
            body.add_related(data, "image", "jpeg", cid=f"<{cid}>")
    for name, data in (attachments or {}).items():
        maintype, subtype = (
            ("image", "jpeg")
            if name.lower().endswith((".jpg", ".jpeg"))
            else ("application", "octet-stream")
        )
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return message


@dataclass
class EmailStats:
    sent: int = 0
    failed: int = 0
    """Messages given up after ``max_attempts``."""
    dropped: int = 0
    """Messages that never got a turn: the queue was full, or the sender closed."""
    last_error: str | None = None


class EmailSender:
    """Sends each queued message through ``server`` from a thread of its own."""

    def __init__(
        self,
        server: SmtpServer,
        *,
        queue_size: int = 16,
        max_attempts: int = 3,
        initial_backoff: float = 1.0,
    ) -> None:
        self.server = server
        self.stats = EmailStats()
        self._max_attempts = max_attempts
        self._initial_backoff = initial_backoff
        self._worker: QueueWorker[EmailMessage] = QueueWorker(
            f"smtp {server.host}:{server.port}",
            self._deliver,
            capacity=queue_size,
            drop_oldest=True,
            on_drop=self._dropped,
            lazy=True,
        )

    def send(self, message: EmailMessage) -> bool:
        """Queues ``message``; False once the sender is closed."""
        return self._worker.put(message)

    def _dropped(self, _: EmailMessage) -> None:
        self.stats.dropped += 1

    def _deliver(self, message: EmailMessage) -> None:
        backoff = self._initial_backoff
        where = f"{self.server.host}:{self.server.port}"
        for attempt in range(1, self._max_attempts + 1):
            try:
                with self.server.connect() as smtp:
                    smtp.send_message(message)
                self.stats.sent += 1
                return
            except (OSError, smtplib.SMTPException) as exc:
                self.stats.last_error = f"{where}: {type(exc).__name__}: {exc}"
            if attempt == self._max_attempts or self._worker.stopping.wait(backoff):
                break
            backoff *= 2
        self.stats.failed += 1
        log.warning("e-mail through %s not sent: %s", where, self.stats.last_error)

    def close(self) -> None:
        """Idempotent; what is queued is still sent, waited for up to 10 s (then the daemon
        thread goes on alone)."""
        self._worker.close(timeout_s=10)
