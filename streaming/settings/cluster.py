"""The Ray deployment: replicas, model deployments and pipeline actors, and their resources."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings

__all__ = ["ClusterSettings"]


class ClusterSettings(BaseSettings):
    """The Ray deployment: replicas, model deployments and pipeline actors, and their resources. A
    part of ``Settings`` (``VISIONSTREAM_<NAME>``)."""

    ray_proxy_location: Literal["EveryNode", "HeadOnly"] = "EveryNode"
    """``serve --ray``: where Ray Serve runs its HTTP proxy on ``host:port``. EveryNode lets a
    load balancer reach any node; HeadOnly where nodes share an address (one machine)."""
    ray_min_replicas: int = Field(default=1, ge=1)
    """``serve --ray --replicas auto``: media replicas kept however few sessions there are."""
    ray_max_replicas: int | None = Field(default=None, ge=1)
    """``serve --ray --replicas auto``: the most media replicas (default: one per CPU of the
    cluster when the server starts)."""
    ray_replica_resources: dict[str, float] = Field(default_factory=lambda: {"CPU": 1.0})
    """``serve --ray``: what each media replica reserves (its loop is one core's work); on GPU
    nodes add a ``GPU`` share (``{"CPU": 1, "GPU": 0.125}``), or the replica sees no GPU."""
    ray_models: Literal["replica", "deployment"] = "replica"
    """``serve --ray``: where the default model runs: in every replica (measured the better
    on CPUs: benchmarks/README.md), or one Ray Serve deployment batching for all of them."""
    ray_model_resources: dict[str, float] = Field(default_factory=lambda: {"CPU": 1.0})
    """``serve --ray`` with ``ray_models=deployment``: what the model deployment reserves
    (``{"CPU": 1, "GPU": 1}`` for a GPU of its own)."""
    ray_pipeline_resources: dict[str, float] = Field(default_factory=lambda: {"CPU": 1.0})
    """``serve --ray``: what each pipeline's actor reserves on its node: ``CPU``, ``GPU`` (as
    for replicas) and custom resources (``{"CPU": 1, "cameras": 1}`` keeps pipelines on
    nodes that declare ``cameras``)."""
