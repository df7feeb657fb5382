"""A Serve replica: the embedded server's whole app, one per replica, each a full media worker.

The app is built on the replica (Serve's ingress builder), so each replica has its own loop,
its own aiortc peers and ICE candidates on its own node's addresses; media goes straight to
it, never through Ray. Serve asks each replica for its routing stats every period
(``record_routing_stats``); the same call files the replica in the ``WorkerDirectory``, which
any replica's ``/healthz`` reads to list them all.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from typing import Any

import ray
from fastapi import FastAPI
from ray import serve

from ..config import Settings
from ..server import create_app
from ..server.state import ServerState
from ..storage import private_process
from .autoscale import sessions_policy
from .directory import METRICS_PERIOD_S, STATS_PERIOD_S, directory
from .models import deployed_models, model_deployment, session_opener
from .names import APP_NAME
from .pipelines import ClusterPipelines
from .resources import actor_resources
from .router import FewestSessionsRouter

__all__ = ["media_app"]


_DEPLOYMENT = "media"
# Replica states (Serve's) of a replica that will take requests but cannot yet.
_COMING_UP = frozenset({"STARTING", "UPDATING", "RECOVERING"})

# Each report of this process's replica carries the next number: the directory keeps the
# newest, whichever thread sent it (a pushed one and Serve's periodic one may cross).
_report_numbers = itertools.count(1)


def _report(worker: str, node: str, load: dict[str, Any]) -> dict[str, Any]:
    """A replica's entry in the directory; ``load`` must be read just before this call."""
    return {
        "worker": worker,
        "node": node,
        "pid": os.getpid(),
        **load,
        "reported_at": time.time(),
        "report": next(_report_numbers),
    }


class _RayDeployment:
    """``Deployment`` for a replica: every replica, as the directory has them."""

    def __init__(self) -> None:
        self._directory = directory()
        self._node = ray.get_runtime_context().get_node_id()

    @property
    def worker(self) -> str:
        return serve.get_replica_context().replica_id.unique_id

    def report(self, load: dict[str, Any]) -> None:
        self._directory.report.remote(self.worker, _report(self.worker, self._node, load))

    async def workers(self) -> list[dict[str, Any]]:
        return list(await self._directory.workers.remote())

    async def unready(self) -> str | None:
        # Serve's own count of the deployment's replicas: one still being started is in no
        # report yet, and one loading its models reports itself not ready.
        overview = await asyncio.to_thread(serve.status)
        app = overview.applications.get(APP_NAME)
        deployment = app.deployments.get(_DEPLOYMENT) if app is not None else None
        if deployment is None:
            return "the media deployment is not running yet"
        states = {getattr(k, "value", str(k)): n for k, n in deployment.replica_states.items()}
        starting = {k: n for k, n in states.items() if k in _COMING_UP and n}
        if starting:
            return f"replicas still coming up: {starting}"
        running = states.get("RUNNING", 0)
        ready = sum(1 for w in await self.workers() if w.get("ready"))
        if ready < running:
            return f"{ready} of {running} replicas ready; the rest are still loading models"
        return None

    async def metrics(self) -> dict[str, str]:
        return dict(await self._directory.metrics.remote())


def media_app(settings: Settings, replicas: int | None, max_replicas: int = 1) -> Any:
    """The Serve application: ``replicas`` media workers behind the fewest-sessions router;
    ``None``: as many as the sessions need (``autoscale``), up to ``max_replicas``."""

    # Before the app's lifespan has built its state: nothing carried, not taking sessions.
    _STARTING = {
        "sessions": 0,
        "pipelines": 0,
        "max_sessions": settings.max_sessions,
        "ready": False,
        "draining": False,
    }

    deployed = deployed_models(settings)

    @serve.deployment(
        name=_DEPLOYMENT,
        **_scaling(settings, replicas, max_replicas),
        # Offers are short requests; sessions are not requests at all once answered.
        max_ongoing_requests=64,
        request_router_config={
            "request_router_class": FewestSessionsRouter,
            "request_routing_stats_period_s": STATS_PERIOD_S,
        },
        ray_actor_options=actor_resources(settings.ray_replica_resources),
    )
    @serve.ingress()
    class MediaReplica:
        def __init__(self, *_models: Any) -> None:
            # ``_models``: the model deployments' handles, bound here so that Serve deploys
            # them with the app; the replica's sessions find them by name (models.py).
            context = serve.get_replica_context()
            self._worker = context.replica_id.unique_id
            self._node = ray.get_runtime_context().get_node_id()
            self._directory = directory()
            self._metrics_sent = 0.0
            self._app: FastAPI | None = None

        def __serve_build_asgi_app__(self) -> FastAPI:
            """Serve's late-bound ingress (after ``__init__``, on the replica): the app is
            this replica's own, and its stats read it here."""
            private_process(settings)  # the replica's process is the server's
            self._app = create_app(
                settings,
                deployment=_RayDeployment(),
                # Each pipeline actor has its own models, hub and event writer.
                pipeline_factory=lambda parts: ClusterPipelines(parts.settings, parts.library),
                model_opener=session_opener(deployed),
            )
            return self._app

        def _state(self) -> ServerState | None:
            return getattr(self._app.state, "server", None) if self._app is not None else None

        def _load(self) -> dict[str, Any]:
            state = self._state()
            return state.load() if state is not None else _STARTING

        def record_routing_stats(self) -> dict[str, Any]:
            info = _report(self._worker, self._node, self._load())
            # Metrics less often: a scrape every 15 s or so is what Prometheus does.
            metrics, state, now = None, self._state(), time.monotonic()
            if state is not None and now - self._metrics_sent >= METRICS_PERIOD_S:
                metrics, self._metrics_sent = state.metrics.render().decode(), now
            self._directory.report.remote(self._worker, info, metrics)
            return info

        def record_autoscaling_stats(self) -> dict[str, float]:
            load = self._load()  # see autoscale.py
            return {"sessions": load["sessions"], "max_sessions": load["max_sessions"]}

    models = [model_deployment(settings, model_id) for model_id in sorted(deployed)]
    return MediaReplica.bind(*models)  # type: ignore[attr-defined]  # a Deployment, once decorated


def _scaling(settings: Settings, replicas: int | None, max_replicas: int) -> dict[str, Any]:
    """A fixed number of replicas, or (None) as many as the sessions need."""
    if replicas is not None:
        return {"num_replicas": replicas}
    return {
        "autoscaling_config": {
            "min_replicas": settings.ray_min_replicas,
            "initial_replicas": settings.ray_min_replicas,
            "max_replicas": max(max_replicas, settings.ray_min_replicas),
            "metrics_interval_s": STATS_PERIOD_S,
            "look_back_period_s": 5 * STATS_PERIOD_S,
            # Up soon (a new replica takes a while to load its model); down slowly:
            # sessions last minutes, and a fresh empty replica costs a model load.
            "upscale_delay_s": 5 * STATS_PERIOD_S,
            "downscale_delay_s": 300.0,
            "policy": {"policy_function": sessions_policy},
        }
    }
