"""The Ray router's ranking of media replicas (the Serve side is tested in e2e/test_cluster.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from streaming.cluster.router import FewestSessionsRouter, newest_report, replica_load


def rank(replicas: dict[str, dict]) -> list[str]:
    return sorted(replicas, key=lambda name: replica_load(replicas[name]))


def test_the_fewest_sessions_first():
    busy = {"sessions": 1, "max_sessions": 4, "ready": True}
    idle = {"sessions": 0, "max_sessions": 4, "ready": True}
    assert rank({"a": busy, "b": idle}) == ["b", "a"]


def test_only_its_report_makes_a_replica_full_and_full_ones_come_last_but_stay():
    full = {"sessions": 4, "max_sessions": 4, "ready": True}
    loading = {"sessions": 0, "max_sessions": 4, "ready": False}
    busy = {"sessions": 3, "max_sessions": 4, "ready": True}
    assert rank({"full": full, "loading": loading, "busy": busy}) == ["busy", "loading", "full"]
    # A full one refuses for certain, a loading one may be ready since its report.
    draining = {"sessions": 0, "max_sessions": 4, "ready": False, "draining": True}
    assert rank({"draining": draining, "loading": loading}) == ["loading", "draining"]
    # A replica that has not reported yet may be loading still: a ready one goes first, and
    # it comes before a full one.
    assert rank({"new": {}, "busy": busy}) == ["busy", "new"]
    assert rank({"full": full, "new": {}}) == ["new", "full"]


def test_the_newer_of_serves_stats_and_the_pushed_report_ranks():
    """A session accepted since Serve's last collection is in the pushed report: the next
    offer sees that replica full, however long after the first it comes."""
    collected = {"sessions": 0, "max_sessions": 1, "reported_at": 100.0}
    pushed = {"sessions": 1, "max_sessions": 1, "reported_at": 100.4}
    assert newest_report(collected, pushed) is pushed
    assert replica_load(newest_report(collected, pushed))[0] == 2  # full
    assert newest_report({**collected, "reported_at": 101.0}, pushed)["sessions"] == 0
    assert newest_report(collected, None) is collected


@dataclass(frozen=True)
class Id:
    unique_id: str


@dataclass
class Replica:  # what the router reads of Serve's RunningReplica
    replica_id: Id
    routing_stats: dict = field(default_factory=dict)


@dataclass
class Metadata:
    internal_request_id: str


@dataclass
class RoutingContext:
    should_backoff: bool = False


@dataclass
class Pending:  # what the router reads of Serve's PendingRequest
    metadata: Metadata
    routing_context: RoutingContext = field(default_factory=RoutingContext)


def pending(request: str) -> Pending:
    return Pending(Metadata(request))


async def test_requests_count_from_their_choice_until_serve_says_they_completed():
    """Two offers at once land on two replicas: the first counts from the moment it is
    chosen, before Serve has routed (or sent) anything. A request Serve routes elsewhere is
    counted there; a completed one no longer counts."""
    router = object.__new__(FewestSessionsRouter)  # Serve builds it with its own arguments
    router.initialize_state(read_directory=False)
    idle = {"sessions": 0, "max_sessions": 2, "ready": True, "reported_at": 1.0}
    a, b = Replica(Id("a"), idle), Replica(Id("b"), idle)

    async def first_choice(request: str) -> str:
        ranked = await asyncio.wait_for(router.choose_replicas([a, b], pending(request)), 10)
        return ranked[0][0].replica_id.unique_id

    chosen = await asyncio.gather(first_choice("offer-1"), first_choice("offer-2"))
    assert sorted(chosen) == ["a", "b"]
    router.on_request_completed(Id(chosen[0]), "offer-1")
    assert await first_choice("offer-3") == chosen[0]
    router.on_request_routed(pending("offer-3"), Id(chosen[1]), None)  # sent elsewhere
    assert await first_choice("offer-4") == chosen[0]
    full = {"sessions": 2, "max_sessions": 2, "ready": True, "reported_at": 1.0}
    assert replica_load(full, 0)[0] == 2 and replica_load(idle, 5)[0] == 0  # never fills one
