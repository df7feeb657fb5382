"""A real Ray cluster on this machine for the Ray deployment's tests: every node on 127.0.0.1,
no dashboard, shut down when the block ends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ray.cluster_utils import Cluster

__all__ = ["loopback_cluster"]


@contextmanager
def loopback_cluster(head_cpus: int = 1, *workers: dict[str, Any]) -> Iterator[Cluster]:
    """A head with ``head_cpus`` CPUs and a worker node for each of ``workers`` (the
    ``Cluster.add_node`` arguments: ``num_cpus``, ``resources``), all started."""
    address = {"node_ip_address": "127.0.0.1"}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": head_cpus, **address, "include_dashboard": False},
    )
    try:
        for worker in workers:
            cluster.add_node(**address, **worker)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()
