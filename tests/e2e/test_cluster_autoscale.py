"""``visionstream serve --ray ADDRESS --replicas auto``: one replica while idle, a second one
started as soon as the first holds a session (one replica's worth of room kept free), on a
real one-node Ray cluster on 127.0.0.1 with two CPUs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ray.cluster_utils import Cluster

from tests.conftest import DETECT_SPEC
from tests.support.sdk import SdkSession
from tests.support.server import ServerProcess, ray_server_process

pytestmark = pytest.mark.e2e

START_S = 240


@pytest.fixture(scope="module")
def autoscaled() -> Iterator[ServerProcess]:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "node_ip_address": "127.0.0.1", "include_dashboard": False},
    )
    server = None
    try:
        server = ray_server_process(cluster.address, "auto", ray_max_replicas="2")
        server.wait_for_output("autoscaled", timeout=START_S)
        yield server
    finally:
        if server is not None:
            server.stop()
        cluster.shutdown()


def test_a_session_on_the_only_replica_brings_a_second_for_the_next(autoscaled):
    (idle,) = autoscaled.wait_workers_ready(1, START_S)
    first = SdkSession(autoscaled.url, DETECT_SPEC)
    second = None
    try:
        first.wait_streaming()
        workers = autoscaled.wait_workers_ready(2, START_S)
        assert idle["worker"] in {w["worker"] for w in workers}
        second = SdkSession(autoscaled.url, DETECT_SPEC)
        second.wait_streaming()
        assert sorted(w["sessions"] for w in autoscaled.workers()) == [1, 1]
    finally:
        first.close()
        if second is not None:
            second.close()
