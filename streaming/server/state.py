"""What the routers share: one object per app, built by the app factory."""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import Request

from sources.hub import SourceHub

from ..config import Settings
from ..egress import EgressPolicy
from ..errors import NotReady, ShuttingDown
from ..events.writer import EventWriter
from ..inference.registry import ModelRegistry
from ..language import Providers
from ..memory import MemoryTrimmer
from ..metrics import Metrics
from ..peer.publisher import Publishers
from ..peer.sessions import SessionRegistry
from ..pipelines import Pipelines
from ..restreams import Restreams
from ..workflows.library import WorkflowLibrary
from .uploads import UploadDirectory

if TYPE_CHECKING:
    from .auth import ApiKeyGuard

__all__ = ["Deployment", "ServerState", "get_state"]


class Deployment(Protocol):
    """The workers this app is one of (a Ray deployment's replicas), as the health routes
    show them; without one, the app is a deployment of its own."""

    @property
    def worker(self) -> str:
        """This app's own worker id, as ``workers`` lists it (``/healthz``'s ``served_by``)."""

    async def workers(self) -> list[dict[str, Any]]:
        """Every worker: its id, node, sessions and pipelines (``/healthz``)."""

    def report(self, load: dict[str, Any]) -> None:
        """This worker's load changed (a session was accepted, or ended): the workers'
        listing says so from now on, not from the next period. (Serve's router reads its
        stats at Serve's next collection; its count of requests sent lately covers the gap.)"""

    async def metrics(self) -> dict[str, str]:
        """Every worker's Prometheus exposition, by worker id (``/metrics``)."""

    async def unready(self) -> str | None:
        """Why some worker requests may be routed to cannot take a session now (starting,
        or loading its models); None when every one can (``/readyz``)."""


@dataclass
class ServerState:
    """Everything the routes share, created by the app's lifespan and closed by it."""

    settings: Settings
    models: ModelRegistry
    sessions: SessionRegistry
    metrics: Metrics
    executor: ThreadPoolExecutor
    hub: SourceHub
    """Camera readers, shared by every session and pipeline that watches the same URL."""
    pipelines: Pipelines
    workflows: WorkflowLibrary
    """Workflows requests may name by id instead of sending a specification."""
    uploads: UploadDirectory
    """This server's private directory for uploaded videos."""
    auth: ApiKeyGuard
    """The API key check every non-health route makes."""
    egress: EgressPolicy
    """Where callers may make this server connect (cameras, webhooks, ICE servers)."""
    trimmer: MemoryTrimmer
    """Gives freed memory back to the system after sessions end."""
    restreams: Restreams
    """Each pipeline source's annotated picture for RTSP, HLS and MJPEG players."""
    language: Providers | None = None
    """The vision-language providers every session, run and pipeline of this server asks."""
    publishers: Publishers = field(default_factory=lambda: Publishers(1))
    """WHIP publishers, each a pipeline source read through ``hub`` (``whip://<id>``)."""
    events: EventWriter | None = None
    """The event store's writer (``GET /events`` reads its store); None: events not kept."""
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    prepared: asyncio.Event = field(default_factory=asyncio.Event)
    """Model preparation is over: ``ready`` is set, or ``startup_error`` says why not."""
    startup_error: str | None = None
    listening: asyncio.Event | None = None
    """Set once the HTTP socket is bound, where a server of ours binds it (``visionstream
    serve``): the "ready:" line waits for it, so it never comes before the page can load."""
    draining: bool = False
    """Set on SIGTERM: live sessions are being ended; new ones are refused (503)."""
    deployment: Deployment | None = None
    """The deployment's workers (a Ray deployment's replicas); None: this process alone."""

    def load(self) -> dict[str, Any]:
        """What this worker carries and whether it takes sessions now: ``/healthz``'s entry
        for it, and a Ray replica's routing stats."""
        return {
            "sessions": len(self.sessions),
            "pipelines": len(self.pipelines),
            "max_sessions": self.settings.max_sessions,
            "ready": self.ready.is_set() and not self.draining,
            "draining": self.draining,
        }

    async def check_accepting(self) -> None:
        """Raises 503 unless new sessions and pipelines may start now. A request that comes
        while the models are still being prepared waits for them, up to
        ``VISIONSTREAM_READY_WAIT_S`` (a replica just added, an offer routed before the replica
        said it was loading): a moment's wait, not a refusal the caller must retry."""
        if self.draining:
            raise ShuttingDown("the server is shutting down; try another server or later")
        if not self.ready.is_set() and self.startup_error is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.prepared.wait(), self.settings.ready_wait_s)
            if self.draining:
                raise ShuttingDown("the server is shutting down; try another server or later")
        if not self.ready.is_set():
            raise NotReady(self.startup_error or "the server is still preparing its models")


def get_state(request: Request) -> ServerState:
    return request.app.state.server
