"""Pushes: a pipeline source's annotated picture pushed to servers we did not write (nginx's
RTMP module, GStreamer's RTSP server in RECORD mode, srt-live-transmit), played back from
there and checked for the drawn box, the size and the rate; a target killed and started
again is pushed to again within seconds."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import httpx
import numpy as np
import pytest

from tests.support import restreaming
from tests.support.players import ffmpeg_picture, ffprobe_frames, frame_rate, gst_play
from tests.support.restreaming import FPS, SETTINGS, SIZE, assert_box, watched_pipeline
from tests.support.server import (
    LoggedProcess,
    ServerProcess,
    free_port,
    free_udp_port,
    running_server,
    wait_for,
)
from tests.support.streams import SRT_LIVE_TRANSMIT, RTMPServer

pytestmark = pytest.mark.e2e

KEY = "push-s3cret-key"
RECORD_SERVER = Path(__file__).parents[1] / "support" / "rtsp_record_server.py"


def call(server: ServerProcess, method: str, path: str, **kwargs) -> httpx.Response:
    return restreaming.call(server, KEY, method, path, **kwargs)


IDENTITY = {
    "version": "1.0",
    "inputs": [{"type": "InferenceImage", "name": "image"}],
    "steps": [],
    "outputs": [{"type": "JsonField", "name": "shown", "selector": "$inputs.image"}],
}


@pytest.fixture(scope="module")
def push_server(tmp_path_factory) -> Iterator[ServerProcess]:
    """Its stored workflow ``local/identity`` (the frame as it came) is a WHIP target's."""
    workflows = tmp_path_factory.mktemp("workflows")
    (workflows / "identity.json").write_text(json.dumps(IDENTITY))
    with running_server(
        api_key=KEY, restream_push_max_backoff_s="1", workflows_dir=str(workflows), **SETTINGS
    ) as server:
        yield server


class RecordServer(LoggedProcess):
    """GStreamer's RTSP server taking a RECORD, its frames counted and the last one kept."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.url = f"rtsp://127.0.0.1:{self.port}/pushed"
        self.frame_file = directory / "frame.bgr"
        super().__init__(
            ["/usr/bin/python3", str(RECORD_SERVER), str(self.port), "pushed", str(self.frame_file)]
        )
        self.wait_for_output("READY", timeout=30)

    def frames(self) -> list[tuple[int, int, float]]:
        """Each frame so far: width, height, timestamp."""
        found = [line.split() for line in list(self.lines) if line.startswith("FRAME ")]
        return [(int(w), int(h), float(t)) for _, _, w, h, t in found]


@pytest.fixture(scope="module")
def targets(tmp_path_factory) -> Iterator[dict]:
    rtmp = RTMPServer(tmp_path_factory.mktemp("nginx"))
    record = RecordServer(tmp_path_factory.mktemp("record"))
    srt_port, udp_port = free_port(), free_udp_port()
    srt = LoggedProcess(
        [
            SRT_LIVE_TRANSMIT,
            "-a",
            "yes",
            f"srt://127.0.0.1:{srt_port}?mode=listener",
            f"udp://127.0.0.1:{udp_port}",
        ]
    )
    made = {
        "rtmp": rtmp,
        "record": record,
        "srt": f"srt://127.0.0.1:{srt_port}",
        "srt_out": f"udp://127.0.0.1:{udp_port}",
    }
    try:
        yield made
    finally:
        srt.stop()
        record.stop()
        made["rtmp"].close()  # the one a test started again, if it did


@pytest.fixture(scope="module")
def pushing(push_server, person, targets) -> Iterator[dict]:
    pushes = [
        {"url": targets["rtmp"].url("annotated")},
        {"url": targets["record"].url},
        {"url": targets["srt"]},
    ]
    with watched_pipeline(push_server, KEY, person, restream={"push": pushes}) as watching:
        yield watching


def pushes(server: ServerProcess, pipeline_id: str) -> list[dict]:
    listing = call(server, "GET", f"/inference_pipelines/{pipeline_id}/restream").json()
    return listing["sources"]["0"]["restream"]["pushes"]


def test_three_pushes_share_one_encoder_and_say_how_they_go(push_server, pushing):
    def all_pushing() -> list[dict] | None:
        states = pushes(push_server, pushing["pipeline_id"])
        return states if all(p["state"] == "pushing" for p in states) else None

    states = wait_for(all_pushing, 60, "every push pushing")
    assert [p["url"].split(":")[0] for p in states] == ["rtmp", "rtsp", "srt"]
    assert "annotated" not in states[0]["url"]  # an RTMP stream key is masked
    listing = call(push_server, "GET", f"/inference_pipelines/{pushing['pipeline_id']}/restream")
    assert listing.json()["sources"]["0"]["restream"]["encoders_started"] == 1


def test_rtmp_push_plays_back_from_nginx_with_the_box_at_the_size_and_rate(pushing, targets):
    url = targets["rtmp"].url("annotated")
    assert_box(ffmpeg_picture(url), pushing)
    frames = ffprobe_frames(url, 4)
    assert {(f["width"], f["height"]) for f in frames} == {SIZE}
    assert 0.6 * FPS <= frame_rate(frames) <= 1.15 * FPS
    played = gst_play(url, 3)  # playbin through rtmpsrc, flvdemux
    assert played.error is None and (played.width, played.height) == SIZE


def test_rtsp_record_push_arrives_decoded_with_the_box_at_the_size_and_rate(pushing, targets):
    record: RecordServer = targets["record"]
    frames = wait_for(lambda: len(f := record.frames()) >= 15 and f, 60, "15 recorded frames")
    assert {(w, h) for w, h, _ in frames} == {SIZE}
    recent = frames[-10:]
    assert 0.6 * FPS <= (len(recent) - 1) / (recent[-1][2] - recent[0][2]) <= 1.15 * FPS
    raw = np.frombuffer(record.frame_file.read_bytes(), np.uint8)
    assert_box(raw[: SIZE[0] * SIZE[1] * 3].reshape(SIZE[1], SIZE[0], 3), pushing)


def test_srt_push_arrives_at_an_srt_listener_with_the_box_at_the_size_and_rate(pushing, targets):
    url = targets["srt_out"]
    # Joined mid-stream over UDP: pictures before the next keyframe are FFmpeg's guesses.
    assert_box(ffmpeg_picture(url, skip=3 * FPS), pushing)
    frames = ffprobe_frames(url, 4)
    assert {(f["width"], f["height"]) for f in frames} == {SIZE}
    assert 0.6 * FPS <= frame_rate(frames) <= 1.15 * FPS


def test_a_killed_target_is_pushed_to_again_within_seconds_of_its_return(
    push_server, pushing, targets, tmp_path
):
    rtmp: RTMPServer = targets["rtmp"]
    port = rtmp.port
    rtmp.close()  # nginx killed: the push notices and waits

    def rtmp_push() -> dict:
        return pushes(push_server, pushing["pipeline_id"])[0]

    wait_for(lambda: rtmp_push()["state"] != "pushing", 60, "the RTMP push noticing")
    before = rtmp_push()["connections"]
    targets["rtmp"] = RTMPServer(tmp_path, port)  # back, on the same port
    back = time.monotonic()
    wait_for(
        lambda: (p := rtmp_push())["state"] == "pushing" and p["connections"] > before,
        60,
        "the RTMP push reconnected",
    )
    assert time.monotonic() - back < 10  # backoff capped at 1 s, plus connecting
    assert_box(ffmpeg_picture(targets["rtmp"].url("annotated")), pushing)


def test_a_whip_push_publishes_to_a_whip_server_without_encoding_again(push_server, person):
    """The WHIP server is this server's own ingest (aiortc receiving, a pipeline on what it
    receives): the box pushed arrives in the picture that pipeline sees."""
    before = set(call(push_server, "GET", "/inference_pipelines/list").json()["pipelines"])
    whip = {"url": f"{push_server.url}/whip/workflows/local/identity", "token": KEY}
    with watched_pipeline(push_server, KEY, person, restream={"push": [whip]}) as watching:
        pipeline_id = watching["pipeline_id"]
        pushing = wait_for(
            lambda: (p := pushes(push_server, pipeline_id)[0])["state"] == "pushing" and p,
            60,
            "the WHIP push connected",
        )
        assert KEY not in json.dumps(pushing)
        listed = call(push_server, "GET", "/inference_pipelines/list").json()["pipelines"]
        (received,) = set(listed) - before - {pipeline_id}
        snapshot = wait_for(
            lambda: (
                (
                    answer := call(push_server, "GET", f"/restream/{received}/0/snapshot.jpg")
                ).status_code
                == 200
                and answer
            ),
            60,
            "a picture of the WHIP publication",
        )
        picture = cv2.imdecode(np.frombuffer(snapshot.content, np.uint8), cv2.IMREAD_COLOR)
        assert_box(picture, watching)
        encoded = call(push_server, "GET", f"/inference_pipelines/{pipeline_id}/restream")
        assert encoded.json()["sources"]["0"]["restream"]["encoders_started"] == 1
    # The publication ends with the push (its resource deleted): so does its pipeline.
    wait_for(
        lambda: (
            received
            not in call(push_server, "GET", "/inference_pipelines/list").json()["pipelines"]
        ),
        60,
        "the WHIP publication's pipeline ended",
    )


def test_a_push_to_a_refused_address_or_scheme_is_a_400(push_server):
    reference = {"type": "VideoConfiguration", "video_reference": "rtsp://127.0.0.1:1/x"}
    processing = {"type": "WorkflowConfiguration", "workflow_id": "object-detection"}
    for push, words in (
        ({"url": "ftp://127.0.0.1/x"}, "a push goes to rtmp://"),
        ({"url": "rtmp://127.0.0.1/live/k", "source_id": 3}, "source_id"),
    ):
        answer = call(
            push_server,
            "POST",
            "/inference_pipelines/initialise",
            json={
                "video_configuration": reference,
                "processing_configuration": processing,
                "restream": {"push": [push]},
            },
        )
        assert answer.status_code in (400, 422), answer.text
        assert words in answer.text


def test_a_push_ends_with_its_pipeline(push_server, person, targets):
    with watched_pipeline(
        push_server, KEY, person, restream={"push": [{"url": targets["rtmp"].url("ending")}]}
    ) as watching:
        pipeline_id = watching["pipeline_id"]
        wait_for(lambda: pushes(push_server, pipeline_id)[0]["state"] == "pushing", 60, "push")
    stopped = subprocess.run(
        ["ffprobe", "-v", "error", "-rw_timeout", "5000000", targets["rtmp"].url("ending")],
        capture_output=True,
        timeout=60,
    )
    assert stopped.returncode != 0  # nginx has no publisher of it any more
