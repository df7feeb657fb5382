"""``email_notification`` v1 and v2: a message per frame that reaches the step (put it behind
``continue_if`` or ``delta_filter``), ``{{ $parameters.name }}`` in the text replaced by
``message_parameters`` (each through its ``message_parameters_operations``), files attached.

Mail goes through ``sinks.email.EmailSender`` (a queue on a thread of its own, retries), so
a frame never waits on a mail server, whatever ``fire_and_forget`` says; ``cooldown_seconds``
spaces messages. v1 sends plain text through the step's SMTP server; v2 sends HTML (images
among the parameters inline) through the step's server (``Custom SMTP``) or, for Roboflow's
managed provider, the server's own relay (``VISIONSTREAM_SMTP_*``), refused when compiled if
there is none. Every SMTP host a step names passes the egress policy before it compiles.

The relay is the operator's, not the caller's: it sends only to the recipients
``VISIONSTREAM_SMTP_ALLOWED_RECIPIENTS`` lists, at most every ``VISIONSTREAM_SMTP_MIN_INTERVAL_S``
per step and per caller, whatever ``cooldown_seconds`` says. Every message, through the relay
or the step's own server, has at most ``VISIONSTREAM_SMTP_MAX_RECIPIENTS`` recipients and
``VISIONSTREAM_SMTP_MAX_ATTACHMENT_BYTES`` / ``MAX_MESSAGE_BYTES``; over them the step reports an
error and sends nothing.
"""

from __future__ import annotations

import html
import ipaddress
import re
import threading
import time
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any, ClassVar

import cv2

from sinks.email import EmailSender, SmtpServer, compose

from ...config import SmtpSettings
from ...errors import WorkflowCompilationError
from ...mail_relay import refused_recipients, relay_server
from ..query import Env, named_chains
from ..serialization import serialize_value
from .base import BlockSettings, BuildContext, FrameState, WorkflowImage, setting
from .fields import ANY, SECRET, FieldSpec, Takes
from .sinks import NotificationBlock
from .verification import Verifiable

__all__ = ["EmailNotificationBlock", "EmailNotificationV2Block", "MessageTemplate", "jpeg"]

PLACEHOLDER = re.compile(r"{{\s*\$parameters\.(\w+)\s*}}")
MANAGED = "Roboflow Managed API Key"
CUSTOM = "Custom SMTP"
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*\.?")
_IMAGE_STYLE = "max-width: 600px; height: auto;"
_SENDERS_KEPT = 4
"""Distinct SMTP servers (or logins) a step keeps a sender for: one, nearly always."""


def jpeg(image: WorkflowImage) -> bytes:
    ok, data = cv2.imencode(".jpg", image.numpy, [cv2.IMWRITE_JPEG_QUALITY, 90])
    if not ok:
        raise ValueError("the image could not be encoded")
    return data.tobytes()


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float | bool) or value is None:
        return str(value)
    return str(serialize_value(value, 75, None))


class MessageTemplate:
    """A notification step's ``message`` and its ``message_parameters``, each value through
    its ``message_parameters_operations``: what e-mail and Slack steps share."""

    def __init__(self, step: str, config: Any, field: str = "message") -> None:
        """``config``: settings with the template (``field``: ``message``, or a VLM step's
        ``prompt``), ``<field>_parameters`` (the names) and ``<field>_parameters_operations``."""
        self.template: str = getattr(config, field, None) or ""
        self._values = f"{field}_parameters"
        self._chains = named_chains(
            step,
            self._values,
            f"{field}_parameters_operations",
            getattr(config, self._values),
            getattr(config, f"{field}_parameters_operations"),
        )

    def parameters(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        """This frame's parameters, each after its operations."""
        env = Env(facts=frame.facts)
        return {
            key: self._chains[key](value, env) if key in self._chains else value
            for key, value in (inputs.get(self._values) or {}).items()
        }

    def text(self, parameters: dict[str, Any], template: str | None = None) -> str:
        """The message (or the frame's own ``template``) with each ``{{ $parameters.name }}``
        replaced by its value as text; a placeholder no parameter names is left as written,
        as the reference leaves it."""
        return PLACEHOLDER.sub(
            lambda m: _text(parameters[m.group(1)]) if m.group(1) in parameters else m.group(0),
            self.template if template is None else template,
        )


def attached(given: dict[str, Any], images: bool) -> dict[str, bytes]:
    """A step's ``attachments`` as files: bytes as they are, text as UTF-8, an image as a
    JPEG where ``images`` (else a ValueError naming it)."""
    files: dict[str, bytes] = {}
    for name, value in given.items():
        if value is None:
            continue
        if isinstance(value, WorkflowImage):
            if not images:
                raise ValueError(f"attachment '{name}': v1 attaches text or bytes, not images")
            name = name if name.lower().endswith((".jpg", ".jpeg")) else f"{name}.jpg"
            files[name] = jpeg(value)
        else:
            files[name] = value if isinstance(value, bytes) else _text(value).encode()
    return files


class CallerFloor:
    """When each caller's last relay message went: one caller's steps share the floor."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}

    def admit(self, caller: str, interval: float) -> bool:
        """True (and the time kept) when ``caller`` sent nothing in the last ``interval`` s."""
        now = time.monotonic()
        with self._lock:
            last = self._last.get(caller)
            if last is not None and now - last < interval:
                return False
            self._last[caller] = now
            return True


RELAY_FLOOR = CallerFloor()
"""The process's one floor: the relay is one resource, however many workflows use it."""


def _addresses(value: Any, field: str) -> list[str]:
    """One address or a list of them; a ValueError naming the field otherwise."""
    listed = [value] if isinstance(value, str) else value
    if not isinstance(listed, list) or not all(isinstance(a, str) and "@" in a for a in listed):
        raise ValueError(f"{field} must be an e-mail address or a list of them")
    return listed


@dataclass(frozen=True, kw_only=True)
class EmailSettings(Verifiable):
    subject: str = setting(FieldSpec(type="string"))
    message: str = setting(FieldSpec(type="string"))
    message_parameters: list[str] = setting(FieldSpec(default=None, takes=Takes.ENTRIES))
    message_parameters_operations: dict[str, Any] = setting(FieldSpec(default={}, type="object"))
    attachments: list[str] = setting(FieldSpec(default=None, takes=Takes.ENTRIES))
    smtp_server: Any = setting(FieldSpec(type="string"))
    smtp_port: int = setting(FieldSpec(default=465, type="integer", minimum=1, maximum=65535))
    fire_and_forget: Any = setting(FieldSpec(default=True))
    disable_sink: Any = setting(FieldSpec(default=False))
    cooldown_seconds: int = setting(FieldSpec(default=5, type="integer", minimum=0))


@dataclass(frozen=True, kw_only=True)
class EmailV2Settings(EmailSettings):
    email_provider: str = setting(FieldSpec(default=MANAGED, choices=(MANAGED, CUSTOM)))
    smtp_server: Any = setting(FieldSpec(default=None, type="string"))


_ADDRESS = FieldSpec((ANY,), takes=Takes.FRAME_OR_LITERAL)


class EmailNotificationBlock(NotificationBlock):
    """v1: plain text through the step's own SMTP server, logged in as ``sender_email``."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/email_notification@v1",)
    host_fields = (("smtp_server", "smtp_port", 465),)
    inputs = {
        "sender_email": _ADDRESS,
        "receiver_email": _ADDRESS,
        "cc_receiver_email": FieldSpec((ANY,), default=None, takes=Takes.FRAME_OR_LITERAL),
        "bcc_receiver_email": FieldSpec((ANY,), default=None, takes=Takes.FRAME_OR_LITERAL),
        "sender_email_password": FieldSpec((ANY, SECRET), takes=Takes.FRAME_OR_LITERAL),
    }
    Settings: ClassVar[type[BlockSettings]] = EmailSettings
    as_html = False

    def __init__(self, name: str, config: EmailSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._subject = config.subject
        self._template = MessageTemplate(name, config)
        self._smtp = context.settings.smtp if context.settings is not None else SmtpSettings()
        self._relay: SmtpServer | None = None
        self._caller = context.caller
        self._pin = context.pin  # the step's own server: the checked address
        self._check_server(name, config)
        self._senders: dict[SmtpServer, EmailSender] = {}
        cooldown = float(config.cooldown_seconds)
        if self._relay is not None:
            cooldown = max(cooldown, self._smtp.min_interval_s)
        self.hold(cooldown, bool(config.disable_sink))
        self.verify_with(config, context)

    def _check_server(self, name: str, config: EmailSettings) -> None:
        host = config.smtp_server
        if isinstance(host, str):
            try:
                ipaddress.ip_address(host)
            except ValueError:
                if not _HOST.fullmatch(host):
                    raise WorkflowCompilationError(
                        f"step '{name}': smtp_server must be a host name or address, got {host!r}"
                    ) from None
        self._host, self._port = host, config.smtp_port

    def _server(self, inputs: dict[str, Any]) -> tuple[SmtpServer, str]:
        """The server this frame's message goes through, and its From address."""
        if self._relay is not None:
            return self._relay, self._smtp.sender or self._smtp.username or ""
        sender = inputs.get("sender_email")
        password = inputs.get("sender_email_password")
        if not isinstance(sender, str) or not sender or not isinstance(password, str):
            raise ValueError(
                "Custom SMTP requires sender_email, smtp_server, and sender_email_password"
            )
        server = SmtpServer(
            self._host,
            self._port,
            username=sender,
            password=password,
            tls=self._smtp.tls,
            ca_file=self._smtp.ca_file,
            pin=self._pin,
        )
        return server, sender

    def _sender(self, server: SmtpServer) -> EmailSender | None:
        with self._lock:
            if self._closed:
                return None
            sender = self._senders.get(server)
            if sender is None:
                if len(self._senders) >= _SENDERS_KEPT:  # a password that changes each frame
                    _, oldest = self._senders.popitem()
                    oldest.close()
                sender = self._senders[server] = EmailSender(server)
            return sender

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        if (held := self.held_back()) is not None:
            return held
        try:
            server, from_address = self._server(inputs)
            message = self._message(inputs, from_address, frame)
        except ValueError as exc:
            return self.result(True, False, str(exc))
        if self._relay is not None and not RELAY_FLOOR.admit(
            self._caller, self._smtp.min_interval_s
        ):
            return self.result(False, True, "The mail relay's interval applies to this caller")
        sender = self._sender(server)
        if sender is None:
            return self.result(True, False, "Sink is closed")
        return self.deliver(lambda: sender.send(message))

    def _message(
        self, inputs: dict[str, Any], from_address: str, frame: FrameState
    ) -> EmailMessage:
        parameters = self._template.parameters(inputs, frame)
        inline: dict[str, bytes] = {}

        def fill(match: re.Match[str]) -> str:
            key = match.group(1)
            if key not in parameters:
                return match.group(0)  # the reference leaves unknown placeholders as written
            value = parameters[key]
            if isinstance(value, WorkflowImage):
                inline[f"image_{key}"] = jpeg(value)
                return f'<img src="cid:image_{key}" alt="{key}" style="{_IMAGE_STYLE}">'
            return html.escape(_text(value))

        to = _addresses(inputs.get("receiver_email"), "receiver_email")
        cc = _addresses(inputs.get("cc_receiver_email") or [], "cc_receiver_email")
        bcc = _addresses(inputs.get("bcc_receiver_email") or [], "bcc_receiver_email")
        self._check_recipients([*to, *cc, *bcc])
        text = self._template.text(parameters)
        body = PLACEHOLDER.sub(fill, self._template.template).replace("\n", "<br>\n")
        attachments = attached(inputs.get("attachments") or {}, images=self.as_html)
        total = sum(map(len, attachments.values())) + sum(map(len, inline.values()))
        if total > self._smtp.max_attachment_bytes:
            raise ValueError(
                f"attachments of {total} bytes are over the server's "
                f"{self._smtp.max_attachment_bytes} (VISIONSTREAM_SMTP_MAX_ATTACHMENT_BYTES)"
            )
        message = compose(
            sender=from_address,
            to=to,
            cc=cc,
            bcc=bcc,
            subject=self._subject,
            text=text,
            html=body if self.as_html else None,
            inline_images=inline,
            attachments=attachments,
        )
        size = len(message.as_bytes())
        if size > self._smtp.max_message_bytes:
            raise ValueError(
                f"a message of {size} bytes is over the server's "
                f"{self._smtp.max_message_bytes} (VISIONSTREAM_SMTP_MAX_MESSAGE_BYTES)"
            )
        return message

    def _check_recipients(self, recipients: list[str]) -> None:
        if len(recipients) > self._smtp.max_recipients:
            raise ValueError(
                f"{len(recipients)} recipients are over the server's "
                f"{self._smtp.max_recipients} (VISIONSTREAM_SMTP_MAX_RECIPIENTS)"
            )
        refused = refused_recipients(self._smtp, recipients) if self._relay else None
        if refused is not None:
            raise ValueError(refused)

    def close(self) -> None:
        self.close_verifier()  # first: what it confirms still goes out
        with self._lock:
            self._closed = True
            senders, self._senders = list(self._senders.values()), {}
        for sender in senders:
            sender.close()


class EmailNotificationV2Block(EmailNotificationBlock):
    """v2: HTML with inline images, image attachments, and a choice of provider."""

    type_ids: ClassVar[tuple[str, ...]] = ("roboflow_core/email_notification@v2",)
    inputs = EmailNotificationBlock.inputs | {
        "sender_email": FieldSpec((ANY,), default=None, takes=Takes.FRAME_OR_LITERAL),
        "sender_email_password": FieldSpec(
            (ANY, SECRET), default=None, takes=Takes.FRAME_OR_LITERAL
        ),
    }
    Settings: ClassVar[type[BlockSettings]] = EmailV2Settings
    as_html = True

    def _check_server(self, name: str, config: EmailSettings) -> None:
        assert isinstance(config, EmailV2Settings)
        if config.email_provider == CUSTOM:
            if config.smtp_server is None:
                raise WorkflowCompilationError(f"step '{name}': Custom SMTP needs smtp_server")
            super()._check_server(name, config)
            return
        smtp = self._smtp
        if smtp.host and not smtp.allowed_recipients:
            raise WorkflowCompilationError(
                f"step '{name}': email_provider '{MANAGED}' sends through this server's mail "
                "relay, which sends only to the recipients VISIONSTREAM_SMTP_ALLOWED_RECIPIENTS "
                f"lists, and it lists none; or give the step email_provider '{CUSTOM}'"
            )
        relay = relay_server(smtp)
        if relay is None:
            raise WorkflowCompilationError(
                f"step '{name}': email_provider '{MANAGED}' sends through this server's own "
                "mail relay, and none is set: set VISIONSTREAM_SMTP_HOST and "
                "VISIONSTREAM_SMTP_SENDER (with VISIONSTREAM_SMTP_USERNAME and "
                "VISIONSTREAM_SMTP_PASSWORD if it needs a login), "
                f"or give the step email_provider '{CUSTOM}' and its smtp_server"
            )
        self._relay = relay[0]
