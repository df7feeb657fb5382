"""WHIP ingest and WHEP playback against a WebRTC stack we did not write: GStreamer's
webrtcbin (libnice ICE, GStreamer's DTLS, RTP and codecs) publishes and plays, with VP8 and
with H.264, against the real server process."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import DETECT_SPEC
from tests.support.server import ServerProcess, running_server, wait_for
from tests.support.webrtcbin import WebrtcbinPeer

pytestmark = pytest.mark.e2e

KEY = "whip-s3cret-key"
WORKFLOW = "/whip/workflows/local/object-detection"


@pytest.fixture(scope="module")
def whip_server() -> Iterator[ServerProcess]:
    """API key set (the bearer token); a publisher silent for 2 s is gone."""
    with running_server(api_key=KEY, whip_idle_timeout_s="2", connect_timeout_s="10") as server:
        yield server


def call(server: ServerProcess, method: str, path: str, **kwargs) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEY}", **kwargs.pop("headers", {})}
    return httpx.request(method, server.url + path, headers=headers, timeout=60, **kwargs)


def pipelines(server: ServerProcess) -> list[str]:
    return call(server, "GET", "/inference_pipelines/list").json()["pipelines"]


def health(server: ServerProcess) -> dict:
    return call(server, "GET", "/healthz").json()


def settled(server: ServerProcess) -> dict:
    """Once no publisher, session or peer connection is left."""
    return wait_for(
        lambda: (
            (h := health(server))["publishers"] == 0
            and h["sessions"] == 0
            and h["peer_connections"] == 0
            and h
        ),
        60,
        "publishers, sessions and peers gone",
    )


@pytest.mark.parametrize("codec", ["vp8", "h264"])
def test_webrtcbin_publishes_a_workflow_over_whip_and_plays_it_annotated_over_whep(
    whip_server, codec
):
    before = set(pipelines(whip_server))
    publisher = WebrtcbinPeer("publish", whip_server.url + WORKFLOW, codec, KEY)
    player = None
    try:
        location = publisher.location()
        assert "/whip/resources/" in location
        publisher.wait_connected()
        (pipeline_id,) = set(pipelines(whip_server)) - before
        # The workflow runs on the published video: results with predictions.
        consumed = wait_for(
            lambda: call(
                whip_server, "GET", f"/inference_pipelines/{pipeline_id}/consume",
                json={"wait_seconds": 5},
            ).json().get("outputs", []),
            60,
            "a result of the published stream",
        )  # fmt: skip
        assert "predictions" in consumed[0]
        resource = location.rsplit("/", 1)[1]
        player = WebrtcbinPeer("play", f"{whip_server.url}/whep/resources/{resource}", codec, KEY)
        assert "/whep/sessions/" in player.location()
        player.wait_frames(20)  # decoded by GStreamer's own decoder
        assert player.end() == 200
        assert publisher.end() == 200
    finally:
        publisher.stop()
        if player is not None:
            player.stop()
    settled(whip_server)
    assert set(pipelines(whip_server)) == before  # the workflow's pipeline ended with it


def camera_pipeline(server: ServerProcess, camera) -> str:
    started = call(
        server, "POST", "/inference_pipelines/initialise",
        json={
            "video_configuration": {"type": "VideoConfiguration", "video_reference": camera.url},
            "processing_configuration": {
                "type": "WorkflowConfiguration", "workflow_specification": DETECT_SPEC,
            },
        },
    )  # fmt: skip
    assert started.status_code == 200, started.text
    return started.json()["context"]["pipeline_id"]


def test_a_publisher_joins_a_running_pipeline_and_whep_plays_that_source(whip_server, camera):
    pipeline_id = camera_pipeline(whip_server, camera)
    publisher = WebrtcbinPeer(
        "publish", f"{whip_server.url}/whip/pipelines/{pipeline_id}", "vp8", KEY
    )
    player = None
    try:
        publisher.location()
        publisher.wait_connected()
        status = call(whip_server, "GET", f"/inference_pipelines/{pipeline_id}/status").json()
        references = [s["source_reference"] for s in status["report"]["sources_metadata"]]
        assert references[0] == camera.url and references[1].startswith("whip://")
        url = f"{whip_server.url}/whep/pipelines/{pipeline_id}/1"
        player = WebrtcbinPeer("play", url, "vp8", KEY)
        player.wait_frames(10)
        assert publisher.end() == 200
        # Its source is removed and its player's session ended with it; the camera goes on.
        wait_for(
            lambda: len(
                call(whip_server, "GET", f"/inference_pipelines/{pipeline_id}/status")
                .json()["report"]["sources_metadata"]
            ) == 1,
            30,
            "the publisher's source removed",
        )  # fmt: skip
        settled(whip_server)
        assert player.end() == 404  # its session ended already
        assert pipeline_id in pipelines(whip_server)
    finally:
        publisher.stop()
        if player is not None:
            player.stop()
        call(whip_server, "POST", f"/inference_pipelines/{pipeline_id}/terminate")
    settled(whip_server)


def test_a_whep_player_of_a_camera_source_ends_with_its_pipeline(whip_server, camera):
    pipeline_id = camera_pipeline(whip_server, camera)
    player = WebrtcbinPeer("play", f"{whip_server.url}/whep/pipelines/{pipeline_id}/0", "vp8", KEY)
    try:
        player.wait_frames(5)
        ended = call(whip_server, "POST", f"/inference_pipelines/{pipeline_id}/terminate")
        assert ended.status_code == 200, ended.text
        settled(whip_server)  # the pipeline told its player's session, which closed
        assert player.end() == 404
    finally:
        player.stop()
        call(whip_server, "POST", f"/inference_pipelines/{pipeline_id}/terminate")


def test_a_publisher_that_vanishes_is_noticed_and_everything_of_it_released(whip_server):
    before = set(pipelines(whip_server))
    publisher = WebrtcbinPeer("publish", whip_server.url + WORKFLOW, "vp8", KEY)
    player = None
    try:
        resource = publisher.location().rsplit("/", 1)[1]
        publisher.wait_frames(10)
        wait_for(lambda: set(pipelines(whip_server)) - before, 30, "its pipeline")
        player = WebrtcbinPeer("play", f"{whip_server.url}/whep/resources/{resource}", "vp8", KEY)
        player.wait_frames(5)
        trickle = call(whip_server, "PATCH", f"/whip/resources/{resource}")
        assert trickle.status_code == 405 and trickle.headers["allow"] == "DELETE"
        publisher.vanish()  # no DELETE, no DTLS close: only the silence tells
        h = settled(whip_server)
        assert h["publishers"] == 0 and h["peer_connections"] == 0
        assert set(pipelines(whip_server)) == before
        gone = call(whip_server, "DELETE", f"/whip/resources/{resource}")
        assert gone.status_code == 404 and "ended" in gone.json()["message"]
    finally:
        publisher.stop()
        if player is not None:
            player.stop()
    assert any("ended: no video for 2 s" in line for line in whip_server.lines)


def test_bad_whip_and_whep_requests_get_precise_answers(whip_server):
    sdp_headers = {"Content-Type": "application/sdp"}
    no_key = httpx.post(
        whip_server.url + WORKFLOW, content=b"v=0\r\n", headers=sdp_headers, timeout=30
    )
    assert no_key.status_code == 401
    as_json = call(whip_server, "POST", WORKFLOW, json={"sdp": "v=0"})
    assert as_json.status_code == 415 and "application/sdp" in as_json.json()["message"]
    not_sdp = call(whip_server, "POST", WORKFLOW, content=b"hello", headers=sdp_headers)
    assert not_sdp.status_code == 400 and "not SDP" in not_sdp.json()["message"]
    audio_only = (
        "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
    )
    no_video = call(whip_server, "POST", WORKFLOW, content=audio_only, headers=sdp_headers)
    assert no_video.status_code == 400 and "no video section" in no_video.json()["message"]
    unknown = call(
        whip_server,
        "POST",
        "/whip/workflows/local/nope",
        content=b"v=0\r\nm=video 9 x 96\r\n",
        headers=sdp_headers,
    )
    assert unknown.status_code in (400, 404) and "nope" in unknown.json()["message"]
    no_pipeline = call(
        whip_server,
        "POST",
        "/whip/pipelines/nope",
        content=b"v=0\r\nm=video 9 x 96\r\n",
        headers=sdp_headers,
    )
    assert no_pipeline.status_code == 404
    for method, path in (("DELETE", "/whip/resources/nope"), ("DELETE", "/whep/sessions/nope")):
        response = call(whip_server, method, path)
        assert response.status_code == 404, (method, path, response.text)
        assert "never existed" in response.json()["message"]
    player = call(
        whip_server,
        "POST",
        "/whep/resources/nope",
        content=b"v=0\r\nm=video 9 x 96\r\n",
        headers=sdp_headers,
    )
    assert player.status_code == 404
    # "¹".isdigit() is true and int("¹") raises: a source id is ASCII digits or no source.
    for source_id in ("\u00b9", "x", "1" * 10):
        superscript = call(
            whip_server,
            "POST",
            f"/whep/pipelines/nope/{source_id}",
            content=b"v=0\r\nm=video 9 x 96\r\n",
            headers=sdp_headers,
        )
        assert superscript.status_code == 404, (source_id, superscript.text)
        removed = call(whip_server, "DELETE", f"/inference_pipelines/nope/sources/{source_id}")
        assert removed.status_code == 404, (source_id, removed.text)
    refused = WebrtcbinPeer("publish", whip_server.url + WORKFLOW, "vp8", "wrong-key")
    try:
        status, body = refused.refusal()
    finally:
        refused.stop()
    assert status == 401 and KEY not in body
    assert health(whip_server)["publishers"] == 0
