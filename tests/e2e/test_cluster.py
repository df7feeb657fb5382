"""The Ray deployment: ``visionstream serve --ray ADDRESS`` on a real two-node Ray cluster on
this machine (both nodes on 127.0.0.1, one CPU each, so one media replica per node), with the
unmodified inference-sdk program as client."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from inference_sdk import InferenceHTTPClient
from inference_sdk.webrtc import StreamConfig
from ray.cluster_utils import Cluster

from tests.conftest import DETECT_SPEC
from tests.support.sdk import LoopManualSource
from tests.support.server import ServerProcess, wait_for

pytestmark = pytest.mark.e2e

# A loaded 2-core machine starts two replicas' models and a Ray cluster: generous.
START_S = 240
WAIT_S = 60
FPS = 15


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    node = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def ray_server(cluster: Cluster) -> Iterator[ServerProcess]:
    command = ["-m", "streaming.cli", "serve", "--ray", cluster.address, "--replicas", "2"]
    server = ServerProcess(
        serve=command, max_sessions="1", ray_proxy_location="HeadOnly", max_sessions_per_address="0"
    )
    try:
        server.wait_for_output("Ray Serve replicas", timeout=START_S)
        server.wait_workers_ready(2, START_S)
        yield server
    finally:
        server.stop()


class SdkSession:
    """The published SDK's program, fed at FPS on a thread until ``close``."""

    def __init__(self, url: str) -> None:
        self.source = LoopManualSource()
        client = InferenceHTTPClient(api_url=url, api_key=None)
        self.session = client.webrtc.stream(
            source=self.source,
            workflow=DETECT_SPEC,
            config=StreamConfig(stream_output=["annotated"], data_output=["predictions"]),
        )
        self.changed = threading.Condition()
        self.frames = self.predictions = 0
        self._stop = threading.Event()
        self.session.on_data("predictions")(self._on_predictions)
        for work in (self._consume, self._feed):
            threading.Thread(target=work, daemon=True).start()

    def _on_predictions(self, data: Any, metadata: Any) -> None:
        with self.changed:
            self.predictions += 1
            self.changed.notify_all()

    def _consume(self) -> None:
        for _frame, _metadata in self.session.video():
            with self.changed:
                self.frames += 1
                self.changed.notify_all()
            if self._stop.is_set():
                return

    def _feed(self) -> None:
        image = np.full((480, 640, 3), 90, np.uint8)
        if not self.source.connected.wait(WAIT_S):
            return
        while not self._stop.wait(1 / FPS):
            self.source.send_on_loop(image)

    def wait_streaming(self, count: int = 10) -> None:
        with self.changed:
            streaming = self.changed.wait_for(
                lambda: self.frames >= count and self.predictions >= count, WAIT_S
            )
        assert streaming, f"{self.frames} frames, {self.predictions} predictions back"

    def close(self) -> None:
        self._stop.set()
        self.session.close()


def sessions_by_node(server: ServerProcess) -> dict[str, int]:
    return {w["node"]: w["sessions"] for w in server.workers()}


def test_sdk_sessions_spread_over_both_nodes_and_a_full_cluster_answers_429(ray_server):
    first = SdkSession(ray_server.url)
    second = None
    try:
        first.wait_streaming()
        # The router sees the first replica's session (reports every second) and sends the
        # next offer to the other one: one session per node. Two reports after the one that
        # showed it, the proxy's router surely has it too.
        wait_for(lambda: sorted(sessions_by_node(ray_server).values()) == [0, 1], WAIT_S,
                 "the first session in the replicas' reports")  # fmt: skip
        seen = max(w["reported_at"] for w in ray_server.workers())
        wait_for(lambda: min(w["reported_at"] for w in ray_server.workers()) > seen + 2, WAIT_S,
                 "two more reports from each replica")  # fmt: skip
        second = SdkSession(ray_server.url)
        second.wait_streaming()
        spread = wait_for(
            lambda: (s := sessions_by_node(ray_server)) and sorted(s.values()) == [1, 1] and s,
            WAIT_S,
            "one session on each node",
        )
        assert len(spread) == 2
        # Every replica at STREAMING_MAX_SESSIONS (1): the next offer gets the same 429 as
        # from one server, whichever replica answers it.
        third = InferenceHTTPClient(api_url=ray_server.url, api_key=None).webrtc.stream(
            source=LoopManualSource(), workflow=DETECT_SPEC, config=StreamConfig()
        )
        with pytest.raises(Exception, match=r"429|too_many_sessions|[Tt]oo many"):
            third.wait(timeout=WAIT_S)
        third.close()
        first.wait_streaming(first.frames + 10)  # both keep streaming meanwhile
        second.wait_streaming(second.frames + 10)
    finally:
        first.close()
        if second is not None:
            second.close()
    wait_for(lambda: set(sessions_by_node(ray_server).values()) == {0}, WAIT_S,
             "no session left on any node")  # fmt: skip
