"""The server's own mail relay (``VISIONSTREAM_SMTP_*``), for what the server sends on its own
account (``email_notification@v2``'s managed provider, event descriptions): never an open
relay, it sends only to ``VISIONSTREAM_SMTP_ALLOWED_RECIPIENTS``, at most
``VISIONSTREAM_SMTP_MAX_RECIPIENTS`` a message."""

from __future__ import annotations

from sinks.email import SmtpServer

from .settings.notifications import SmtpSettings

__all__ = ["allowed_recipient", "refused_recipients", "relay_server"]


def allowed_recipient(address: str, allowed: list[str]) -> bool:
    """``address`` is one ``allowed`` names, or of a domain it names (``@example.com``)."""
    address = address.strip().lower()
    domain = "@" + address.rpartition("@")[2]
    return any(a == "*" or a.lower() in (address, domain) for a in allowed)


def refused_recipients(smtp: SmtpSettings, recipients: list[str]) -> str | None:
    """Why the relay will not send to ``recipients`` (naming the setting); None: it will."""
    if len(recipients) > smtp.max_recipients:
        return (
            f"{len(recipients)} recipients are over the server's {smtp.max_recipients} "
            "(VISIONSTREAM_SMTP_MAX_RECIPIENTS)"
        )
    refused = [r for r in recipients if not allowed_recipient(r, smtp.allowed_recipients)]
    if refused:
        more = " and more" if len(refused) > 3 else ""
        return (
            f"the server's mail relay does not send to {refused[:3]}{more} "
            "(VISIONSTREAM_SMTP_ALLOWED_RECIPIENTS)"
        )
    return None


def relay_server(smtp: SmtpSettings) -> tuple[SmtpServer, str] | None:
    """The relay and its From address; None where none is set (``VISIONSTREAM_SMTP_HOST``,
    and ``VISIONSTREAM_SMTP_SENDER`` or ``_USERNAME``)."""
    sender = smtp.sender or smtp.username
    if not smtp.host or not sender:
        return None
    password = smtp.password.get_secret_value() if smtp.password else None
    server = SmtpServer(
        smtp.host,
        smtp.port,
        username=smtp.username,
        password=password,
        tls=smtp.tls,
        ca_file=smtp.ca_file,
    )
    return server, sender
