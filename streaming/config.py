"""The only readers of the environment: ``Settings`` for the server (prefix ``VISIONSTREAM_``),
``ClientSettings`` for our client library and ``visionstream stream`` (prefix ``VISIONSTREAM_``).
The server's fields are declared by concern in ``streaming/settings/``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .settings.cameras import CameraSettings, DecodeSettings
from .settings.cluster import ClusterSettings
from .settings.inference import InferenceSettings
from .settings.language import LanguageSettings
from .settings.media import MediaSettings
from .settings.notifications import NotificationSettings, SmtpSettings
from .settings.prefix import LEGACY_PREFIX, PREFIX, ProductSettings
from .settings.restream import RestreamSettings
from .settings.security import SecuritySettings
from .settings.server import ServerSettings
from .settings.storage import StorageSettings
from .settings.values import split_csv

__all__ = [
    "ClientSettings",
    "DecodeSettings",
    "Settings",
    "SmtpSettings",
    "environment_notes",
    "server_setting_names",
]


class Settings(
    ProductSettings,
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
    concern's fields (``CONCERNS``), all read as ``VISIONSTREAM_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore")


CONCERNS: tuple[type[BaseSettings], ...] = Settings.__bases__[1:]
"""The concerns ``Settings`` is made of, in the order the guide lists them."""


class ClientSettings(ProductSettings):
    """What our client can be told by the environment; arguments given in code or on the
    command line win. Narrow on purpose: a client never reads the server's settings."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore")

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


def server_setting_names() -> set[str]:
    """Every variable the server reads, by its ``VISIONSTREAM_`` name (a group of settings,
    ``VISIONSTREAM_SMTP_*``, by each of its fields)."""
    names = set()
    for name, field in Settings.model_fields.items():
        group = field.annotation
        if isinstance(group, type) and issubclass(group, BaseSettings):
            prefix = str(group.model_config.get("env_prefix", ""))
            names |= {prefix + inner.upper() for inner in group.model_fields}
        else:
            names.add(PREFIX + name.upper())
    return names


CLIENT_ONLY = ("API_URL", "REQUEST_TIMEOUT_S", "RELEASE_ON_MARKER", "TURN_PASSWORD")
"""``VISIONSTREAM_*`` settings of the client and ``visionstream stream`` that the server has
no setting of (``API_KEY``, ``CONNECT_TIMEOUT_S`` and ``ICE_HOST_ADDRESSES`` are both's)."""


def environment_notes(environ: Mapping[str, str] | None = None) -> list[str]:
    """What the server says of its environment when it starts, a line each: the settings it
    read under their deprecated ``STREAMING_`` names (one line), client settings it does not
    read, and names no setting has (a typo it would otherwise ignore without a word), with
    the nearest settings' names."""
    from .suggest import did_you_mean

    environ = os.environ if environ is None else environ
    known = server_setting_names()
    lines = []
    legacy = sorted(
        n
        for n in environ
        if n.startswith(LEGACY_PREFIX) and PREFIX + n[len(LEGACY_PREFIX) :] in known
    )
    if legacy:
        lines.append(
            f"{', '.join(legacy)}: the {LEGACY_PREFIX} prefix is deprecated and still read; "
            f"rename {'them' if len(legacy) > 1 else 'it'} {PREFIX}... (where both are set, "
            f"{PREFIX} wins)"
        )
    for name in sorted(environ):
        upper = name.upper()
        if upper.startswith(LEGACY_PREFIX):
            upper = PREFIX + upper.removeprefix(LEGACY_PREFIX)
        if not upper.startswith(PREFIX) or upper in known:
            continue
        if upper.removeprefix(PREFIX) in CLIENT_ONLY:
            lines.append(
                f"{name} is a client setting (visionstream stream, Client()); "
                "the server does not read it"
            )
            continue
        close = did_you_mean(upper, known)
        lines.append(f"{name} is not a setting, and is ignored" + (f"; {close}" if close else ""))
    return lines
