"""The event store end to end: the real server runs a counting pipeline with an event sink
over a generated clip (a person walks across the line and back); ``GET /events`` then gives
exactly its rows, evidence included, and a restarted server on the same data directory
gives the same. Through PostgreSQL too: two servers (as two replicas would) share it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.e2e.test_analytics import run_through
from tests.support.media import there_and_back_clip
from tests.support.postgres import PostgresServer, postgres_available
from tests.support.server import ServerProcess, running_server
from tests.support.workflows import crossing_events

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def there_and_back(person, tmp_path_factory) -> Path:
    """The person walks across the line at x=320 and back: one crossing each way."""
    return there_and_back_clip(person, tmp_path_factory.mktemp("clips") / "walk.mp4")


def counting_with_evidence() -> dict:
    """The people counter, one webhook-free event sink per crossing (snapshot and clip)."""
    spec = crossing_events("http://127.0.0.1:9/unused")
    spec["steps"] = [s for s in spec["steps"] if s["name"] != "event"]
    spec["outputs"] = [o for o in spec["outputs"] if o["name"] != "event"]
    gate = next(s for s in spec["steps"] if s["name"] == "crossing")
    gate["next_steps"] = ["$steps.log"]
    spec["steps"].append({
        "type": "visionstream/event_sink@v1", "name": "log", "file": "{pipeline}-crossings",
        "image": "$steps.line_drawing.image", "clip_seconds_before": 1,
        "clip_seconds_after": 1,
        "payload": {"count_in": "$steps.counter.count_in",
                    "count_out": "$steps.counter.count_out"},
    })  # fmt: skip
    return spec


def check_crossings(server: ServerProcess, pipeline_id: str, sinks: Path) -> list[dict]:
    url = server.url
    events = server.events(pipeline=pipeline_id)
    crossings = [e for e in events if e["kind"] == "line_crossing"]
    assert sorted(e["direction"] for e in crossings) == ["in", "out"], events
    assert {e["class_name"] for e in crossings} == {"person"}
    assert len({e["tracker_id"] for e in crossings}) == 1
    assert {(e["source"], e["step"]) for e in crossings} == {("0", "counter")}
    logged = [e for e in events if e["kind"] == "event_sink"]
    assert len(logged) == 2 and {e["step"] for e in logged} == {"log"}
    for event in logged:
        snapshot = httpx.get(url + event["snapshot_url"], timeout=30)
        assert snapshot.status_code == 200 and snapshot.content[:2] == b"\xff\xd8"
        file = sinks / f"{pipeline_id}-crossings" / f"{event['payload']['event_id']}.mp4"
        clip = httpx.get(url + event["clip_url"], headers={"Range": "bytes=0-15"}, timeout=30)
        assert clip.status_code == 206 and clip.content == file.read_bytes()[:16]
    # A file's pipeline says when it started and when the file ended (a camera's, its
    # states: tests/e2e/test_analytics.py).
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "inference_thread_started" and kinds[-1] == "video_consumption_finished"
    return events


def test_a_pipelines_events_are_stored_with_evidence_and_kept_across_a_restart(
    there_and_back, tmp_path
):
    settings = {
        "allow_local_sources": "true",
        "sink_dir": str(tmp_path / "sinks"),
        "data_dir": str(tmp_path / "data"),
    }
    with running_server(**settings) as server:
        pipeline_id = run_through(server, there_and_back, counting_with_evidence())
        server.post(f"/inference_pipelines/{pipeline_id}/terminate")
        before = check_crossings(server, pipeline_id, tmp_path / "sinks")
        summary = server.get(f"/events/summary?pipeline={pipeline_id}&kind=line_crossing")
        assert sum(b["count"] for b in summary.json()["buckets"]) == 2
    with running_server(**settings) as again:
        assert check_crossings(again, pipeline_id, tmp_path / "sinks") == before


def test_replicas_sharing_postgresql_each_list_the_others_events(there_and_back, tmp_path):
    if not postgres_available():
        pytest.skip("Debian's postgresql is not installed (tests/install.sh installs it)")
    with PostgresServer() as database:
        shared = {
            "allow_local_sources": "true",
            "sink_dir": str(tmp_path / "sinks"),  # the shared evidence directory
            "events_url": database.url,
        }
        with running_server(**shared) as one, running_server(**shared) as two:
            first = run_through(one, there_and_back, counting_with_evidence())
            second = run_through(two, there_and_back, counting_with_evidence())
            # Terminated: a clip still waiting for its post-roll is written with what it has.
            one.post(f"/inference_pipelines/{first}/terminate")
            two.post(f"/inference_pipelines/{second}/terminate")
            for server, other in ((one, second), (two, first)):
                check_crossings(server, other, tmp_path / "sinks")
