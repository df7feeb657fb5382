"""The HTTP routes, a module per group of paths, and the one list of their routers in the
order the app matches them.

Order carries meaning where paths overlap: ``/infer/workflows/...`` (workflow_runs) comes
before ``/infer/{task}`` (infer), and the reference's legacy ``/{dataset}/{version}``, which
takes any pair of segments, comes last of all. A new group of routes is its module here and
one entry below, at the place its paths need.
"""

from __future__ import annotations

from fastapi import APIRouter

from . import (
    events,
    health,
    infer,
    info,
    models,
    pipelines,
    recordings,
    restream,
    v2,
    webrtc,
    whip,
    workflow_runs,
    workflows,
)

__all__ = ["ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    webrtc.router,
    whip.router,
    restream.router,  # before pipelines: /inference_pipelines/{id}/restream is its own
    pipelines.router,
    workflows.router,
    v2.router,
    models.router,
    info.router,
    events.router,
    recordings.router,
    workflow_runs.router,  # before /infer/{task}: /infer/workflows is its own
    infer.router,
    infer.legacy_router,  # last of all: /{dataset}/{version} takes any pair
)
