"""Ray Serve's request router for media replicas: the one with the fewest sessions first.

Each replica reports ``sessions`` and ``max_sessions`` two ways: Serve's controller collects
``MediaReplica.record_routing_stats`` every ``request_routing_stats_period_s`` and hands it
to the routers, and the replica pushes the same report to the directory (``directory.py``)
the moment a session is accepted or ends. Serve's copy lags by up to a period (more under
load); the directory's has a session from the moment its offer reached the replica. The
router ranks by the newer of the two, reading the directory at most every
``_DIRECTORY_TTL_S`` (whenever it cannot be read, Serve's copy ranks alone).

Replicas are ranked in tiers: ready with room; then not ready (still loading its models, not
reported yet, or ready since a report the router has not seen yet); then full or draining,
which will refuse whatever it gets. An offer that reaches a replica still loading waits there
for its models (``VISIONSTREAM_READY_WAIT_S``) rather than being refused. Within a tier, the
fewest sessions plus requests in flight first: the router counts a request from the moment
it chooses a replica for it (moved if Serve routes it elsewhere) until Serve says it
completed. So two offers made at the same moment go to two replicas, and an offer counts
until its session is in the report. Counting recent requests instead did not do this (health
checks counted as much as offers, and two simultaneous offers tied: the second got its 429),
and neither did Serve's own count of requests in flight, which rises only when a request is
sent, after both were routed.

No replica is left out: when every replica is full the request still reaches one, which
answers the embedded server's own 429 (or 503).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

from ray.serve.request_router import (
    FIFOMixin,
    PendingRequest,
    ReplicaID,
    RequestRouter,
    RunningReplica,
)

from .directory import directory

__all__ = ["FewestSessionsRouter", "newest_report", "replica_load"]

log = logging.getLogger(__name__)

# Short: a session's report must reach the ranking before its offer has left Serve's count
# of requests in flight (an offer takes tens of milliseconds at least).
_DIRECTORY_TTL_S = 0.02
_DIRECTORY_WAIT_S = 0.5
# A request counted this long ago is forgotten whatever Serve said: long polls (consume)
# and offers end well within it, and a lost completion must not skew the ranking forever.
_FORGET_AFTER_S = 120.0


def replica_load(stats: dict[str, Any], in_flight: int = 0) -> tuple[int, int]:
    """Sort key: the tier (0 ready with room, 1 not ready, 2 full or draining), then the
    fewest sessions plus requests in flight. A replica that has not reported yet counts as
    empty and not ready: it may well be loading its models still."""
    sessions = int(stats.get("sessions", 0))
    limit = stats.get("max_sessions")
    if stats.get("draining", False) or (limit is not None and sessions >= int(limit)):
        tier = 2
    else:
        tier = 0 if stats.get("ready", False) else 1
    return tier, sessions + in_flight


def newest_report(serve_stats: dict[str, Any], pushed: dict[str, Any] | None) -> dict[str, Any]:
    """The newer of a replica's two reports (by ``reported_at``, the replica's clock)."""
    if pushed is None or pushed.get("reported_at", 0) < serve_stats.get("reported_at", 0):
        return serve_stats
    return pushed


class FewestSessionsRouter(FIFOMixin, RequestRouter):
    def initialize_state(self, read_directory: bool = True, **kwargs: Any) -> None:
        self._in_flight: Counter[ReplicaID] = Counter()
        self._requests: dict[str, tuple[ReplicaID, float]] = {}
        """Each counted request (by Serve's internal id): its replica, and when it was chosen
        (a choice Serve never routes, a cancelled request, is forgotten after a while)."""
        self._read_directory = read_directory
        self._directory: Any = None
        self._pushed: dict[str, dict[str, Any]] = {}
        """The directory's latest report of each replica, by replica id."""
        self._pushed_at = -_DIRECTORY_TTL_S

    async def _pushed_reports(self) -> dict[str, dict[str, Any]]:
        now = time.monotonic()
        if not self._read_directory or now - self._pushed_at < _DIRECTORY_TTL_S:
            return self._pushed
        self._pushed_at = now
        try:
            if self._directory is None:
                self._directory = directory()
            reference = self._directory.workers.remote()
            workers = await asyncio.wait_for(
                asyncio.wrap_future(reference.future()), _DIRECTORY_WAIT_S
            )
        except Exception as exc:  # Serve's stats still rank; the next read may succeed
            log.debug("router: the directory could not be read: %s", exc)
            return self._pushed
        self._pushed = {w["worker"]: w for w in workers}
        return self._pushed

    async def choose_replicas(
        self,
        candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        if pending_request is not None:
            # All candidates busy with requests right now: back off rather than spin.
            pending_request.routing_context.should_backoff = True
        pushed = await self._pushed_reports()

        self._forget_stale()

        def load(replica: RunningReplica) -> tuple[int, int]:
            stats = newest_report(replica.routing_stats, pushed.get(replica.replica_id.unique_id))
            return replica_load(stats, self._in_flight[replica.replica_id])

        ranked = sorted(candidate_replicas, key=load)
        if ranked and pending_request is not None:  # counted now: the next choice sees it
            self._count(pending_request.metadata.internal_request_id, ranked[0].replica_id)
        return [[replica] for replica in ranked]

    def on_request_routed(
        self, pending_request: PendingRequest, replica_id: ReplicaID, result: Any
    ) -> None:
        # Where Serve really sent it (it may route a request to another's choice).
        self._count(pending_request.metadata.internal_request_id, replica_id)

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        self._uncount(internal_request_id)

    def _count(self, request: str, replica_id: ReplicaID) -> None:
        self._uncount(request)
        self._requests[request] = (replica_id, time.monotonic())
        self._in_flight[replica_id] += 1

    def _uncount(self, request: str) -> None:
        counted = self._requests.pop(request, None)
        if counted is not None:
            self._in_flight[counted[0]] -= 1
            if self._in_flight[counted[0]] <= 0:
                del self._in_flight[counted[0]]

    def _forget_stale(self) -> None:
        horizon = time.monotonic() - _FORGET_AFTER_S
        for request in [r for r, (_, at) in self._requests.items() if at < horizon]:
            self._uncount(request)
