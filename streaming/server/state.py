"""What the routers share: one object per app, built by the app factory."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from fastapi import Request

from sources.hub import SourceHub

from ..config import Settings
from ..inference.registry import ModelRegistry
from ..metrics import Metrics
from ..peer.sessions import SessionRegistry
from ..pipelines import PipelineManager
from ..workflows.library import WorkflowLibrary

__all__ = ["ServerState", "get_state"]


@dataclass
class ServerState:
    settings: Settings
    models: ModelRegistry
    sessions: SessionRegistry
    metrics: Metrics
    executor: ThreadPoolExecutor
    hub: SourceHub
    """Camera readers, shared by every session and pipeline that watches the same URL."""
    pipelines: PipelineManager
    workflows: WorkflowLibrary
    """Workflows requests may name by id instead of sending a specification."""
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    startup_error: str | None = None


def get_state(request: Request) -> ServerState:
    return request.app.state.server
