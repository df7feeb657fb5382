"""The Ray deployment: ``visionstream serve --ray ADDRESS`` on a real Ray cluster on this
machine, every node on 127.0.0.1: the head and a worker with one CPU each (one media replica
on each), and two workers without CPUs that offer the ``pipelines`` resource pipeline actors
ask for here: a pipeline never runs where a replica does, so the test that removes a
pipeline's node leaves both replicas, and puts a node like it back, for the tests after it
in any order. The unmodified inference-sdk program is the client."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import cv2
import httpx
import numpy as np
import pytest
from inference_sdk import InferenceHTTPClient
from inference_sdk.webrtc import StreamConfig
from prometheus_client.parser import text_string_to_metric_families
from ray.cluster_utils import Cluster

from sources import decode_stamp
from streaming.client import Client, PipelineSource
from streaming.client import StreamConfig as ClientStreamConfig
from streaming.inference.default_model import DEFAULT_MODEL_ID
from tests.conftest import DETECT_SPEC, load_photo
from tests.e2e.test_browser import open_page, wait_stats
from tests.support.browser import chromium
from tests.support.cluster import loopback_cluster
from tests.support.media import write_y4m
from tests.support.postgres import PostgresServer, postgres_available
from tests.support.sdk import LoopManualSource, SdkSession
from tests.support.server import ServerProcess, ray_server_process, wait_for
from tests.support.workflows import check_sliced, sliced_detection

pytestmark = pytest.mark.e2e

# A loaded 2-core machine starts two replicas' models and a Ray cluster: generous.
START_S = 240
WAIT_S = 60
FPS = 15


PIPELINES_NODE = {"num_cpus": 0, "resources": {"pipelines": 1}}
"""A node for pipeline actors alone (no CPU: no media replica lands there)."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with loopback_cluster(1, {"num_cpus": 1}, PIPELINES_NODE, PIPELINES_NODE) as nodes:
        yield nodes


@pytest.fixture(scope="module")
def events_database() -> Iterator[str | None]:
    """The cluster's event store: a PostgreSQL every replica and pipeline actor writes to."""
    if not postgres_available():
        yield None
        return
    with PostgresServer() as database:
        yield database.url


@pytest.fixture(scope="module")
def ray_server(cluster: Cluster, events_database: str | None) -> Iterator[ServerProcess]:
    events = {"events_url": events_database} if events_database else {}
    server = ray_server_process(
        cluster.address, "2", ray_pipeline_resources='{"CPU": 0, "pipelines": 1}', **events
    )
    try:
        server.wait_for_output("Ray Serve replicas", timeout=START_S)
        server.wait_workers_ready(2, START_S)
        yield server
    finally:
        server.stop()


def sessions_by_node(server: ServerProcess) -> dict[str, int]:
    return {w["node"]: w["sessions"] for w in server.workers()}


def settled(server: ServerProcess) -> None:
    """No session anywhere, in the directory and (two report periods later) in the stats
    Serve's router ranks replicas by."""
    wait_for(lambda: set(sessions_by_node(server).values()) == {0}, WAIT_S, "no session left")
    seen = max(w["reported_at"] for w in server.workers())
    wait_for(lambda: min(w["reported_at"] for w in server.workers()) > seen + 2, WAIT_S,
             "two more reports from each replica")  # fmt: skip


def test_sessions_offered_at_once_spread_over_both_nodes(ray_server):
    """Two offers at the same moment, each replica taking one session: the router spreads
    them (before, both could go to one replica, and the second got its 429)."""
    settled(ray_server)
    sessions = [SdkSession(ray_server.url, DETECT_SPEC) for _ in range(2)]  # offered at once
    try:
        for session in sessions:
            session.wait_streaming()  # results on each: none refused, none stuck
        wait_for(lambda: sorted(sessions_by_node(ray_server).values()) == [1, 1], WAIT_S,
                 "one session on each node")  # fmt: skip
    finally:
        for session in sessions:
            session.close()
    # Closed on the client's side is not yet released on the replicas: the next test needs
    # both slots (with one session per replica, a slot still held is that test's 429).
    wait_for(lambda: set(sessions_by_node(ray_server).values()) == {0}, WAIT_S,
             "no session left on any node")  # fmt: skip


def one_session_per_replica(server: ServerProcess) -> tuple[SdkSession, SdkSession]:
    """Two streaming sessions, one on each replica: the second offered once the router has
    seen the first in the replicas' reports."""
    settled(server)  # whatever an earlier test left is gone
    first = SdkSession(server.url, DETECT_SPEC)
    first.wait_streaming()
    wait_for(lambda: sorted(sessions_by_node(server).values()) == [0, 1], WAIT_S,
             "the first session in the replicas' reports")  # fmt: skip
    # Two reports after the one that showed it, the proxy's router surely has it too.
    seen = max(w["reported_at"] for w in server.workers())
    wait_for(lambda: min(w["reported_at"] for w in server.workers()) > seen + 2, WAIT_S,
             "two more reports from each replica")  # fmt: skip
    second = SdkSession(server.url, DETECT_SPEC)
    second.wait_streaming()
    wait_for(lambda: sorted(sessions_by_node(server).values()) == [1, 1], WAIT_S,
             "one session on each node")  # fmt: skip
    return first, second


def pipeline_frames_in_metrics(server: ServerProcess, pipeline_id: str) -> dict[str, float]:
    """``/metrics``' frames processed by the pipeline's source 0, by worker (its actor)."""
    families = text_string_to_metric_families(server.get("/metrics").text)
    return {
        sample.labels["worker"]: sample.value
        for family in families
        if family.name == "visionstream_source_frames"
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels.get("pipeline") == pipeline_id
    }


def sessions_in_metrics(server: ServerProcess) -> list[float]:
    """``/metrics``' active sessions, one sample per replica (labelled with its worker)."""
    families = text_string_to_metric_families(server.get("/metrics").text)
    active = [f for f in families if f.name == "visionstream_sessions_active"]
    return sorted(s.value for f in active for s in f.samples if "worker" in s.labels)


def test_sdk_sessions_spread_over_both_nodes_and_a_full_cluster_answers_429(ray_server):
    first, second = one_session_per_replica(ray_server)
    try:
        # Any replica's /metrics has every replica's (each pushes its own every 5 s).
        wait_for(lambda: sessions_in_metrics(ray_server) == [1, 1], WAIT_S,
                 "both replicas' sessions in /metrics")  # fmt: skip
        # Every replica at VISIONSTREAM_MAX_SESSIONS (1): the next offer gets the same 429 as
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
        second.close()
    wait_for(lambda: set(sessions_by_node(ray_server).values()) == {0}, WAIT_S,
             "no session left on any node")  # fmt: skip


def test_a_killed_replica_ends_its_own_session_and_no_other(ray_server):
    first, second = one_session_per_replica(ray_server)
    try:
        victim = min(ray_server.workers(), key=lambda w: w["worker"])
        os.kill(victim["pid"], signal.SIGKILL)
        # Its session's SDK sees the peer go (nothing answers there any more); the other's
        # goes on streaming.
        wait_for(lambda: first.ended.is_set() or second.ended.is_set(), WAIT_S,
                 "a session that saw its replica go")  # fmt: skip
        (survivor,) = [s for s in (first, second) if not s.ended.is_set()]
        survivor.wait_streaming(survivor.frames + 30)
        assert not survivor.ended.is_set()
    finally:
        first.close()
        second.close()

    # Serve replaces the replica; both take sessions again, with none left anywhere.
    def replaced() -> bool:
        workers = ray_server.workers()
        return len(workers) == 2 and all(w["ready"] and w["sessions"] == 0 for w in workers)

    wait_for(replaced, START_S, "two empty, ready replicas")


DIRECTORY_PROBE = """
import sys, ray
from streaming.cluster.names import DIRECTORY, NAMESPACE
ray.init(address=sys.argv[1], namespace=NAMESPACE, logging_level="ERROR")
directory = ray.get_actor(DIRECTORY)
print(ray.get(directory.node.remote()))
ray.kill(directory, no_restart=False)
print(ray.get(directory.node.remote()), flush=True)  # waits for Ray to restart it
"""


def test_the_worker_directory_stays_on_the_head_and_comes_back_when_killed(cluster, ray_server):
    """The replicas' directory (behind ``/healthz`` and ``/metrics``) lives on the head:
    Ray put it on a random node, and the loss of that node left ``/healthz`` answering 500
    for good (a shuffled loaded run, seed 27004). Killed, it is restarted there and the
    replicas fill it again."""
    probe = subprocess.run([sys.executable, "-c", DIRECTORY_PROBE, cluster.address],
                           capture_output=True, text=True, timeout=START_S)  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    head = cluster.head_node.node_id
    assert probe.stdout.split()[-2:] == [head, head], probe.stdout
    wait_for(lambda: len(ray_server.workers()) == 2, START_S, "both replicas in the directory")


def test_the_browser_page_streams_through_the_serve_front(ray_server, photos, tmp_path):
    scene = load_photo(photos, "person.jpg")
    clip = write_y4m(tmp_path / "scene.y4m", [scene] * 10)
    with chromium(fake_camera=clip) as browser, open_page(browser, ray_server.url + "/") as page:
        page.get_by_role("button", name="Start", exact=True).click()
        wait_stats(page, 's.state === "connected" && s.framesReceived >= 15 && s.detections > 0')
        # Reported when its offer was accepted (pushed to the directory, not at the next
        # period); waited for all the same, as the directory's answer travels too.
        wait_for(lambda: sorted(sessions_by_node(ray_server).values()) == [0, 1], WAIT_S,
                 "the page's session in the replicas' reports")  # fmt: skip
        page.get_by_role("button", name="Stop", exact=True).click()
        wait_stats(page, 's.phase === "stopped"')
    wait_for(lambda: set(sessions_by_node(ray_server).values()) == {0}, WAIT_S,
             "the page's session closed")  # fmt: skip


def test_a_refused_pipeline_is_a_clear_error_and_leaves_no_actor(ray_server, camera):
    spec = copy.deepcopy(DETECT_SPEC)
    spec["steps"][0]["model_id"] = "no-such-model"
    response = ray_server.start_pipeline(camera.url, spec)
    assert response.status_code == 400 and "no-such-model" in response.json()["message"]
    assert ray_server.pipeline_nodes() == {}
    local = ray_server.start_pipeline("/etc/passwd", DETECT_SPEC)  # checked by the replica
    assert local.status_code == 403, local.text


def test_pipeline_actors_on_two_nodes_write_events_any_replica_lists(
    ray_server, camera, events_database
):
    if events_database is None:
        pytest.skip("Debian's postgresql is not installed (tests/install.sh installs it)")
    started = [ray_server.start_pipeline(camera.url, DETECT_SPEC) for _ in range(2)]
    assert [r.status_code for r in started] == [200, 200], [r.text for r in started]
    ids = [r.json()["context"]["pipeline_id"] for r in started]
    try:
        nodes = ray_server.pipeline_nodes()
        assert nodes[ids[0]] != nodes[ids[1]]  # one "pipelines" resource per node

        def running_in_the_store() -> bool:
            # Whichever replica Serve's proxy picks answers, for both actors' rows.
            stored = ray_server.events(kind="source_state")
            running = {e["pipeline"] for e in stored if e["payload"]["new_state"] == "RUNNING"}
            return running >= set(ids)

        wait_for(running_in_the_store, START_S, "both pipelines' cameras running, stored")
    finally:
        for pipeline_id in ids:
            ray_server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    wait_for(lambda: not ray_server.pipeline_nodes(), WAIT_S, "both actors gone")


def test_a_two_stage_workflow_runs_per_tile_in_a_pipeline_actor(ray_server, camera):
    """Batch dimensions through a Ray pipeline actor's run path: a result per tile."""
    response = ray_server.start_pipeline(camera.url, sliced_detection(DEFAULT_MODEL_ID))
    assert response.status_code == 200, response.text
    pipeline_id = response.json()["context"]["pipeline_id"]
    try:

        def consumed() -> dict | None:
            answer = httpx.request("GET", f"{ray_server.url}/inference_pipelines/{pipeline_id}"
                                   "/consume", json={"wait_seconds": 5}, timeout=30)  # fmt: skip
            outputs = answer.json().get("outputs") if answer.status_code == 200 else None
            return outputs[0] if outputs else None

        check_sliced(wait_for(consumed, START_S, "a result of the sliced workflow"))
    finally:
        ray_server.post(f"/inference_pipelines/{pipeline_id}/terminate")


class PipelinePoller:
    """Polls a pipeline's ``consume`` and ``status`` on a thread, as a monitoring program
    does, until ``stop``; returns each answer's route, HTTP status and whether the status
    report said the pipeline was restarting."""

    def __init__(self, url: str, pipeline_id: str) -> None:
        self._base = f"{url}/inference_pipelines/{pipeline_id}"
        self._answers: list[tuple[str, int, bool]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self._done.is_set():
                consume = client.request("GET", f"{self._base}/consume",
                                         json={"wait_seconds": 1})  # fmt: skip
                self._answers.append(("consume", consume.status_code, False))
                status = client.get(f"{self._base}/status")
                restarting = status.status_code == 200 and status.json()["report"]["restarting"]
                self._answers.append(("status", status.status_code, restarting))

    def stop(self) -> list[tuple[str, int, bool]]:
        self._done.set()
        self._thread.join(120)
        assert not self._thread.is_alive()
        return self._answers


def source_frames(server: ServerProcess, pipeline_id: str) -> dict[int, int]:
    """Each source's frames processed, by source id, as the status reports them."""
    report = server.get(f"/inference_pipelines/{pipeline_id}/status").json()["report"]
    return {s["source_id"]: s["frames_processed"] for s in report["sources_metadata"]}


def stamped_jpeg(url: str) -> bool:
    """``url`` answers a JPEG of the camera's stamped picture (a moment's 503 or 504 while
    the actor moves is no answer yet)."""
    answer = httpx.get(url, timeout=30)
    if answer.status_code != 200 or answer.headers["content-type"] != "image/jpeg":
        return False
    picture = cv2.imdecode(np.frombuffer(answer.content, np.uint8), cv2.IMREAD_COLOR)
    return picture is not None and decode_stamp(picture) is not None


def test_a_pipeline_runs_on_after_its_node_is_removed(cluster, ray_server, camera):
    response = ray_server.start_pipeline(camera.url, DETECT_SPEC)
    assert response.status_code == 200, response.text
    pipeline_id = response.json()["context"]["pipeline_id"]
    try:
        body = wait_for(lambda: ray_server.fresh_result(pipeline_id), WAIT_S, "a first result")
        assert set(body["outputs"][0]) == {"annotated", "predictions"}
        # The actor's source series reach the cluster's /metrics, labelled with the actor.
        # The series appears at 0 when the source starts; a later report of the actor's
        # metrics carries the frames it processed: wait for a counted frame, not the series.
        worker = f"pipeline-{pipeline_id[:8]}"
        frames = wait_for(
            lambda: (
                (seen := pipeline_frames_in_metrics(ray_server, pipeline_id)).get(worker, 0) >= 1
                and seen
            ),
            WAIT_S,
            "its metrics, a frame counted",
        )
        assert frames[worker] >= 1
        # A source added to (and removed from) the running pipeline, in its actor.
        sources = f"{ray_server.url}/inference_pipelines/{pipeline_id}/sources"
        added = httpx.post(sources, json={"video_reference": camera.url}, timeout=30)
        assert added.status_code == 200 and added.json()["source_id"] == 1, added.text
        wait_for(lambda: source_frames(ray_server, pipeline_id).get(1), WAIT_S, "source 1 runs")
        assert httpx.delete(f"{sources}/1", timeout=30).status_code == 200
        last = httpx.delete(f"{sources}/0", timeout=30)  # our error, through the actor
        assert (last.status_code, last.json()["code"]) == (409, "last_source")
        assert list(source_frames(ray_server, pipeline_id)) == [0]
        # Its restream's URL (from any replica; the results come from the actor) plays before
        # the move and, the same URL, after it.
        listing = ray_server.get(f"/inference_pipelines/{pipeline_id}/restream").json()
        snapshot_url = listing["sources"]["0"]["urls"]["snapshot"]
        assert "token=" in snapshot_url and "/restream/" in snapshot_url
        assert wait_for(lambda: stamped_jpeg(snapshot_url), WAIT_S, "the restream")
        first_node = ray_server.pipeline_nodes()[pipeline_id]
        victim = next(n for n in cluster.worker_nodes if n.node_id == first_node)
        # A monitoring program polls the pipeline throughout the move: it must never be
        # told the pipeline is gone (the published SDK raises on that 404).
        poller = PipelinePoller(ray_server.url, pipeline_id)
        cluster.remove_node(victim)
        # A node like it back: the module's cluster keeps its shape for the tests after this
        # one (a replacement taking the actor is as good a move as the other node).
        cluster.add_node(node_ip_address="127.0.0.1", **PIPELINES_NODE)

        # Ray restarts the actor on the other node with the pipelines resource; the replica
        # left on the head answers for it.
        moved = wait_for(
            lambda: (
                (node := ray_server.pipeline_nodes().get(pipeline_id)) not in (None, first_node)
                and node
            ),
            START_S,
            "the pipeline placed on another node",
        )
        assert moved != first_node
        wait_for(lambda: ray_server.fresh_result(pipeline_id), START_S, "results after the move")
        answers = poller.stop()
        assert answers and {status for _, status, _ in answers} == {200}, answers
        report = ray_server.get(f"/inference_pipelines/{pipeline_id}/status").json()["report"]
        assert report["sources_metadata"][0]["state"] == "RUNNING"
        assert wait_for(lambda: stamped_jpeg(snapshot_url), WAIT_S, "the restream, moved")
        # Watched over WebRTC from a replica, which gets the frames from the actor.
        config = ClientStreamConfig(stream_output=["annotated"], data_output=["predictions"])
        notices: list[tuple[str, str]] = []
        with Client(ray_server.url).webrtc.stream(PipelineSource(pipeline_id), config=config) as w:
            w.on_error(
                lambda errors, metadata: notices.extend(
                    zip(metadata.error_codes, errors, strict=True)
                )
            )
            frame, metadata = next(iter(w.video()))
            assert decode_stamp(frame) is not None and metadata.pts is not None
            # Terminated, the actor goes: the viewer is told, not left waiting.
            ended = ray_server.post(f"/inference_pipelines/{pipeline_id}/terminate")
            assert ended.status_code == 200, ended.text
            w.wait(timeout=60)
            assert notices == [("source_ended", f"pipeline {pipeline_id} was terminated")]
    finally:
        ray_server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    assert pipeline_id not in ray_server.pipeline_nodes()
