"""``--replicas auto``: Ray Serve's autoscaler, driven by sessions rather than requests.

A session is one short request (its offer) followed by minutes of media that Serve never
sees, so Serve's default policy (ongoing requests per replica) would scale on nothing. Each
replica reports its ``sessions`` and ``max_sessions`` (``record_autoscaling_stats``); the
policy asks for enough replicas to hold them all plus one replica's worth of free slots, so
a burst of new sessions finds room while a replica starts. Serve applies the bounds
(``VISIONSTREAM_RAY_MIN_REPLICAS``/``MAX_REPLICAS``) and its up/downscale delays on top.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["replicas_for", "sessions_policy"]


def replicas_for(sessions: Mapping[Any, float], limits: Mapping[Any, float]) -> int:
    """Replicas for the reported ``sessions`` (by replica) at each one's ``limits``: all of
    them held, one replica's worth of room to spare."""
    limit = max(limits.values(), default=0) or 1
    return math.ceil(sum(sessions.values()) / limit) + 1


def sessions_policy(ctx: Any) -> tuple[int, dict[str, Any]]:
    """Serve's custom policy (``ctx``: an ``AutoscalingContext``)."""
    metrics = ctx.aggregated_metrics or {}
    wanted = replicas_for(metrics.get("sessions", {}), metrics.get("max_sessions", {}))
    return wanted, {}
