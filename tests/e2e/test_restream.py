"""Restreams: a pipeline source's annotated picture played by players we did not write
(FFmpeg, GStreamer's playbin, Chromium) over RTSP, HLS, MJPEG and a snapshot, each checked
for the drawn box at the detection's place, the restream's size and its rate; players coming
and going on one encoder; URLs that carry a token and nothing else."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator

import cv2
import httpx
import numpy as np
import pytest

from tests.support import restreaming
from tests.support.browser import chromium
from tests.support.camera import RTSPCamera
from tests.support.players import box_drawn, ffmpeg_picture, ffprobe_frames, frame_rate, gst_play
from tests.support.restreaming import FPS, SETTINGS, SIZE, assert_box, watched_pipeline
from tests.support.server import ServerProcess, free_port, running_server, wait_for

pytestmark = pytest.mark.e2e

KEY = "restream-s3cret-key"


def call(server: ServerProcess, method: str, path: str, **kwargs) -> httpx.Response:
    return restreaming.call(server, KEY, method, path, **kwargs)


@pytest.fixture(scope="module")
def rtsp_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def restream_server(rtsp_port) -> Iterator[ServerProcess]:
    with running_server(
        api_key=KEY,
        restream_rtsp_port=str(rtsp_port),
        restream_stall_s="3",
        restream_hls_idle_s="5",
        **SETTINGS,
    ) as server:
        yield server


@pytest.fixture(scope="module")
def watched(restream_server, person) -> Iterator[dict]:
    """A pipeline of two sources drawing a person's box, and its sources' URLs."""
    with watched_pipeline(restream_server, KEY, person, sources=2) as watching:
        pipeline_id = watching["pipeline_id"]
        listing = call(restream_server, "GET", f"/inference_pipelines/{pipeline_id}/restream")
        assert listing.status_code == 200, listing.text
        sources = listing.json()["sources"]
        yield {**watching, "urls": sources["0"]["urls"], "other": sources["1"]["urls"]}


def restream_stats(server: ServerProcess, pipeline_id: str, source: str = "0") -> dict:
    listing = call(server, "GET", f"/inference_pipelines/{pipeline_id}/restream").json()
    return listing["sources"][source]["restream"]


def test_rtsp_plays_in_ffmpeg_and_gstreamer_with_the_box_at_the_size_and_rate(watched):
    url = watched["urls"]["rtsp"]
    assert url.startswith("rtsp://127.0.0.1:") and "token=" in url and KEY not in url
    # FFmpeg asks for UDP first: told 461, it asks again for TCP.
    assert_box(ffmpeg_picture(url), watched)
    frames = ffprobe_frames(url, 4)
    assert {(f["width"], f["height"]) for f in frames} == {SIZE}
    assert 0.6 * FPS <= frame_rate(frames) <= 1.15 * FPS
    played = gst_play(url, 4)  # playbin through rtspsrc, decoded by avdec_h264
    assert played.error is None and (played.width, played.height) == SIZE
    assert 0.6 * FPS <= (played.frames - 1) / played.pts_span <= 1.15 * FPS
    assert_box(played.image, watched)


def test_hls_plays_in_ffmpeg_and_gstreamer_with_the_box_at_the_size_and_rate(watched):
    url = watched["urls"]["hls"]
    playlist = httpx.get(url, timeout=60)
    assert playlist.status_code == 200, playlist.text
    assert playlist.headers["content-type"] == "application/vnd.apple.mpegurl"
    assert "#EXT-X-TARGETDURATION" in playlist.text and "token=" in playlist.text
    assert_box(ffmpeg_picture(url), watched)
    frames = ffprobe_frames(url, 4)
    assert {(f["width"], f["height"]) for f in frames} == {SIZE}
    assert 0.6 * FPS <= frame_rate(frames) <= 1.15 * FPS
    played = gst_play(url, 4)  # playbin through hlsdemux
    assert played.error is None and (played.width, played.height) == SIZE
    assert_box(played.image, watched)


def test_mjpeg_and_snapshot_play_in_gstreamer_and_chromium_with_the_box(watched):
    played = gst_play(watched["urls"]["mjpeg"], 4)  # souphttpsrc, multipartdemux, jpegdec
    assert played.error is None and (played.width, played.height) == SIZE
    assert 0.6 * FPS <= (played.frames - 1) / played.arrival_span <= 1.15 * FPS
    assert_box(played.image, watched)
    snapshot = httpx.get(watched["urls"]["snapshot"], timeout=60)
    assert snapshot.status_code == 200 and snapshot.headers["content-type"] == "image/jpeg"
    assert_box(cv2.imdecode(np.frombuffer(snapshot.content, np.uint8), cv2.IMREAD_COLOR), watched)
    with chromium() as browser:
        page = browser.new_page(viewport={"width": SIZE[0], "height": SIZE[1]})
        for name in ("snapshot", "mjpeg"):
            page.set_content(
                f'<body style="margin:0"><img id="v" src="{watched["urls"][name]}"></body>'
            )
            page.wait_for_function("document.getElementById('v').naturalWidth > 0", timeout=60000)
            shot = page.screenshot(clip={"x": 0, "y": 0, "width": SIZE[0], "height": SIZE[1]})
            assert_box(cv2.imdecode(np.frombuffer(shot, np.uint8), cv2.IMREAD_COLOR), watched)


def test_ten_players_share_one_encoder_and_the_last_to_leave_stops_it(restream_server, watched):
    pipeline_id, url = watched["pipeline_id"], watched["other"]["rtsp"]
    wait_for(
        lambda: not restream_stats(restream_server, pipeline_id, "1")["encoding"],
        60,
        "source 1 not restreamed",
    )
    before = restream_stats(restream_server, pipeline_id, "1")["encoders_started"]
    command = ["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i", url]
    command += ["-c", "copy", "-f", "null", "-"]
    players = [subprocess.Popen(command, stdin=subprocess.DEVNULL) for _ in range(10)]
    try:
        # The encoder opens at the first picture after the first subscription, so wait for
        # it rather than read the count the moment the tenth player is in.
        stats = wait_for(
            lambda: (
                (s := restream_stats(restream_server, pipeline_id, "1"))["subscriptions"].get(
                    "h264"
                )
                == 10
                and s["encoders_started"] > before
                and s
            ),
            60,
            "ten RTSP players on a started encoder",
        )
        assert stats["encoding"] and stats["encoders_started"] == before + 1
    finally:
        for player in players:
            player.terminate()
        for player in players:
            player.wait(30)
    stopped = wait_for(
        lambda: not (s := restream_stats(restream_server, pipeline_id, "1"))["encoding"] and s,
        60,
        "the encoder stopped with the last player",
    )
    assert stopped["encoders_started"] == before + 1 and stopped["subscriptions"] == {}


def test_a_player_that_stops_reading_is_dropped_and_the_others_keep_playing(
    restream_server, watched, rtsp_port
):
    pipeline_id, url = watched["pipeline_id"], watched["urls"]["rtsp"]
    path = url.split(f":{rtsp_port}", 1)[1]
    stalled = socket.create_connection(("127.0.0.1", rtsp_port))
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        for cseq, request in enumerate(
            (
                f"DESCRIBE rtsp://127.0.0.1:{rtsp_port}{path} RTSP/1.0\r\n",
                f"SETUP rtsp://127.0.0.1:{rtsp_port}{path} RTSP/1.0\r\n"
                "Transport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n",
                f"PLAY rtsp://127.0.0.1:{rtsp_port}{path} RTSP/1.0\r\n",
            ),
            1,
        ):
            stalled.sendall(f"{request}CSeq: {cseq}\r\n\r\n".encode())
        before = restream_stats(restream_server, pipeline_id)["dropped_players"]
        started = time.monotonic()
        frames = ffprobe_frames(url, 8)  # played all along, while the other stalls
        assert frame_rate(frames) >= 0.6 * FPS
        wait_for(
            lambda: restream_stats(restream_server, pipeline_id)["dropped_players"] > before,
            60,
            "the stalled player dropped",
        )
        assert time.monotonic() - started < 60
    finally:
        stalled.close()


def test_the_camera_copied_as_it_sends_costs_no_encoder_and_no_second_connection(
    restream_server, watched
):
    camera = watched["camera"]
    connections = camera.clients
    url = watched["urls"]["rtsp_camera"]
    picture = ffmpeg_picture(url)
    assert picture.shape[:2] == (720, 1280)  # the camera's own size: nothing scaled
    box = tuple(2 * v for v in watched["box"])  # nothing drawn: the camera's picture
    assert box_drawn(picture, box, watched["colour"], inset=0) < 0.3
    frames = ffprobe_frames(url, 4)
    assert {(f["width"], f["height"]) for f in frames} == {(1280, 720)}
    assert 10 * 0.6 <= frame_rate(frames) <= 10 * 1.15  # the camera's rate, not the restream's
    copied = restream_stats(restream_server, watched["pipeline_id"])["camera_copy"]
    assert copied["encoders_started"] == 0 and copied["frames_in"] > 0
    assert camera.clients == connections  # the pipeline's connection, copied


def test_urls_carry_a_token_for_their_source_only(restream_server, watched):
    status = call(restream_server, "GET", f"/inference_pipelines/{watched['pipeline_id']}/status")
    listed = status.json()["restream"]["1"]
    assert set(listed["urls"]) == {"rtsp", "rtsp_camera", "hls", "mjpeg", "snapshot", "whep"}
    assert listed["role"] == "viewer" and listed["expires_at"] > time.time() + 86400
    assert KEY not in status.text
    snapshot = watched["urls"]["snapshot"]
    base, _, token = snapshot.partition("?token=")
    assert httpx.get(base, timeout=30).status_code == 401  # no key, no token
    assert httpx.get(f"{base}?token=x{token}", timeout=30).status_code == 401
    other_base = watched["other"]["snapshot"].partition("?token=")[0]
    wrong_source = httpx.get(f"{other_base}?token={token}", timeout=30)
    assert wrong_source.status_code == 401 and token not in wrong_source.text
    keyed = call(restream_server, "GET", base.removeprefix(restream_server.url))
    assert keyed.status_code == 200 and keyed.headers["content-type"] == "image/jpeg"
    no_source = call(restream_server, "GET", f"/restream/{watched['pipeline_id']}/7/snapshot.jpg")
    assert no_source.status_code == 404
    rtsp = watched["urls"]["rtsp"].partition("?token=")[0]
    refused = subprocess.run(
        ["ffprobe", "-v", "error", "-rtsp_transport", "tcp", f"{rtsp}?token=x{token}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0 and "401" in refused.stderr


def test_a_restream_url_plays_again_after_the_server_restarts(tmp_path):
    """The pipeline comes back under its id, the token's secret from the data directory."""
    settings = {"api_key": KEY, "data_dir": str(tmp_path / "data"), **SETTINGS}
    with RTSPCamera(320, 240, fps=10) as camera:
        with running_server(**settings) as server:
            started = restreaming.call(
                server,
                KEY,
                "POST",
                "/inference_pipelines/initialise",
                json={
                    "video_configuration": {
                        "type": "VideoConfiguration",
                        "video_reference": camera.url,
                    },
                    "processing_configuration": {
                        "type": "WorkflowConfiguration",
                        "workflow_id": "object-detection",
                    },
                },
            )
            assert started.status_code == 200, started.text
            pipeline_id = started.json()["context"]["pipeline_id"]
            listing = restreaming.call(
                server, KEY, "GET", f"/inference_pipelines/{pipeline_id}/restream"
            )
            snapshot = listing.json()["sources"]["0"]["urls"]["snapshot"]
            path = snapshot.removeprefix(server.url)
            assert httpx.get(snapshot, timeout=60).headers["content-type"] == "image/jpeg"
        with running_server(**settings) as again:
            answer = wait_for(
                lambda: (a := httpx.get(again.url + path, timeout=60)).status_code == 200 and a,
                90,
                "the same URL's picture after the restart",
            )
            assert answer.headers["content-type"] == "image/jpeg"
            restreaming.call(again, KEY, "POST", f"/inference_pipelines/{pipeline_id}/terminate")
