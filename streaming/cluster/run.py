"""``visionstream serve --ray``: the server as Ray Serve replicas, on one port, until a signal."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from typing import Any, Literal

import ray
from ray import serve

from ..config import Settings
from .names import APP_NAME, DIRECTORY, NAMESPACE
from .replica import media_app

__all__ = ["default_replicas", "deploy", "serve_on_ray", "undeploy"]

# How long a Ctrl-C or SIGTERM can go unseen by the waiting main thread (see below).
_SIGNAL_CHECK_S = 0.5


def default_replicas() -> int:
    """One replica per CPU of the cluster (each replica's loop is one core's work)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def deploy(settings: Settings, replicas: int | None) -> None:
    """Serve's proxy on ``settings.host:port`` and ``replicas`` media workers behind it
    (``None``: as many as the sessions need); returns once they are running (their models
    still loading: see ``/readyz``)."""
    serve.start(
        proxy_location=settings.ray_proxy_location,
        http_options={"host": settings.host, "port": settings.port},
    )
    most = settings.ray_max_replicas or default_replicas()
    serve.run(media_app(settings, replicas, most), name=APP_NAME, route_prefix="/")


def undeploy() -> None:
    """Removes the application, Serve and the worker directory; idempotent."""
    with contextlib.suppress(Exception):  # nothing deployed, or Serve already gone
        serve.shutdown()
    with contextlib.suppress(ValueError):  # no directory
        ray.kill(ray.get_actor(DIRECTORY, namespace=NAMESPACE))


def serve_on_ray(
    settings: Settings, address: str | None, replicas: int | Literal["auto"] | None
) -> None:
    """Joins the cluster at ``address`` (``auto``, ``ray://host:10001``) or starts a local
    Ray on every core; ``replicas``: a count, ``auto`` (as the sessions need) or ``None``
    (one per CPU). Serves until SIGINT or SIGTERM, then removes what it deployed."""
    ray.init(address=address, namespace=NAMESPACE, logging_level=logging.WARNING)
    stopping = threading.Event()
    try:
        count = None if replicas == "auto" else replicas or default_replicas()
        deploy(settings, count)
        shown = f"{count}" if count is not None else f"from {settings.ray_min_replicas}, autoscaled"
        print(
            f"visionstream listening on http://{settings.host}:{settings.port} "
            f"({shown} Ray Serve replicas)",
            flush=True,
        )

        def stop(signum: int, _: Any) -> None:
            stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        # In slices: a signal whose handler is pending when a wait starts would not end it
        # (CPython checks for handlers between bytecodes only).
        while not stopping.wait(_SIGNAL_CHECK_S):
            pass
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        undeploy()
        ray.shutdown()
