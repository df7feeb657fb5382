"""The cluster's directory: one detached actor that knows every replica (its latest routing
report, for ``/healthz`` and the router) and every replica's and pipeline actor's latest
Prometheus exposition (for ``/metrics``, merged by whichever replica is asked)."""

from __future__ import annotations

import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .names import DIRECTORY, NAMESPACE

__all__ = ["METRICS_PERIOD_S", "STATS_PERIOD_S", "WorkerDirectory", "directory"]

# How often Serve collects each replica's stats; a report older than a few periods is from
# a replica that is gone.
STATS_PERIOD_S = 1.0
_STALE_AFTER_S = 5 * STATS_PERIOD_S
METRICS_PERIOD_S = 5.0
"""How often replicas and pipeline actors send their metrics: about a Prometheus scrape."""
_METRICS_STALE_AFTER_S = 3 * METRICS_PERIOD_S


@ray.remote(num_cpus=0)
class WorkerDirectory:
    """The replicas' latest reports and metrics, by replica id; pipeline actors' metrics,
    by ``pipeline-<id>``."""

    def __init__(self) -> None:
        self._reports: dict[str, tuple[float, dict[str, Any]]] = {}
        self._metrics: dict[str, str] = {}
        self._actor_metrics: dict[str, tuple[float, str]] = {}

    def report(self, worker: str, info: dict[str, Any], metrics: str | None = None) -> None:
        """A replica's load: pushed when its sessions change, and every period. A report
        older than the one kept (``report`` numbers it) refreshes only its age."""
        kept = self._reports.get(worker)
        if kept is not None and kept[1].get("report", 0) > info.get("report", 0):
            info = kept[1]
        self._reports[worker] = (time.monotonic(), info)
        if metrics is not None:
            self._metrics[worker] = metrics

    def _current(self) -> dict[str, tuple[float, dict[str, Any]]]:
        now = time.monotonic()
        self._reports = {w: r for w, r in self._reports.items() if now - r[0] < _STALE_AFTER_S}
        self._metrics = {w: m for w, m in self._metrics.items() if w in self._reports}
        return self._reports

    def node(self) -> str:
        """The node it runs on (for operators, and the test that it stays on the head)."""
        return str(ray.get_runtime_context().get_node_id())

    def workers(self) -> list[dict[str, Any]]:
        return sorted((info for _, info in self._current().values()), key=lambda i: i["worker"])

    def report_metrics(self, source: str, metrics: str) -> None:
        """An actor's metrics that takes no sessions (a pipeline's): not among the workers;
        gone a few periods after its last report (the pipeline terminated)."""
        self._actor_metrics[source] = (time.monotonic(), metrics)

    def metrics(self) -> dict[str, str]:
        self._current()
        now = time.monotonic()
        self._actor_metrics = {
            source: entry
            for source, entry in self._actor_metrics.items()
            if now - entry[0] < _METRICS_STALE_AFTER_S
        }
        return {**self._metrics, **{s: m for s, (_, m) in self._actor_metrics.items()}}


_HEAD_RESOURCE = "node:__internal_head__"
"""The resource Ray gives the head node alone (in ``ray.nodes()``' answer)."""


def _head_node() -> str | None:
    for node in ray.nodes():
        if node.get("Alive") and _HEAD_RESOURCE in node.get("Resources", {}):
            return str(node["NodeID"])
    return None


def directory() -> Any:
    """The directory's handle; the first caller creates it. On the head node: Ray places an
    actor that asks for no resources on a random node (a soft affinity too, measured), and
    the loss of that node (a pipeline's, say) left every replica's ``/healthz`` answering
    500 for good. The head's loss is the cluster's. Restarted if its process dies all the
    same: what it holds is sent again every period."""
    head = _head_node()
    placement = (
        {}
        if head is None
        else {"scheduling_strategy": NodeAffinitySchedulingStrategy(head, soft=False)}
    )
    return WorkerDirectory.options(  # type: ignore[attr-defined]
        name=DIRECTORY,
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        max_restarts=-1,
        max_task_retries=-1,
        **placement,
    ).remote()
