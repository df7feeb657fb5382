"""Who may call, and where the server meets peers and connects for callers: keys, proxies,
networks, ICE, lent secrets, workflow bounds."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode

from ..access import AuthSettings
from ..bounds import WorkflowLimits
from .values import split_csv

__all__ = ["SecuritySettings"]


class SecuritySettings(BaseSettings):
    """Who may call, and where the server meets peers and connects for callers: keys, proxies,
    networks, ICE, lent secrets, workflow bounds. A part of ``Settings``
    (``VISIONSTREAM_<NAME>``)."""

    ice_servers: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """STUN/TURN URLs the server peer uses (comma-separated): ``turn:host:3478`` (UDP),
    ``turn:host:3478?transport=tcp``, ``turns:host:5349`` (TLS). Empty: nothing leaves the
    machine. aiortc uses the first TURN and the first STUN URL it supports."""
    ice_username: str | None = None
    """Long-term credential user name for the TURN URLs of ``ice_servers``."""
    ice_credential: SecretStr | None = None
    """Long-term credential password for those TURN URLs (never logged or shown)."""
    ice_transport_policy: Literal["all", "relay"] = "all"
    """``relay``: the server peer uses only relayed candidates, so it never exposes a host
    address; a session then needs a TURN server (ours or the client's) or is refused (502
    ``turn_unavailable``, saying why)."""
    ice_host_addresses: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Host addresses ICE candidates are restricted to (comma-separated); empty: all interfaces."""
    allow_client_ice_servers: bool = True
    """Honour the ICE servers a client sends in ``webrtc_config`` (their hosts checked)."""
    allowed_networks: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["0.0.0.0/0", "::/0"]
    )
    """Networks (CIDR, comma-separated) the server may connect to for a caller: cameras,
    webhooks, client ICE servers. Loopback, link-local (cloud metadata), unspecified and
    multicast addresses stay refused unless a listed network lies inside them
    (``127.0.0.0/8`` for cameras on this machine)."""
    peer_networks: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["0.0.0.0/0", "::/0"]
    )
    """Networks WebRTC peers' ICE candidates may be in (not the cameras' list); loopback only
    from a caller on this machine; link-local, multicast, unspecified only when listed."""
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Addresses or networks of reverse proxies whose ``X-Forwarded-For``/``-Proto`` are
    believed (uvicorn's ``forwarded_allow_ips``); none by default, so a client cannot pick the
    address its throttle and session cap count against."""
    api_key: SecretStr | None = None
    """When set, every route but health, readiness and the page's files requires it (body
    ``api_key`` where inference-sdk sends it there, or ``Authorization: Bearer``)."""
    auth_failures_per_minute: int = Field(default=10, ge=1)
    """Wrong API keys one address may send in a minute; then 429 with ``Retry-After``."""
    metrics_require_api_key: bool = True
    """With an API key set, ``/metrics`` requires it too (false: scrapers need none)."""
    workflow_secrets: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Variables ``environment_secrets_store`` may read (never ``VISIONSTREAM_*``)."""
    limits: WorkflowLimits = Field(default_factory=WorkflowLimits)
    """What one workflow step may make: ``VISIONSTREAM_LIMIT_*``."""
    auth: AuthSettings = Field(default_factory=AuthSettings)
    """Named keys with roles, and authenticating proxies: ``VISIONSTREAM_AUTH_*``."""

    @field_validator(
        "ice_servers",
        "ice_host_addresses",
        "allowed_networks",
        "peer_networks",
        "trusted_proxies",
        "workflow_secrets",
        mode="before",
    )
    @classmethod
    def _csv(cls, value: object) -> object:
        return split_csv(value)

    @field_validator("allowed_networks", "peer_networks", "trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for network in value:
            ipaddress.ip_network(network, strict=False)  # ValueError names the bad one
        return value
