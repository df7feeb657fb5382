"""The Serve application for a Serve config file (KubeRay's ``RayService``):
``import_path: streaming.cluster.app:build``, settings from the replicas' ``VISIONSTREAM_*``
environment, ``args: {replicas: N | auto}``."""

from __future__ import annotations

from typing import Any

from ..config import Settings
from .replica import media_app

__all__ = ["build"]


def build(args: dict[str, Any]) -> Any:
    """Serve's application builder: ``replicas`` a count or ``auto`` (the default: between
    ``VISIONSTREAM_RAY_MIN_REPLICAS`` and ``VISIONSTREAM_RAY_MAX_REPLICAS``, 4 unless set)."""
    settings = Settings()
    replicas = args.get("replicas", "auto")
    count = None if replicas == "auto" else int(replicas)
    return media_app(settings, count, settings.ray_max_replicas or 4)
