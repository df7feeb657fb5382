"""The Ray router's ranking of media replicas (the Serve side is tested in e2e/test_cluster.py)."""

from __future__ import annotations

from streaming.cluster.router import replica_load


def rank(replicas: dict[str, tuple[dict, int]]) -> list[str]:
    return sorted(replicas, key=lambda name: replica_load(*replicas[name]))


def test_the_fewest_sessions_first_counting_requests_sent_since_the_last_report():
    stats = {"sessions": 1, "max_sessions": 4, "ready": True}
    idle = {"sessions": 0, "max_sessions": 4, "ready": True}
    assert rank({"a": (stats, 0), "b": (idle, 0)}) == ["b", "a"]
    # Two requests sent to b lately: it may hold more than a by now.
    assert rank({"a": (stats, 0), "b": (idle, 2)}) == ["a", "b"]


def test_only_its_report_makes_a_replica_full_and_full_ones_come_last_but_stay():
    full = {"sessions": 4, "max_sessions": 4, "ready": True}
    loading = {"sessions": 0, "max_sessions": 4, "ready": False}
    busy = {"sessions": 3, "max_sessions": 4, "ready": True}
    assert rank({"full": (full, 0), "loading": (loading, 0), "busy": (busy, 0)})[0] == "busy"
    # Requests sent lately (health checks among them) order replicas, never fill one.
    assert rank({"busy": (busy, 5), "full": (full, 0)}) == ["busy", "full"]
    # However many (health checks, in CI) went to a loading replica lately: a full one refuses
    # for certain, a loading one may be ready since its report.
    assert rank({"full": (full, 0), "loading": (loading, 1)}) == ["loading", "full"]
    assert rank({"full": (full, 0), "loading": (loading, 30)}) == ["loading", "full"]
    draining = {"sessions": 0, "max_sessions": 4, "ready": False, "draining": True}
    assert rank({"draining": (draining, 0), "loading": (loading, 30)}) == ["loading", "draining"]
    # A replica that has not reported yet is taken as empty and ready.
    assert rank({"busy": (busy, 0), "new": ({}, 0)}) == ["new", "busy"]


async def test_offers_made_at_once_spread_over_the_replicas():
    """Four choices at once, before Serve reports any of them routed: each counts its pick
    when it is made, so the next one sees it (they all went to one replica when counted only
    once routed)."""
    from dataclasses import dataclass, field

    from streaming.cluster.router import FewestSessionsRouter

    @dataclass
    class Replica:  # what the router reads of Serve's RunningReplica
        replica_id: str
        routing_stats: dict = field(default_factory=lambda: {"sessions": 0, "max_sessions": 4})

    router = object.__new__(FewestSessionsRouter)  # Serve builds it with its own arguments
    router.initialize_state(window_s=60.0)
    replicas = [Replica("a"), Replica("b")]
    import asyncio

    choices = await asyncio.gather(*(router.choose_replicas(replicas) for _ in range(4)))
    firsts = sorted(ranked[0][0].replica_id for ranked in choices)
    assert firsts == ["a", "a", "b", "b"]
