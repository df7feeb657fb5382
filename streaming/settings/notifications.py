"""Where notifications go out: the server's mail relay, and Slack's Web API."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .prefix import ProductSettings
from .values import split_csv

__all__ = ["NotificationSettings", "SlackSettings", "SmtpSettings"]


class SmtpSettings(ProductSettings):
    """The server's mail relay (``VISIONSTREAM_SMTP_*``): what ``email_notification@v2`` steps
    that ask for Roboflow's managed provider send through, and how every SMTP connection a
    workflow makes is secured."""

    model_config = SettingsConfigDict(env_prefix="VISIONSTREAM_SMTP_", extra="ignore")

    host: str | None = None
    """The relay; unset, a step asking for the managed provider is refused."""
    port: int = Field(default=465, ge=1, le=65535)
    """The relay's port (465: implicit TLS)."""
    username: str | None = None
    """The relay's login; unset: no login."""
    password: SecretStr | None = None
    """The relay's password (never logged or shown)."""
    sender: str | None = None
    """The From address of the relay's messages (default: ``username``)."""
    tls: Literal["auto", "implicit", "starttls", "none"] = "auto"
    """``auto``: implicit TLS on port 465, STARTTLS elsewhere (a server without it is an
    error); ``none`` sends in the clear, passwords included: for a relay on this machine."""
    ca_file: Path | None = None
    """A CA bundle to check SMTP servers' certificates against (default: the system's)."""
    allowed_recipients: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Whom the relay sends to: addresses (``ops@example.com``) and domains
    (``@example.com``), comma-separated; ``*`` anyone. Empty: a step may not use the relay."""
    max_recipients: int = Field(default=10, ge=1)
    """To, Cc and Bcc of one message, at most (the step's own server's too)."""
    min_interval_s: float = Field(default=60.0, ge=0)
    """Seconds between two relay messages of one step, and of one caller's steps, at least
    (a step's ``cooldown_seconds`` may be longer, never shorter)."""
    max_attachment_bytes: int = Field(default=5 * 1024 * 1024, ge=0)
    """Attachments and inline images of one message, at most (the step's own server's too)."""
    max_message_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    """One whole message, at most (the step's own server's too)."""

    @field_validator("allowed_recipients", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        return split_csv(value)


class SlackSettings(ProductSettings):
    """Where ``slack_notification@v1`` steps send (``VISIONSTREAM_SLACK_*``)."""

    model_config = SettingsConfigDict(env_prefix="VISIONSTREAM_SLACK_", extra="ignore")

    api_url: str = "https://slack.com/api"
    """Slack's Web API (``chat.postMessage`` and the file upload methods below it); like
    every address a workflow reaches, it and the upload URLs it answers with pass
    ``VISIONSTREAM_ALLOWED_NETWORKS``."""
    timeout_s: float = Field(default=10.0, gt=0, le=120)
    """One request to Slack, at most."""
    max_attachment_bytes: int = Field(default=5 * 1024 * 1024, ge=0)
    """The files of one message, at most: over it the step reports an error, sends nothing."""

    @field_validator("api_url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("VISIONSTREAM_SLACK_API_URL is an http(s) URL")
        return value


class NotificationSettings(BaseSettings):
    """Where notifications go out: the server's mail relay. A part of ``Settings``
    (``VISIONSTREAM_<NAME>``)."""

    smtp: SmtpSettings = Field(default_factory=SmtpSettings)
    """Mail (``VISIONSTREAM_SMTP_*``)."""
    slack: SlackSettings = Field(default_factory=SlackSettings)
    """Slack (``VISIONSTREAM_SLACK_*``)."""
