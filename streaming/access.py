"""Who may do what: roles, the principal a request resolves to, and the one table saying
which role each route and each side-effect block needs.

- **viewer**: watch (WHEP, a pipeline's output and status, the review page, events,
  recordings, exports, the models and blocks there are);
- **operator**: also start and stop sessions, uploads, pipelines and workflow runs;
- **admin**: also models, and the blocks that use the server's own resources (the mail
  relay, file sinks, lent secrets).

The server layer resolves a request to one ``Principal`` (a named key, the authenticating
proxy's user, or, on a server with neither, the open ``anonymous`` admin) before any route
runs; routes read ``ROUTES`` and the compiler reads ``BLOCKS`` (``block_role``); ``/docs``
shows both. Nothing below the server layer reads headers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from .errors import StreamingError
from .settings.prefix import ProductSettings

__all__ = [
    "BLOCKS",
    "OPEN",
    "PUBLIC",
    "ROUTES",
    "AuthSettings",
    "BlockRule",
    "Forbidden",
    "Principal",
    "Role",
    "block_role",
    "blocks_markdown",
    "route_role",
]


class Role(IntEnum):
    """What a caller may do; each role may do what the ones below it may."""

    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    @classmethod
    def named(cls, name: str) -> Role:
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(f"{name!r} is not a role (viewer, operator, admin)") from None

    def __str__(self) -> str:
        return self.name.lower()


class Forbidden(StreamingError):
    """The caller is known, and their role does not allow this."""

    status = 403
    code = "forbidden"


@dataclass(frozen=True)
class Principal:
    """Who a request comes from: ``name`` (a key's, or the proxy's user), ``role``, and
    ``via`` (``key``, ``proxy`` or ``open``: a server that asks for no key)."""

    name: str
    role: Role
    via: str = "key"

    def require(self, role: Role, what: str) -> None:
        """A 403 naming the role ``what`` needs, unless this principal has it."""
        if self.role < role:
            raise Forbidden(
                f"{what} needs the {role} role; {self.name!r} is a {self.role} "
                "(VISIONSTREAM_AUTH_KEYS_FILE or the proxy's group mapping say which)"
            )

    def caller(self, address: str) -> str:
        """What the server's shared resources (the mail relay) ration this caller by: its
        name, or on an open server its address."""
        return f"address {address}" if self.via == "open" else f"{self.via} {self.name}"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "role": str(self.role), "via": self.via}


OPEN = Principal("anonymous", Role.ADMIN, "open")
"""A server with no key and no authenticating proxy: anyone may do anything (its default on
127.0.0.1)."""


V, OP, A = Role.VIEWER, Role.OPERATOR, Role.ADMIN
ROUTES: Mapping[tuple[str, str], Role] = {
    # Watching.
    ("GET", "/metrics"): V,
    ("GET", "/auth/me"): V,
    ("POST", "/initialise_webrtc_worker"): V,  # watching a pipeline; anything else: operator
    ("POST", "/whep/resources/{resource_id}"): V,
    ("POST", "/whep/pipelines/{pipeline_id}/{source_id}"): V,
    ("DELETE", "/whep/sessions/{session_id}"): V,
    ("GET", "/inference_pipelines/list"): V,
    ("GET", "/inference_pipelines/{pipeline_id}/status"): V,
    ("GET", "/inference_pipelines/{pipeline_id}/consume"): V,
    ("GET", "/inference_pipelines/{pipeline_id}/restream"): V,
    # A restream also takes its URL's token instead of a key (routes/restream.py).
    ("GET", "/restream/{pipeline_id}/{source_id}/snapshot.jpg"): V,
    ("GET", "/restream/{pipeline_id}/{source_id}/mjpeg"): V,
    ("GET", "/restream/{pipeline_id}/{source_id}/index.m3u8"): V,
    ("GET", "/restream/{pipeline_id}/{source_id}/segment-{sequence}.ts"): V,
    ("GET", "/events"): V,
    ("GET", "/events/summary"): V,
    ("GET", "/events/{event_id}"): V,
    ("GET", "/events/{event_id}/snapshot"): V,
    ("GET", "/events/{event_id}/clip"): V,
    ("GET", "/recordings"): V,
    ("GET", "/recordings/{pipeline}/{source}/index"): V,
    ("GET", "/recordings/{pipeline}/{source}"): V,
    ("GET", "/workflows"): V,
    ("GET", "/workflows/blocks"): V,
    ("GET", "/workflows/blocks/describe"): V,
    ("POST", "/workflows/blocks/describe"): V,
    ("GET", "/models"): V,
    ("GET", "/model/registry"): V,
    ("GET", "/v2"): V,
    ("GET", "/v2/models/{name}"): V,
    ("GET", "/v2/models/{name}/versions/{model_version}"): V,
    ("GET", "/v2/models/{name}/ready"): V,
    ("GET", "/v2/models/{name}/versions/{model_version}/ready"): V,
    # Running: sessions, publishers, pipelines, workflow runs, inference.
    ("POST", "/whip/workflows/{workspace}/{workflow_id}"): OP,
    ("POST", "/whip/pipelines/{pipeline_id}"): OP,
    ("DELETE", "/whip/resources/{resource_id}"): OP,
    ("POST", "/inference_pipelines/initialise"): OP,
    ("POST", "/inference_pipelines/{pipeline_id}/pause"): OP,
    ("POST", "/inference_pipelines/{pipeline_id}/describe"): OP,
    ("POST", "/events/{event_id}/describe"): OP,
    ("POST", "/inference_pipelines/{pipeline_id}/resume"): OP,
    ("POST", "/inference_pipelines/{pipeline_id}/terminate"): OP,
    ("POST", "/inference_pipelines/{pipeline_id}/sources"): OP,
    ("DELETE", "/inference_pipelines/{pipeline_id}/sources/{source_id}"): OP,
    ("GET", "/workflows/{workspace_name}/{workflow_id}"): OP,
    ("POST", "/workflows/run"): OP,
    ("POST", "/infer/workflows"): OP,
    ("POST", "/infer/workflows/{workspace_name}/{workflow_id}"): OP,
    ("POST", "/{workspace_name}/workflows/{workflow_id}"): OP,
    ("POST", "/workflows/validate"): OP,
    ("POST", "/workflows/describe_interface"): OP,
    ("POST", "/infer/{task}"): OP,
    ("POST", "/{dataset_id}/{version_id}"): OP,
    ("POST", "/v2/models/{name}/infer"): OP,
    ("POST", "/v2/models/{name}/versions/{model_version}/infer"): OP,
    # The server's own: its models.
    ("POST", "/model/add"): A,
    ("POST", "/model/remove"): A,
    ("POST", "/model/clear"): A,
}
"""Every guarded route (method, path as declared) and the role it needs. A route missing
here needs admin (``route_role``), and a test walks the served table against this one."""


PUBLIC: frozenset[tuple[str, str]] = frozenset(
    {
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/v2/health/live"),
        ("GET", "/v2/health/ready"),
        ("GET", "/info"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
    }
)
"""Routes that ask for no key (``/metrics`` too, with ``VISIONSTREAM_METRICS_REQUIRE_API_KEY``
off); ``/healthz`` shows more to a known caller."""


def route_role(method: str, path: str) -> Role:
    return ROUTES.get((method.upper(), path), Role.ADMIN)


def blocks_markdown() -> str:
    """The block half of the table, as ``/docs`` shows it."""
    rows = [f"| `{rule.type_id}` | {rule.role} | {rule.why} |" for rule in BLOCKS]
    return "\n".join(
        [
            "**Roles.** viewer: watch; operator: also run sessions, pipelines and workflows; "
            "admin: also models and the blocks below. Each operation says its role. Blocks that "
            "need more than operator:",
            "",
            "| block | role | why |",
            "|---|---|---|",
            *rows,
        ]
    )


@dataclass(frozen=True)
class BlockRule:
    """A block that reaches the server's own resources, the role it needs, and why."""

    type_id: str
    role: Role
    why: str
    when: Callable[[Mapping[str, Any]], bool] = lambda fields: True
    """Which of its steps (by their fields as written) need it; the rest need operator."""


def _relay(fields: Mapping[str, Any]) -> bool:
    return fields.get("email_provider", "Roboflow Managed API Key") != "Custom SMTP"


BLOCKS: tuple[BlockRule, ...] = (
    BlockRule(
        "roboflow_core/email_notification@v2",
        A,
        "it sends through the server's mail relay (email_provider 'Custom SMTP' needs operator)",
        _relay,
    ),
    BlockRule("roboflow_core/local_file_sink@v1", A, "it writes to the server's disk"),
    BlockRule("roboflow_core/environment_secrets_store@v1", A, "it reads secrets the server lends"),
)
"""Every other block needs what running a workflow needs: operator."""


def block_role(type_id: str, fields: Mapping[str, Any]) -> tuple[Role, str]:
    """The role a step needs, and why (its block's rule, or running a workflow)."""
    for rule in BLOCKS:
        if rule.type_id == type_id and rule.when(fields):
            return rule.role, rule.why
    return Role.OPERATOR, "it runs in a workflow"


class AuthSettings(ProductSettings):
    """Named keys with roles, and an authenticating proxy (``VISIONSTREAM_AUTH_*``)."""

    model_config = SettingsConfigDict(env_prefix="VISIONSTREAM_AUTH_", extra="ignore")

    keys_file: Path | None = None
    """A JSON file of named keys, stored hashed, each with a role and an optional expiry
    (``visionstream keys add`` writes it); read again whenever it changes."""
    proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Addresses or networks of authenticating proxies (nginx ``auth_request``,
    oauth2-proxy, Authelia) whose user and groups headers are believed; nobody else's."""
    user_header: str = "X-Forwarded-User"
    """The proxy's header naming the signed-in user (Authelia: ``Remote-User``)."""
    groups_header: str = "X-Forwarded-Groups"
    """The proxy's header listing the user's groups, comma-separated (``Remote-Groups``)."""
    group_roles: Annotated[dict[str, Role], NoDecode] = Field(default_factory=dict)
    """``group=role`` pairs, comma-separated (``admins=admin,guards=viewer``): a user gets
    the highest role of their groups; a user in none of them is refused (403)."""

    @field_validator("proxies", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("group_roles", mode="before")
    @classmethod
    def _pairs(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        pairs: dict[str, Role] = {}
        for part in filter(None, (p.strip() for p in value.split(","))):
            group, _, role = part.partition("=")
            pairs[group.strip()] = Role.named(role)
        return pairs
