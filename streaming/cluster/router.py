"""Ray Serve's request router for media replicas: the one with the fewest sessions first.

Each replica reports ``sessions`` and ``max_sessions`` (``MediaReplica.record_routing_stats``);
Serve's controller collects them every ``request_routing_stats_period_s`` and hands them to
the routers. Between two reports a burst of offers would all land on the replica that looked
emptiest, so the router adds the requests it chose each replica for within the last
``window_s`` (two report periods: by then a report includes them). A choice is counted when
it is made, not when Serve says the request was routed: offers made at once are ranked one
after another, each seeing the ones before it (counted on routing, four offers at once all
saw the same empty counts and all went to one replica). Replicas that rank equal are taken
in random order, so a burst spreads even before anything is counted. That count only orders
replicas: it holds every request, not only offers (Serve does not tell the router a
request's path), so it never makes a replica look full; only its report does.

Replicas are ranked in three tiers: ready with room; then not ready (still loading its models,
or ready since a report the router has not seen yet: a fresh replica's first reports say
"loading"); then full or draining, which will refuse whatever it gets. Within a tier, the
fewest sessions plus recent requests first. No replica is left out: when every replica is
full the request still reaches one, which answers the embedded server's own 429 (or 503).
A tier is never crossed by counting requests: health checks sent to a loading replica once
made it look busier than a full one, and the next offer got the full one's 429.
"""

from __future__ import annotations

import random
import time
from collections import deque
from typing import Any

from ray.serve.request_router import (
    FIFOMixin,
    PendingRequest,
    ReplicaID,
    RequestRouter,
    RunningReplica,
)

__all__ = ["FewestSessionsRouter", "replica_load"]


def replica_load(stats: dict[str, Any], recent_requests: int) -> tuple[int, int]:
    """Sort key: the tier (0 ready with room, 1 not ready, 2 full or draining), then the
    fewest sessions plus requests sent lately. A replica that has not reported yet counts as
    empty and ready."""
    sessions = int(stats.get("sessions", 0))
    limit = stats.get("max_sessions")
    if stats.get("draining", False) or (limit is not None and sessions >= int(limit)):
        tier = 2
    else:
        tier = 0 if stats.get("ready", True) else 1
    return tier, sessions + recent_requests


class FewestSessionsRouter(FIFOMixin, RequestRouter):
    def initialize_state(self, window_s: float = 2.0, **kwargs: Any) -> None:
        self._window_s = window_s
        self._sent: dict[ReplicaID, deque[float]] = {}
        """Per replica: when this router sent it a request, within the window."""

    def _recent_requests(self, replica_id: ReplicaID) -> int:
        sent = self._sent.get(replica_id)
        if not sent:
            return 0
        horizon = time.monotonic() - self._window_s
        while sent and sent[0] < horizon:
            sent.popleft()
        return len(sent)

    async def choose_replicas(
        self,
        candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        if pending_request is not None:
            # All candidates busy with requests right now: back off rather than spin.
            pending_request.routing_context.should_backoff = True
        shuffled = random.sample(candidate_replicas, len(candidate_replicas))
        ranked = sorted(  # stable: equals stay in their random order
            shuffled,
            key=lambda r: replica_load(r.routing_stats, self._recent_requests(r.replica_id)),
        )
        if ranked:  # counted now: the next choice, even a concurrent one, sees it
            self._sent.setdefault(ranked[0].replica_id, deque()).append(time.monotonic())
        return [[replica] for replica in ranked]
