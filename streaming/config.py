"""The only readers of the environment: ``Settings`` for the server (prefix ``STREAMING_``),
``ClientSettings`` for our client library and ``visionstream stream`` (prefix ``VISIONSTREAM_``).
The server's fields are declared by concern in ``streaming/settings/``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .access import AuthSettings
from .bounds import WorkflowLimits
from .settings.cameras import CameraSettings, DecodeSettings
from .settings.cluster import ClusterSettings
from .settings.inference import InferenceSettings
from .settings.language import LanguageSettings
from .settings.media import MediaSettings
from .settings.notifications import NotificationSettings, SlackSettings, SmtpSettings
from .settings.restream import RestreamSettings
from .settings.security import SecuritySettings
from .settings.server import ServerSettings
from .settings.storage import StorageSettings
from .settings.values import split_csv

__all__ = ["ClientSettings", "DecodeSettings", "Settings", "SmtpSettings", "unknown_settings"]


class Settings(
    ServerSettings,
    MediaSettings,
    SecuritySettings,
    CameraSettings,
    InferenceSettings,
    StorageSettings,
    NotificationSettings,
    LanguageSettings,
    RestreamSettings,
    ClusterSettings,
):
    """Everything the server can be told, from the environment or the command line: each
    concern's fields (``CONCERNS``), all read as ``STREAMING_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="STREAMING_", extra="ignore")


CONCERNS: tuple[type[BaseSettings], ...] = Settings.__bases__
"""The concerns ``Settings`` is made of, in the order the guide lists them."""


class ClientSettings(BaseSettings):
    """What our client can be told by the environment; arguments given in code or on the
    command line win. Narrow on purpose: a client never reads the server's settings."""

    model_config = SettingsConfigDict(env_prefix="VISIONSTREAM_", extra="ignore")

    api_url: str = "http://127.0.0.1:9001"
    """The server ``Client()`` and ``visionstream stream`` talk to."""
    api_key: SecretStr | None = None
    """The server's API key (never logged)."""
    connect_timeout_s: float = Field(default=30.0, gt=0)
    """Seconds to set a session up (signaling and ICE)."""
    request_timeout_s: float = Field(default=90.0, gt=0)
    """Seconds one HTTP request to the server may take."""
    release_on_marker: bool = True
    """Our connections' video receivers release each frame on its last packet (one frame
    interval sooner than aiortc's own); off: aiortc's buffer, and the server sends the hidden
    frames it sends any aiortc receiver (``streaming/rtc/``)."""
    ice_host_addresses: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """``visionstream stream`` only: host addresses ICE offers (comma-separated); empty: every
    interface, or loopback for a server on this machine. Process-wide, so the library leaves
    it to the program."""

    @field_validator("ice_host_addresses", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        return split_csv(value)


def unknown_settings(environ: Mapping[str, str] | None = None) -> list[str]:
    """A line for each ``STREAMING_*`` variable no setting reads (a typo the server would
    otherwise ignore without a word), with the nearest settings' names."""
    from .suggest import did_you_mean

    known = set()
    for model, prefix in ((Settings, "STREAMING_"), (SmtpSettings, "STREAMING_SMTP_"),
                          (SlackSettings, "STREAMING_SLACK_"),
                          (DecodeSettings, "STREAMING_DECODE_"),
                          (WorkflowLimits, "STREAMING_LIMIT_"),
                          (AuthSettings, "STREAMING_AUTH_")):  # fmt: skip
        known |= {prefix + name.upper() for name in model.model_fields}
    lines = []
    for name in sorted(os.environ if environ is None else environ):
        if name.startswith("STREAMING_") and name.upper() not in known:
            close = did_you_mean(name, known)
            lines.append(
                f"{name} is not a setting, and is ignored" + (f"; {close}" if close else "")
            )
    return lines
