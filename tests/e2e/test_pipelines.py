"""Headless monitoring pipelines on real RTSP cameras, through the published client and raw HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import av
import httpx
import pytest
from inference_sdk import InferenceHTTPClient
from prometheus_client.parser import text_string_to_metric_families

from sources import decode_stamp
from streaming.client import Client, PipelineSource, RTSPSource, StreamConfig
from streaming.inference.default_model import DEFAULT_MODEL_ID
from streaming.protocol.notices import NoticeCode
from streaming.protocol.workflows import people_counting
from tests.conftest import DETECT_SPEC
from tests.support.camera import RTSPCamera
from tests.support.server import ServerProcess, wait_for
from tests.support.webhook import WebhookReceiver
from tests.support.workflows import check_sliced, sliced_detection

pytestmark = pytest.mark.e2e

READ_TIMEOUT = 1.5
CONFIG = StreamConfig(stream_output=["annotated"], data_output=["predictions"])


@pytest.fixture(scope="module")
def sink_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sinks")


@pytest.fixture(scope="module")
def server(sink_dir):
    process = ServerProcess(sink_dir=str(sink_dir), rtsp_read_timeout=str(READ_TIMEOUT))
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def start(server: ServerProcess, reference, **extra) -> str:
    response = server.start_pipeline(reference, DETECT_SPEC, **extra)
    assert response.status_code == 200, response.text
    return response.json()["context"]["pipeline_id"]


def consume(server: ServerProcess, pipeline_id: str, wait: float = 10, **extra) -> dict:
    """Our long poll: waits up to ``wait`` s for a result instead of polling."""
    response = httpx.request(
        "GET",
        f"{server.url}/inference_pipelines/{pipeline_id}/consume",
        json={"wait_seconds": wait, **extra},
        timeout=wait + 10,
    )
    assert response.status_code == 200, response.text
    return response.json()


def status(server: ServerProcess, pipeline_id: str) -> dict:
    response = server.get(f"/inference_pipelines/{pipeline_id}/status")
    assert response.status_code == 200, response.text
    return response.json()["report"]


def terminate(server: ServerProcess, pipeline_id: str) -> None:
    assert server.post(f"/inference_pipelines/{pipeline_id}/terminate").status_code == 200


def test_published_client_pipeline_methods_end_to_end(server, camera):
    client = InferenceHTTPClient(api_url=server.url, api_key=None)
    mark = len(server.lines)
    started = client.start_inference_pipeline_with_workflow(
        video_reference=camera.url, workflow_specification=DETECT_SPEC
    )
    pipeline_id = started["context"]["pipeline_id"]
    assert started["status"] == "success"
    assert pipeline_id in client.list_inference_pipelines()["pipelines"]
    server.wait_for_output(f"pipeline {pipeline_id[:8]} source 0: processing", mark)

    result = client.consume_inference_pipeline_result(pipeline_id, excluded_fields=["annotated"])
    (outputs,) = result["outputs"]
    (metadata,) = result["frames_metadata"]
    assert set(outputs) == {"predictions"} and metadata["source_id"] == 0
    assert metadata["frame_id"] >= 1 and "frame_timestamp" in metadata
    whole = consume(server, pipeline_id)["outputs"][0]
    assert whole["annotated"]["type"] == "base64" and "predictions" in whole

    report = client.get_inference_pipeline_status(pipeline_id)["report"]
    (source,) = report["sources_metadata"]
    assert source["state"] == "RUNNING" and source["source_reference"] == camera.url
    assert source["buffer_filling_strategy"] == "DROP_OLDEST"
    assert source["buffer_consumption_strategy"] == "EAGER"
    assert source["stats"]["state"] == "streaming" and source["frames_processed"] >= 2
    assert report["latency_reports"][0]["e2e_latency"] is not None

    assert client.pause_inference_pipeline(pipeline_id)["status"] == "success"
    assert status(server, pipeline_id)["sources_metadata"][0]["state"] == "PAUSED"
    mark = len(server.lines)
    assert client.resume_inference_pipeline(pipeline_id)["status"] == "success"
    server.wait_for_output(f"pipeline {pipeline_id[:8]} source 0: processing", mark)

    assert client.terminate_inference_pipeline(pipeline_id)["status"] == "success"
    assert pipeline_id not in client.list_inference_pipelines()["pipelines"]
    assert server.get("/healthz").json()["sources"] == []


def test_a_killed_camera_reconnects_and_frames_flow_within_2s_of_its_restart(server, camera):
    mark = len(server.lines)
    pipeline_id = start(server, camera.url)
    tag = f"pipeline {pipeline_id[:8]} source 0"
    try:
        server.wait_for_output(f"{tag}: processing", mark)
        mark = len(server.lines)
        camera.kill()
        # "the camera ended the stream", or a packet cut short: either way a lost connection.
        server.wait_for_output(f"{tag}: RESTARTING (lost {camera.url}: ", mark)
        mark = len(server.lines)
        camera.start()
        # Processing again after the restart. How soon is measured by `benchmarks cameras`
        # (restart -> processed); here a loaded machine only gets a hang bound.
        server.wait_for_output(f"{tag}: processing", mark, timeout=30)
        stats = status(server, pipeline_id)["sources_metadata"][0]["stats"]
        assert stats["disconnects"] >= 1 and stats["reconnects"] >= 1
        reconnects = series(server, pipeline_id, "visionstream_source_reconnects")
        assert reconnects["0"] >= 1
        events = [
            e["event_type"] for e in status(server, pipeline_id)["video_source_status_updates"]
        ]
        assert "SOURCE_ERROR" in events and "SOURCE_STATE_UPDATE" in events
        assert server.process.poll() is None
    finally:
        terminate(server, pipeline_id)


def test_a_paused_pipeline_stays_paused_while_its_camera_reconnects(server, camera):
    """The camera's reader thread reports its reconnection; the pipeline's state is the
    loop's: a paused source says PAUSED until resumed, and the reconnection is an event."""
    mark = len(server.lines)
    pipeline_id = start(server, camera.url)
    tag = f"pipeline {pipeline_id[:8]} source 0"
    try:
        server.wait_for_output(f"{tag}: processing", mark)
        assert server.post(f"/inference_pipelines/{pipeline_id}/pause").status_code == 200
        mark = len(server.lines)
        camera.kill()
        server.wait_for_output(f"{tag}: RESTARTING (lost {camera.url}: ", mark)
        assert status(server, pipeline_id)["sources_metadata"][0]["state"] == "PAUSED"
        mark = len(server.lines)
        camera.start()
        server.wait_for_output(f"{tag}: RUNNING", mark, timeout=30)  # the camera is back
        report = status(server, pipeline_id)
        assert report["paused"] and report["sources_metadata"][0]["state"] == "PAUSED"
        errors = [e for e in report["video_source_status_updates"]
                  if e["event_type"] == "SOURCE_ERROR"]  # fmt: skip
        assert errors, "the reconnection is told as an event"
        mark = len(server.lines)
        assert server.post(f"/inference_pipelines/{pipeline_id}/resume").status_code == 200
        server.wait_for_output(f"{tag}: processing", mark, timeout=30)
        assert status(server, pipeline_id)["sources_metadata"][0]["state"] == "RUNNING"
    finally:
        terminate(server, pipeline_id)


def test_a_frozen_camera_is_noticed_within_the_read_timeout(server, camera):
    mark = len(server.lines)
    pipeline_id = start(server, camera.url)
    tag = f"pipeline {pipeline_id[:8]} source 0"
    try:
        server.wait_for_output(f"{tag}: processing", mark)
        mark = len(server.lines)
        camera.freeze()
        # Noticed by the read timeout: the line says so (the bound is a hang detector).
        server.wait_for_output(f"no data for {READ_TIMEOUT:g} s", mark, timeout=30)
        camera.thaw()
        server.wait_for_output(f"{tag}: processing", mark, timeout=10)
    finally:
        camera.thaw()
        terminate(server, pipeline_id)


def test_two_viewers_and_a_pipeline_share_one_camera_connection(server, camera):
    connections = camera.clients
    pipeline_id = start(server, camera.url)
    client = Client(server.url)
    try:
        viewers = [
            client.webrtc.stream(RTSPSource(camera.url), workflow=DETECT_SPEC, config=CONFIG)
            for _ in range(2)
        ]
        # A third viewer watches the pipeline itself: its frames and results, no second run.
        watcher = client.webrtc.stream(PipelineSource(pipeline_id), config=CONFIG)
        with viewers[0], viewers[1], watcher:
            for session in (*viewers, watcher):
                frame, metadata = next(iter(session.video()))
                assert decode_stamp(frame) is not None and metadata.pts is not None
            (source,) = server.get("/healthz").json()["sources"]
            assert source["consumers"] == 3  # two viewers and the pipeline
        assert camera.clients == connections + 1
    finally:
        terminate(server, pipeline_id)


def test_a_viewer_ends_when_its_source_is_removed_or_its_pipeline_terminated(server, camera):
    second = RTSPCamera(320, 240, fps=30, path="ending")
    pipeline_id = start(server, [camera.url, second.url])
    client = Client(server.url)
    notices: dict[int, list[tuple[str, str]]] = {0: [], 1: []}
    try:
        viewers = [
            client.webrtc.stream(PipelineSource(pipeline_id, n), config=CONFIG) for n in (0, 1)
        ]
        for n, viewer in enumerate(viewers):
            viewer.on_error(
                lambda errors, metadata, n=n: notices[n].extend(
                    zip(metadata.error_codes, errors, strict=True)
                )
            )
        with viewers[0], viewers[1]:
            for viewer in viewers:
                next(iter(viewer.video()))
            removed = httpx.delete(f"{server.url}/inference_pipelines/{pipeline_id}/sources/0")
            assert removed.status_code == 200, removed.text
            # Told why, then the completion: not left waiting for frames that never come.
            viewers[0].wait(timeout=60)
            assert viewers[0].completed and viewers[0].termination_reason is None
            assert notices[0] == [
                (NoticeCode.SOURCE_ENDED, f"source 0 was removed from pipeline {pipeline_id}")
            ]
            assert not viewers[1].completed and notices[1] == []  # the other source goes on
            terminate(server, pipeline_id)
            viewers[1].wait(timeout=60)
            terminated = f"pipeline {pipeline_id} was terminated"
            assert notices[1] == [(NoticeCode.SOURCE_ENDED, terminated)]
        wait_for(lambda: server.get("/healthz").json()["sessions"] == 0, 30, "sessions closed")
    finally:
        second.close()
        server.post(f"/inference_pipelines/{pipeline_id}/terminate")


def test_two_cameras_in_one_pipeline_are_tagged_by_source(server, camera):
    second = RTSPCamera(320, 240, fps=30, path="second")
    try:
        pipeline_id = start(server, [camera.url, second.url])
        seen = set()
        while seen != {0, 1}:
            result = consume(server, pipeline_id)
            (index,) = [i for i, m in enumerate(result["frames_metadata"]) if m is not None]
            assert len(result["outputs"]) == 2 and result["outputs"][1 - index] is None
            assert result["frames_metadata"][index]["source_id"] == index
            seen.add(index)
        terminate(server, pipeline_id)
    finally:
        second.close()


def test_sinks_write_video_jsonl_and_survive_a_slow_then_dead_webhook(server, camera, sink_dir):
    receiver = WebhookReceiver()
    sinks = {
        "type": "MemorySinkConfiguration",
        "results_buffer_size": 8,
        "jsonl": {"name": "front-door"},
        "video_file": {"name": "front-door", "segment_seconds": 1.0},
        "webhook": {"url": receiver.url, "max_attempts": 2, "queue_size": 4},
    }
    mark = len(server.lines)
    pipeline_id = start(server, camera.url, sink_configuration=sinks)
    try:
        server.wait_for_output(f"pipeline {pipeline_id[:8]} source 0: processing", mark)
        receiver.wait_bodies(1)  # the endpoint now holds that request
        before = status(server, pipeline_id)["completion_statistics"]["sources"][0]
        # The pipeline keeps processing while the endpoint is stalled, then down.
        for _ in range(15):
            consume(server, pipeline_id)
        receiver.answer()
        receiver.wait_bodies(3)  # one sender: the third means the first two were answered
        assert {"frame_id", "source_id", "frame_timestamp", "outputs"} <= set(receiver.bodies[0])
        assert "annotated" not in receiver.bodies[0]["outputs"]  # images stay out of JSON sinks
        receiver.down()
        for _ in range(15):
            consume(server, pipeline_id)
        # Frames flow until the recording has rolled over to a second segment.
        for _ in range(300):
            if len(list(sink_dir.glob("front-door-source0-*.mp4"))) >= 2:
                break
            consume(server, pipeline_id)
        after = status(server, pipeline_id)
        assert after["completion_statistics"]["sources"][0]["completed_frames"] > (
            before["completed_frames"] + 20
        )
        hook = after["sinks"]["webhook"]
        assert hook["dropped"] > 0 and hook["delivered"] >= 2
        assert "errors" not in after["sinks"]["video_file"], after["sinks"]["video_file"]
        assert "errors" not in after["sinks"]["jsonl"], after["sinks"]["jsonl"]
    finally:
        terminate(server, pipeline_id)
        receiver.down()
    lines = [json.loads(line) for line in (sink_dir / "front-door.jsonl").read_text().splitlines()]
    ids = [line["frame_id"] for line in lines]
    assert ids and ids == sorted(set(ids))  # one line per processed frame
    assert all(line["source_id"] == 0 and "predictions" in line["outputs"] for line in lines)
    segments = sorted(sink_dir.glob("front-door-source0-*.mp4"))
    assert len(segments) >= 2  # rolled over every second
    with av.open(str(segments[0])) as container:
        frames = [f for f in container.decode(video=0)]
    assert frames and (frames[0].width, frames[0].height) == (320, 240)


@pytest.mark.parametrize(
    ("reference", "status_code", "message"),
    [
        ("/etc/passwd", 403, "is a local file on the server: refused"),
        (0, 403, "is a device on the server: refused"),
        ("video.mp4", 403, "is a local file on the server: refused"),
        ("camera1", 422, "video_reference must be a URL, a path to a file"),
        ("ftp://host/x", 422, "scheme 'ftp' is not supported"),
        ("rtp://127.0.0.1:5004", 400, "this server reads rtsp://, rtsps://, http://"),
    ],
)
def test_local_and_odd_references_are_refused(server, reference, status_code, message):
    response = server.start_pipeline(reference, DETECT_SPEC)
    assert response.status_code == status_code
    assert message in response.json()["message"]
    assert server.get("/inference_pipelines/list").json()["pipelines"] == []


def test_unknown_pipeline_ids_are_404(server):
    for method, path in [("GET", "status"), ("GET", "consume"), ("POST", "pause"),
                         ("POST", "resume"), ("POST", "terminate")]:  # fmt: skip
        response = httpx.request(method, f"{server.url}/inference_pipelines/nope/{path}")
        assert response.status_code == 404, path
        assert "Could not find InferencePipeline with id=nope" in response.json()["message"]


def test_pipelines_outlive_a_stopped_or_killed_server_until_terminated(camera, tmp_path):
    data = tmp_path / "data"
    records = data / "pipelines"

    def serve() -> ServerProcess:
        process = ServerProcess(
            data_dir=str(data), sink_dir=str(tmp_path), rtsp_read_timeout=str(READ_TIMEOUT)
        )
        process.wait_ready()
        return process

    def listed(process: ServerProcess) -> list[str]:
        return process.get("/inference_pipelines/list").json()["pipelines"]

    first = serve()
    try:
        kept, ended = start(first, camera.url), start(first, camera.url)
        terminate(first, ended)
    finally:
        first.stop()  # SIGTERM: the server drains, its pipelines stop, their requests stay
    # What a restarted server must not trip over: a corrupt record, and one it now refuses
    # (a camera on a link-local address, which the settings do not allow).
    (records / f"{'0' * 8}-0000-4000-8000-{'0' * 12}.json").write_text("{corrupt")
    refused = "11111111-1111-4111-8111-111111111111"
    request = json.loads((records / f"{kept}.json").read_text())
    request["video_configuration"]["video_reference"] = "rtsp://169.254.169.254/cam"
    (records / f"{refused}.json").write_text(json.dumps(request))

    second = serve()  # after a SIGTERM
    try:
        second.wait_for_output(f"pipeline {kept[:8]} restarted", timeout=60)
        assert listed(second) == [kept]
        assert consume(second, kept, wait=20)["outputs"], "no result after the restart"
        assert status(second, kept)["sources_metadata"][0]["state"] == "RUNNING"
        assert sorted(p.name for p in records.iterdir()) == [f"{kept}.json", "lock"]
    finally:
        second.process.kill()  # SIGKILL: nothing of ours runs on the way out
        second.process.wait()
        second.stop()

    last = serve()  # after a SIGKILL
    try:
        last.wait_for_output(f"pipeline {kept[:8]} restarted", timeout=60)
        assert consume(last, kept, wait=20)["outputs"], "no result after the restart"
        terminate(last, kept)  # for good: the next server starts with none
        assert listed(last) == [] and sorted(p.name for p in records.iterdir()) == ["lock"]
    finally:
        last.stop()


def series(server: ServerProcess, pipeline_id: str, family: str, key: str = "source") -> dict:
    """``family``'s samples for the pipeline, by the ``key`` label."""
    families = text_string_to_metric_families(server.get("/metrics").text)
    return {
        s.labels[key]: s.value
        for f in families
        if f.name == family
        for s in f.samples
        if s.labels["pipeline"] == pipeline_id
        and s.name == f.name + ("_total" if f.type == "counter" else "")
    }


def line_series(server: ServerProcess, pipeline_id: str) -> dict[str, float]:
    return series(server, pipeline_id, "visionstream_line_count", key="direction")


def test_a_counting_pipeline_exports_its_counts_until_terminated(server, camera):
    response = server.start_pipeline(camera.url, people_counting())
    assert response.status_code == 200, response.text
    pipeline_id = response.json()["context"]["pipeline_id"]
    (outputs,) = consume(server, pipeline_id)["outputs"]
    assert (outputs["count_in"], outputs["count_out"]) == (0, 0)  # nobody walks by here
    # Labelled by pipeline, source and step: one series per direction.
    assert line_series(server, pipeline_id) == {"in": 0.0, "out": 0.0}
    # And the source's own series: frames, frame rate, reconnects, drops.
    assert series(server, pipeline_id, "visionstream_source_frames")["0"] >= 1
    fps = "visionstream_source_fps"  # measured once a second frame is done
    wait_for(lambda: series(server, pipeline_id, fps)["0"] > 0, 30, "a frame rate")
    # Exported for the source; its value is the camera's doing: on a loaded machine the
    # first open may time out and count one reconnect, which this test did not make.
    assert set(series(server, pipeline_id, "visionstream_source_reconnects")) == {"0"}
    assert "0" in series(server, pipeline_id, "visionstream_source_frames_dropped")
    terminate(server, pipeline_id)
    assert line_series(server, pipeline_id) == {}
    assert series(server, pipeline_id, "visionstream_source_frames") == {}


def results_by_source(server: ServerProcess, pipeline_id: str, count: int) -> list[int]:
    """The source ids of the next ``count`` results (a result of a source removed meanwhile
    comes back empty, and is skipped), each checked to fill one slot per current source."""
    sources = len(status(server, pipeline_id)["sources_metadata"])
    ids: list[int] = []
    while len(ids) < count:
        result = consume(server, pipeline_id, excluded_fields=["annotated"])
        if not result["outputs"]:
            continue
        assert len(result["outputs"]) == len(result["frames_metadata"]) == sources
        (metadata,) = [m for m in result["frames_metadata"] if m is not None]
        ids.append(metadata["source_id"])
    return ids


def test_sources_are_added_to_and_removed_from_a_running_pipeline(server, camera):
    second = RTSPCamera(320, 240, fps=30, path="second")
    pipeline_id = start(server, camera.url)
    sources = f"/inference_pipelines/{pipeline_id}/sources"
    try:
        added = server.post(sources, json={"video_reference": second.url})
        assert added.status_code == 200, added.text
        assert added.json()["source_id"] == 1
        wait_for(lambda: set(results_by_source(server, pipeline_id, 4)) == {0, 1}, 60, "both")
        assert [s["source_id"] for s in status(server, pipeline_id)["sources_metadata"]] == [0, 1]
        assert set(series(server, pipeline_id, "visionstream_source_frames")) == {"0", "1"}

        removed = httpx.delete(f"{server.url}{sources}/0", timeout=30)
        assert removed.status_code == 200, removed.text
        report = status(server, pipeline_id)["sources_metadata"]
        assert [(s["source_id"], s["source_reference"]) for s in report] == [(1, second.url)]
        assert set(results_by_source(server, pipeline_id, 5)) == {1}  # the other goes on
        assert set(series(server, pipeline_id, "visionstream_source_frames")) == {"1"}

        # The next one gets a new id, never a removed one's.
        again = server.post(sources, json={"video_reference": camera.url})
        assert again.json()["source_id"] == 2

        gone = httpx.delete(f"{server.url}{sources}/0", timeout=30)
        assert (gone.status_code, gone.json()["code"]) == (404, "source_not_found")
        assert httpx.delete(f"{server.url}{sources}/2", timeout=30).status_code == 200
        last = httpx.delete(f"{server.url}{sources}/1", timeout=30)
        assert (last.status_code, last.json()["code"]) == (409, "last_source")
        assert "terminate the pipeline" in last.json()["message"]
        for reference, code, words in [
            ("/etc/passwd", 403, "local file on the server: refused"),
            (0, 403, "device on the server: refused"),
            ("rtsp://user:hunter2@", 422, "has no host"),
        ]:
            refused = server.post(sources, json={"video_reference": reference})
            assert refused.status_code == code, refused.text
            assert words in refused.json()["message"] and "hunter2" not in refused.text
        missing = server.post(
            "/inference_pipelines/nope/sources", json={"video_reference": camera.url}
        )
        assert (missing.status_code, missing.json()["code"]) == (404, "pipeline_not_found")
        assert [s["source_id"] for s in status(server, pipeline_id)["sources_metadata"]] == [1]
    finally:
        terminate(server, pipeline_id)
        second.close()


def test_a_two_stage_workflow_runs_per_tile_in_a_pipeline(server, camera):
    """Batch dimensions through the pipeline's run path: each frame's tiles, a result each."""
    response = server.start_pipeline(camera.url, sliced_detection(DEFAULT_MODEL_ID))
    assert response.status_code == 200, response.text
    pipeline_id = response.json()["context"]["pipeline_id"]
    try:
        (outputs,) = consume(server, pipeline_id, wait=30)["outputs"]
        check_sliced(outputs)
    finally:
        terminate(server, pipeline_id)
