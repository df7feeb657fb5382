"""Recordings end to end: the real server runs a pipeline on the RTSP test camera with
``sink_configuration.record``; the camera is killed and restarted mid-recording. The
segments play, the gap is listed, a range across segments exports as one MP4 that plays
from start to end, and a crossing's clip comes from the recording around it."""

from __future__ import annotations

import io

import av
import cv2
import httpx
import pytest

from tests.conftest import DETECT_SPEC
from tests.e2e.test_events import counting_with_evidence
from tests.support.camera import RTSPCamera
from tests.support.media import on_disk_seconds, walking_back_and_forth
from tests.support.server import ServerProcess, running_server, wait_for

pytestmark = pytest.mark.e2e

START_S = 120
GOP_S = 1.0  # the test camera: a keyframe each second


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(sink_dir=str(tmp_path_factory.mktemp("sinks"))) as server:
        yield server


def recorded(server: ServerProcess, pipeline_id: str) -> dict | None:
    listing = server.get("/recordings").json()["recordings"]
    return next((r for r in listing if r["pipeline"] == pipeline_id), None)


def index(server: ServerProcess, pipeline_id: str) -> dict:
    response = server.get(f"/recordings/{pipeline_id}/0/index")
    assert response.status_code == 200, response.text
    return response.json()


def decoded(data: bytes, tmp_path) -> tuple[int, float]:
    """Frames and duration (first to last frame, plus one) of an MP4."""
    path = tmp_path / "export.mp4"
    path.write_bytes(data)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stamps = [frame.pts for frame in container.decode(video=0)]
    return len(stamps), float((max(stamps) - min(stamps)) * stream.time_base)


def test_a_recorded_camera_killed_mid_recording_gives_a_gap_and_exports_that_play(server, tmp_path):
    # Two sources on the same camera, only the first recorded.
    record = {"mode": "continuous", "segment_seconds": 2, "source_ids": [0]}
    with RTSPCamera(320, 240, fps=30, path="rec") as camera:
        started = server.start_pipeline(
            [camera.url, camera.url], DETECT_SPEC, sink_configuration={"record": record}
        )
        assert started.status_code == 200, started.text
        pipeline_id = started.json()["context"]["pipeline_id"]
        try:
            wait_for(lambda: len(index(server, pipeline_id)["segments"]) >= 2, START_S,
                     "two segments recorded")  # fmt: skip
            camera.kill()
            before = len(index(server, pipeline_id)["segments"])
            camera.start()  # the pipeline reconnects on its own; the recording goes on
            wait_for(lambda: index(server, pipeline_id)["gaps"], START_S, "a gap listed")
            wait_for(lambda: len(index(server, pipeline_id)["segments"]) >= before + 2,
                     START_S, "two segments after the gap")  # fmt: skip
        finally:
            server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    listing = index(server, pipeline_id)
    segments, (gap, *_) = listing["segments"], listing["gaps"]
    assert recorded(server, pipeline_id)["segments"] == len(segments)
    assert server.get(f"/recordings/{pipeline_id}/1/index").status_code == 404
    for segment in segments:  # every one finished and playable, the last one too (SIGTERM)
        one = server.get(f"/recordings/{pipeline_id}/0?start={segment['start']}"
                         f"&end={segment['end']}")  # fmt: skip
        assert one.status_code == 200 and one.headers["content-type"] == "video/mp4"
        assert decoded(one.content, tmp_path)[0] > 0
    # Before the gap, a range across segments: one file, from its first keyframe to its end.
    first, second = segments[0], segments[1]
    start, end = first["start"] + 0.5, second["end"]
    assert second["end"] <= gap["start"]
    whole = httpx.get(f"{server.url}/recordings/{pipeline_id}/0",
                      params={"start": start, "end": end}, timeout=60)  # fmt: skip
    assert whole.status_code == 200, whole.text
    _, seconds = decoded(whole.content, tmp_path)
    assert abs(seconds - (end - start)) <= GOP_S + 0.1, (seconds, end - start)
    assert float(whole.headers["x-recording-start"]) <= start
    # Range requests, so a browser seeks.
    part = httpx.get(f"{server.url}/recordings/{pipeline_id}/0", headers={"Range": "bytes=0-9"},
                     params={"start": start, "end": end})  # fmt: skip
    assert part.status_code == 206 and part.content == whole.content[:10]


def test_a_crossings_clip_comes_from_the_recording_around_it(server, person):
    spec = counting_with_evidence()
    spec["steps"] = [s for s in spec["steps"] if s["name"] not in ("crossing", "log")]
    record = {"mode": "events", "pre_seconds": 2, "post_seconds": 2}
    picture = walking_back_and_forth(person)
    with RTSPCamera(640, 480, fps=30, path="door", picture=picture) as camera:
        started = server.start_pipeline(camera.url, spec, sink_configuration={"record": record})
        assert started.status_code == 200, started.text
        pipeline_id = started.json()["context"]["pipeline_id"]
        try:
            crossings = wait_for(
                lambda: server.events(pipeline=pipeline_id, kind="line_crossing"),
                START_S, "a crossing stored",
            )  # fmt: skip
        finally:  # the post-roll ends with the pipeline: its segment is finished
            server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    event = crossings[0]
    assert event["clip_url"] == f"/events/{event['id']}/clip" and event["snapshot_url"] is None
    clip = server.get(event["clip_url"])
    assert clip.status_code == 200, clip.text
    at = event["timestamp"]
    assert float(clip.headers["x-recording-start"]) <= at <= float(clip.headers["x-recording-end"])
    listing = index(server, pipeline_id)
    assert any(e["id"] == event["id"] for e in listing["events"])


@pytest.mark.parametrize(
    ("path", "status", "words"),
    [
        ("/recordings/nope/0/index", 404, "no recording"),
        ("/recordings/.hidden/0/index", 404, "no recording"),
        ("/recordings/p/0?start=10&end=5", 404, "no recording"),
        ("/recordings/p/0", 422, ""),
    ],
)
def test_bad_recording_requests_say_what_is_wrong(server, path, status, words):
    response = server.get(path)
    assert response.status_code == status, response.text
    assert words in response.json().get("message", "")


def test_a_recording_is_finished_by_sigterm_and_recovered_after_a_kill(tmp_path):
    sinks = tmp_path / "sinks"
    settings = {"sink_dir": str(sinks), "data_dir": str(tmp_path / "data")}
    record = {"segment_seconds": 600}  # one long segment, open when the server stops

    def open_segment(pipeline_id: str) -> bool:
        """A hidden segment with fragments in it (a keyframe a second, each a fragment)."""
        hidden = list((sinks / "recordings" / pipeline_id / "0").glob(".*.partial.mp4"))
        return bool(hidden) and hidden[0].stat().st_size > 20_000

    with RTSPCamera(320, 240, fps=30, path="kept") as camera:
        with running_server(**settings) as first:
            started = first.start_pipeline(camera.url, DETECT_SPEC,
                                           sink_configuration={"record": record})  # fmt: skip
            assert started.status_code == 200, started.text
            pipeline_id = started.json()["context"]["pipeline_id"]
            wait_for(lambda: open_segment(pipeline_id), START_S, "a segment being written")
        # SIGTERM: the pipeline stopped with the server, its segment finished.
        directory = sinks / "recordings" / pipeline_id / "0"
        assert not list(directory.glob(".*")) and len(list(directory.glob("*.mp4"))) == 1
        with running_server(**settings) as second:  # the pipeline is restored, and records
            wait_for(lambda: open_segment(pipeline_id), START_S, "recording again")
            (partial,) = directory.glob(".*.partial.mp4")
            # Fragments are written through as they are made: 2 s are on disk soon.
            wait_for(lambda: on_disk_seconds(partial) >= 2.0, 60, "2 s of it on disk")
            second.process.kill()  # no goodbye: the open segment stays hidden
            second.process.wait(30)
        assert len(list(directory.glob(".*.partial.mp4"))) == 1
        with running_server(**settings) as third:
            # The next recorder on the directory salvages it before anything else.
            wait_for(lambda: len(index(third, pipeline_id)["segments"]) >= 2, START_S,
                     "the killed run's segment recovered")  # fmt: skip
            third.wait_for_output("of a segment a stop left open")
            killed = index(third, pipeline_id)["segments"][1]
            assert killed["end"] - killed["start"] >= 1.9, killed
            third.post(f"/inference_pipelines/{pipeline_id}/terminate")
            for segment in index(third, pipeline_id)["segments"]:
                one = third.get(f"/recordings/{pipeline_id}/0?start={segment['start']}"
                                f"&end={segment['end']}")  # fmt: skip
                assert one.status_code == 200 and decoded(one.content, tmp_path)[0] > 0


def test_a_camera_with_a_sub_stream_detects_on_it_and_records_the_main_one(server, person):
    """The main stream (960x720) is read for its packets only and recorded; the sub-stream
    (640x480, the same scene) is decoded and detected on; the detections come back in the
    main stream's pixels."""
    scene = walking_back_and_forth(person)

    def main_picture(index: int):
        return cv2.resize(scene(index), (960, 720), interpolation=cv2.INTER_AREA)

    record = {"mode": "continuous", "segment_seconds": 2}
    with (
        RTSPCamera(960, 720, fps=15, path="main", picture=main_picture) as main,
        RTSPCamera(640, 480, fps=15, path="sub", picture=scene) as sub,
    ):
        started = server.start_pipeline(
            main.url, DETECT_SPEC, sink_configuration={"record": record},
            video_configuration={"type": "VideoConfiguration", "video_reference": main.url,
                                 "max_fps": 5, "sub_streams": {main.url: sub.url}},
        )  # fmt: skip
        assert started.status_code == 200, started.text
        pipeline_id = started.json()["context"]["pipeline_id"]
        try:

            def scaled_person() -> dict | None:
                body = server.fresh_result(pipeline_id)
                if body is None:
                    return None
                found = body["outputs"][0]["predictions"]
                if found["image"]["width"] != 960:  # the main stream not connected yet
                    return None
                people = [p for p in found["predictions"] if p["class"] == "person"]
                return {"image": found["image"], "person": people[0]} if people else None

            seen = wait_for(scaled_person, START_S, "a person in the main stream's pixels")
            wait_for(lambda: index(server, pipeline_id)["segments"], START_S, "a segment")
            report = server.get(f"/inference_pipelines/{pipeline_id}/status").json()["report"]
            readers = server.get("/healthz").json()["sources"]
        finally:
            server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    assert seen["image"] == {"width": 960, "height": 720}
    # The person as the sub-stream shows it, one and a half times as tall.
    assert abs(seen["person"]["height"] / (1.5 * person.shape[0]) - 1) < 0.2, seen
    (source,) = report["sources_metadata"]
    assert source["source_reference"] == main.url
    assert source["sub_stream"]["detect_reference"] == sub.url
    assert source["sub_stream"]["main_size"] == [960, 720]
    assert source["sub_stream"]["main_stats"]["frames"] > 0  # its packets, read
    assert source["stats"]["url"] == sub.url  # what is decoded
    decoded_by_url = {r["url"]: r["decoded"] for r in readers}
    assert decoded_by_url == {main.url: False, sub.url: True}
    segment = index(server, pipeline_id)["segments"][0]
    recorded_file = server.get(f"/recordings/{pipeline_id}/0?start={segment['start']}"
                               f"&end={segment['end']}")  # fmt: skip
    assert recorded_file.status_code == 200
    with av.open(io.BytesIO(recorded_file.content)) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.width, stream.codec_context.height) == (960, 720)


@pytest.mark.parametrize(
    ("sub_streams", "words"),
    [
        ({"rtsp://127.0.0.1:9/other": "rtsp://127.0.0.1:9/sub"}, "not in video_reference"),
        ({"rtsp://127.0.0.1:9/main": "./sub.mp4"}, "not a camera URL"),
    ],
)
def test_bad_sub_streams_say_what_is_wrong(server, sub_streams, words):
    video = {"type": "VideoConfiguration", "video_reference": "rtsp://127.0.0.1:9/main",
             "sub_streams": sub_streams}  # fmt: skip
    answer = server.start_pipeline(video["video_reference"], DETECT_SPEC, video_configuration=video)
    assert answer.status_code in (400, 403, 422), answer.text
    assert words in answer.text
