"""``visionstream serve --ray ADDRESS --replicas auto`` with ``VISIONSTREAM_RAY_MODELS=deployment``,
on a real one-node Ray cluster on 127.0.0.1 with two CPUs: one replica while idle, a second
started as soon as the first holds a session (one replica's worth of room kept free), and both
replicas' frames run by the one model deployment."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import DETECT_SPEC
from tests.support.cluster import loopback_cluster
from tests.support.sdk import SdkSession
from tests.support.server import ServerProcess, ray_server_process, wait_for

pytestmark = pytest.mark.e2e

START_S = 240


@pytest.fixture(scope="module")
def autoscaled() -> Iterator[ServerProcess]:
    with loopback_cluster(2) as cluster:
        server = ray_server_process(
            cluster.address,
            "auto",
            ray_max_replicas="2",
            ray_models="deployment",
            ray_model_resources='{"CPU": 0}',  # both CPUs for the replicas
        )
        try:
            server.wait_for_output("autoscaled", timeout=START_S)
            yield server
        finally:
            server.stop()


def served_by(server: ServerProcess) -> str:
    return server.get("/healthz").json()["served_by"]


def shared_model_device(server: ServerProcess) -> str:
    (model,) = server.get("/healthz").json()["models"].values()
    return model["device"]


def test_a_session_on_the_only_replica_brings_a_second_for_the_next(autoscaled):
    (idle,) = autoscaled.wait_workers_ready(1, START_S)
    assert "Ray Serve model deployment" in shared_model_device(autoscaled)
    first = SdkSession(autoscaled.url, DETECT_SPEC)
    second = None
    try:
        first.wait_streaming()
        workers = autoscaled.wait_workers_ready(2, START_S)
        assert idle["worker"] in {w["worker"] for w in workers}
        (fresh,) = {w["worker"] for w in workers} - {idle["worker"]}
        # Ready in the directory is not yet routable: Serve's proxy hears of the new replica
        # through its controller a moment later (in CI, a 429 from the full one came first).
        # The first replica is full in every report since, so the router sends a request
        # there only while it knows no other.
        wait_for(lambda: served_by(autoscaled) == fresh, START_S, "the proxy routing to it")
        second = SdkSession(autoscaled.url, DETECT_SPEC)
        second.wait_streaming()
        wait_for(lambda: sorted(w["sessions"] for w in autoscaled.workers()) == [1, 1],
                 START_S, "a session on each replica in their reports")  # fmt: skip
        # Predictions on both (SdkSession waited for them), from the one model deployment.
        for _ in range(2):  # whichever replica answers
            assert "Ray Serve model deployment" in shared_model_device(autoscaled)
    finally:
        first.close()
        if second is not None:
            second.close()
