"""Monitoring analytics end to end, with the unmodified inference-sdk program: a generated clip
(a person cut from a Debian darknet photo, on a plain background) in which the person walks
across a line, stays in a zone and walks back, uploaded with ``VideoFileSource`` so every
frame is processed; the counts, the tracker id and the time in zone come back exact."""

from __future__ import annotations

import json
from pathlib import Path

import av
import cv2
import httpx
import pytest
from inference_sdk import InferenceHTTPClient
from inference_sdk.webrtc import StreamConfig, VideoFileSource

from streaming.protocol.workflows import people_counting, zone_occupancy
from tests.support.camera import RTSPCamera
from tests.support.media import (
    there_and_back_clip,
    walker_scene,
    walking_back_and_forth,
    write_clip,
)
from tests.support.mqtt import Subscriber, mosquitto
from tests.support.server import ServerProcess, running_server, wait_for
from tests.support.webhook import WebhookReceiver
from tests.support.workflows import crossing_events

pytestmark = pytest.mark.e2e

FPS = 30
LINE = [[320, 0], [320, 480]]
ZONE = [[420, 0], [640, 0], [640, 480], [420, 480]]


def counting_and_timing() -> dict:
    """The built-in people counter, plus a time-in-zone step on the same tracks."""
    spec = people_counting()
    spec["inputs"].append({"type": "WorkflowParameter", "name": "zone", "default_value": ZONE})
    spec["steps"].append({
        "type": "roboflow_core/time_in_zone@v3",
        "name": "timer",
        "image": "$inputs.image",
        "detections": "$steps.tracker.tracked_detections",
        "zone": "$inputs.zone",
    })  # fmt: skip
    spec["outputs"].append(
        {"type": "JsonField", "name": "timed", "selector": "$steps.timer.timed_detections"}
    )
    return spec


# At 0.75 (230 px tall) the default model found the person twice, a box inside a box, on
# every frame: two tracks, each counted (tests/unit/test_overlaps.py).
@pytest.mark.parametrize("scale", [1.0, 0.75], ids=["309px", "230px"])
def test_a_walk_across_the_line_into_the_zone_and_back(server, person, tmp_path, scale):
    if scale != 1.0:
        person = cv2.resize(person, None, fx=scale, fy=scale)
    half = person.shape[1] // 2 + 1
    there = list(range(half, 640 - half, 12))
    path = there + [there[-1]] * 60 + there[::-1]  # across, 2 s in the zone, back
    clip = write_clip(tmp_path / "walk.mp4", (walker_scene(person, x) for x in path), fps=FPS)
    inside = [ZONE[0][0] <= x <= ZONE[1][0] for x in path]
    first_in = inside.index(True)
    stay = inside[first_in:].index(False)  # the first visit's frames in the zone
    truth = (stay - 1) / FPS

    # The server is shared: this session's crossings are those of a pipeline not seen yet.
    seen = {e["pipeline"] for e in server.events(kind="line_crossing")}

    # --- an inference-sdk program, as its users write it ---
    client = InferenceHTTPClient(api_url=server.url, api_key=None)
    config = StreamConfig(
        data_output=["count_in", "count_out", "predictions", "timed"],
        workflow_parameters={"line": LINE},
    )
    session = client.webrtc.stream(
        source=VideoFileSource(str(clip)), workflow=counting_and_timing(), config=config
    )
    results = []

    @session.on_data()
    def on_data(data, metadata):
        results.append(data)

    session.run()
    # ---

    assert len(results) == len(path)
    last = results[-1]
    assert sorted([last["count_in"], last["count_out"]]) == [1, 1]
    ids = {p["tracker_id"] for r in results for p in r["predictions"]["predictions"]}
    assert len(ids) == 1, ids
    timed = [p["time_in_zone"] for r in results for p in r["timed"]["predictions"]]
    assert abs(max(timed) - truth) <= 0.1 * truth, (max(timed), truth)
    # A session's events are stored too, under the session's own name.

    def session_crossings() -> list[dict] | None:
        found = [e for e in server.events(kind="line_crossing") if e["pipeline"] not in seen]
        return found if len(found) >= 2 else None

    stored = wait_for(session_crossings, 30, "the session's crossings stored")
    assert sorted(e["direction"] for e in stored) == ["in", "out"]
    assert len({e["pipeline"] for e in stored}) == 1
    assert stored[0]["pipeline"].startswith("session:") and stored[0]["source"] == "webrtc"
    exits = server.events(pipeline=stored[0]["pipeline"], kind="zone_exit")
    assert [e["step"] for e in exits] == ["timer"]


@pytest.fixture(scope="module")
def events_dir(tmp_path_factory) -> Path:
    """The server's sink directory: where event sinks write."""
    return tmp_path_factory.mktemp("sinks")


@pytest.fixture(scope="module")
def file_server(events_dir):
    """A server whose pipelines may read local files (the generated clips)."""
    with running_server(allow_local_sources="true", sink_dir=str(events_dir)) as server:
        yield server


@pytest.fixture(scope="module")
def there_and_back(person, tmp_path_factory) -> Path:
    """The person walks across the line at x=320 and back: one crossing each way."""
    return there_and_back_clip(person, tmp_path_factory.mktemp("clips") / "walk.mp4")


def run_through(server: ServerProcess, clip: Path, spec: dict) -> str:
    """A pipeline of ``spec`` over ``clip``, once every frame is processed; its id."""
    started = server.start_pipeline(str(clip), spec)
    assert started.status_code == 200, started.text
    pipeline_id = started.json()["context"]["pipeline_id"]

    def ended() -> bool:
        report = server.get(f"/inference_pipelines/{pipeline_id}/status").json()["report"]
        return report["sources_metadata"][0]["state"] == "ENDED"

    wait_for(ended, 120, "the clip processed")
    return pipeline_id


def test_a_counting_pipeline_posts_one_webhook_per_crossing(file_server, there_and_back):
    receiver = WebhookReceiver()
    receiver.answer()
    try:
        pipeline_id = run_through(file_server, there_and_back, crossing_events(receiver.url))
        receiver.wait_bodies(2)
        file_server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    finally:
        receiver.down()
    assert len(receiver.bodies) == 2, receiver.bodies
    assert receiver.bodies[-1]["count_in"] + receiver.bodies[-1]["count_out"] == 2


def test_a_counting_pipeline_keeps_its_counts_retained_on_mqtt(
    file_server, there_and_back, tmp_path
):
    with mosquitto(tmp_path) as broker:
        spec = people_counting()
        spec["steps"].append({
            "type": "visionstream/mqtt_sink@v1", "name": "counts", "url": broker,
            "payload": {"in": "$steps.counter.count_in", "out": "$steps.counter.count_out"},
        })  # fmt: skip
        pipeline_id = run_through(file_server, there_and_back, spec)
        # A dashboard that subscribes now still gets the counts: they are retained.
        late = Subscriber(broker, "visionstream/#")
        try:
            prefix = f"visionstream/{pipeline_id}/0/counts"
            values = late.wait_for(lambda v: f"{prefix}/in" in v and f"{prefix}/out" in v)
        finally:
            late.close()
        assert sorted([values[f"{prefix}/in"], values[f"{prefix}/out"]]) == ["1", "1"]
        file_server.post(f"/inference_pipelines/{pipeline_id}/terminate")


def test_time_in_a_file_pipelines_zone_follows_the_files_clock(file_server, person, tmp_path):
    # Into the zone's middle and 2 s (60 frames) there: processed at whatever speed, the
    # time in zone is the file's.
    frames = [walker_scene(person, 320)] * 60
    clip = write_clip(tmp_path / "stay.mp4", frames, fps=FPS)
    zone = [[200, 0], [440, 0], [440, 480], [200, 480]]
    spec = zone_occupancy()
    spec["inputs"] = [
        {**i, "default_value": zone} if i.get("name") == "zone" else i for i in spec["inputs"]
    ]
    pipeline_id = run_through(file_server, clip, spec)
    seconds = []
    path = f"{file_server.url}/inference_pipelines/{pipeline_id}/consume"
    while (body := httpx.request("GET", path, json={}, timeout=30).json())["outputs"]:
        seconds += [p["time_in_zone"] for p in body["outputs"][0]["predictions"]["predictions"]]
    file_server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    truth = 58 / FPS  # from its first confirmed frame (the tracker's second) to its last
    assert abs(max(seconds) - truth) <= 0.1 * truth, (max(seconds), truth)


def test_a_camera_pipeline_logs_each_crossing_with_evidence_through_a_reconnect(
    file_server, events_dir, person
):
    receiver = WebhookReceiver()
    receiver.answer()
    spec = crossing_events(receiver.url)
    gate = next(s for s in spec["steps"] if s["name"] == "crossing")
    gate["next_steps"].append("$steps.log")
    spec["steps"].append({
        "type": "visionstream/event_sink@v1", "name": "log", "file": "{pipeline}-crossings",
        "image": "$steps.line_drawing.image", "clip_seconds_before": 1, "clip_seconds_after": 1,
        "payload": {"count_in": "$steps.counter.count_in",
                    "count_out": "$steps.counter.count_out"},
    })  # fmt: skip
    with RTSPCamera(640, 480, fps=30, path="hall", picture=walking_back_and_forth(person)) as cam:
        started = file_server.start_pipeline(cam.url, spec)
        assert started.status_code == 200, started.text
        pipeline_id = started.json()["context"]["pipeline_id"]
        try:
            receiver.wait_bodies(2, timeout=120)  # there and back
            cam.kill()
            cam.start()  # the same walk goes on; the pipeline reconnects on its own
            receiver.wait_bodies(4, timeout=120)
            reconnects = status_of(file_server, pipeline_id)["stats"]["reconnects"]
        finally:
            file_server.post(f"/inference_pipelines/{pipeline_id}/terminate")
            receiver.down()
    assert reconnects >= 1
    # One event per crossing, and the count went on through the reconnect (the tracker
    # started afresh, the counter did not).
    totals = [b["count_in"] + b["count_out"] for b in receiver.bodies]
    assert totals == list(range(1, len(totals) + 1)), totals
    log = events_dir / f"{pipeline_id}-crossings.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    logged = [r["payload"]["count_in"] + r["payload"]["count_out"] for r in lines]
    assert logged[: len(totals)] == totals
    for record in lines:  # the pipeline's end wrote every clip, cut short or not
        assert (events_dir / record["snapshot"]).stat().st_size > 0
        with av.open(str(events_dir / record["clip"])) as clip:
            assert sum(1 for _ in clip.decode(video=0)) > 0
    # The event store has each crossing, each sink event, and the camera lost and back.
    stored = file_server.events(pipeline=pipeline_id)
    kinds = [e["kind"] for e in stored]
    assert kinds.count("event_sink") == len(lines)
    assert kinds.count("line_crossing") == len(lines)  # one person: one crossing a frame
    changes = [
        (e["payload"]["previous_state"], e["payload"]["new_state"])
        for e in stored
        if e["kind"] == "source_state"
    ]
    lost = changes.index(("RUNNING", "RESTARTING"))  # the reference's names
    assert ("RESTARTING", "RUNNING") in changes[lost:], changes
    assert "source_error" in kinds


def status_of(server: ServerProcess, pipeline_id: str) -> dict:
    report = server.get(f"/inference_pipelines/{pipeline_id}/status").json()["report"]
    return report["sources_metadata"][0]


def walk_and_stand(person, step: int = 8, stand: int = 60):
    """The camera's picture at each frame: the person walks across the line into the zone,
    stands there ``stand`` frames, walks back and stands as long at the start."""
    half = person.shape[1] // 2 + 1
    there = list(range(half, 640 - half, step))
    path = there + [there[-1]] * stand + there[::-1] + [there[0]] * stand
    return lambda index: walker_scene(person, path[index % len(path)])


def test_motion_gating_loses_no_crossing_and_no_time_in_zone_on_a_camera(file_server, person):
    """Two pipelines on one camera (one reader: the same frames, sampled alike), the model
    gated by motion in one and on every frame in the other: the same crossings, the same
    zone entry, the same time in the zone, while the gated one's model rested."""
    picture = walk_and_stand(person)
    with RTSPCamera(640, 480, fps=15, path="yard", picture=picture) as cam:
        ids = {}
        for name, gating in (("gated", {}), ("every", {"enabled": False})):
            started = file_server.start_pipeline(
                cam.url, counting_and_timing(), motion_gating=gating,
                video_configuration={"type": "VideoConfiguration",
                                     "video_reference": cam.url, "max_fps": 5},
            )  # fmt: skip
            assert started.status_code == 200, started.text
            ids[name] = started.json()["context"]["pipeline_id"]
        try:

            def exited(pipeline_id: str) -> list[dict]:
                return file_server.events(pipeline=pipeline_id, kind="zone_exit")

            wait_for(lambda: all(exited(i) for i in ids.values()), 180, "a zone exit in each")
            motion = status_of(file_server, ids["gated"])["motion"]
            every = status_of(file_server, ids["every"])["motion"]
        finally:
            for pipeline_id in ids.values():
                file_server.post(f"/inference_pipelines/{pipeline_id}/terminate")

    def first_cycle(pipeline_id: str) -> dict:
        stored = file_server.events(pipeline=pipeline_id)
        exit_at = next(i for i, e in enumerate(stored) if e["kind"] == "zone_exit")
        before = stored[: exit_at + 1]
        return {
            "crossings": [e["direction"] for e in before if e["kind"] == "line_crossing"],
            "entries": sum(e["kind"] == "zone_entry" for e in before),
            "time_in_zone": stored[exit_at]["payload"]["time_in_zone"],
        }

    gated, ungated = first_cycle(ids["gated"]), first_cycle(ids["every"])
    # Across the line into the zone (one crossing), then out of the zone (its exit).
    assert len(gated["crossings"]) == 1 and gated["crossings"] == ungated["crossings"]
    assert gated["entries"] == ungated["entries"] == 1
    # The same frames, sampled alike: the same time in the zone, to a sampled frame.
    assert abs(gated["time_in_zone"] - ungated["time_in_zone"]) <= 0.25, (gated, ungated)
    assert gated["time_in_zone"] >= 3.5  # the 4 s stand, counted while the model rested
    assert motion is not None and motion["frames_gated"] > 0
    assert every is None  # gating off: no gate, the model on every frame
