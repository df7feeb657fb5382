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
import supervision as sv

from tests.support.browser import chromium
from tests.support.camera import RTSPCamera
from tests.support.players import box_drawn, ffmpeg_picture, ffprobe_frames, frame_rate, gst_play
from tests.support.server import ServerProcess, free_port, running_server, wait_for

pytestmark = pytest.mark.e2e

KEY = "restream-s3cret-key"
FPS = 5
SIZE = (640, 360)  # the camera's 1280x720, scaled into the restream's bounds
SCALE = SIZE[0] / 1280
THICKNESS = 12
SPEC = {
    "version": "1.0",
    "inputs": [{"type": "InferenceImage", "name": "image"}],
    "steps": [
        {"type": "roboflow_core/roboflow_object_detection_model@v2", "name": "det",
         "images": "$inputs.image", "model_id": "yolov3-tiny-416", "confidence": 0.5},
        {"type": "roboflow_core/bounding_box_visualization@v1", "name": "box",
         "image": "$inputs.image", "predictions": "$steps.det.predictions",
         "thickness": THICKNESS},
    ],
    "outputs": [
        {"type": "JsonField", "name": "predictions", "selector": "$steps.det.predictions"},
        {"type": "JsonField", "name": "annotated", "selector": "$steps.box.image"},
    ],
}  # fmt: skip


def call(server: ServerProcess, method: str, path: str, **kwargs) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEY}", **kwargs.pop("headers", {})}
    return httpx.request(method, server.url + path, headers=headers, timeout=60, **kwargs)


@pytest.fixture(scope="module")
def rtsp_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def restream_server(rtsp_port) -> Iterator[ServerProcess]:
    with running_server(
        api_key=KEY, restream_rtsp_port=str(rtsp_port), restream_fps=str(FPS),
        restream_max_width=str(SIZE[0]), restream_max_height=str(SIZE[1]),
        restream_keyframe_s="1", restream_stall_s="3", restream_hls_idle_s="5",
    ) as server:  # fmt: skip
        yield server


@pytest.fixture(scope="module")
def scene(person) -> np.ndarray:
    picture = np.full((720, 1280, 3), 128, np.uint8)
    grown = cv2.resize(person, None, fx=2, fy=2)  # a box of lines thick enough at 640x360
    height, width = grown.shape[:2]
    picture[100 : 100 + height, 500 : 500 + width] = grown
    return picture


@pytest.fixture(scope="module")
def watched(restream_server, scene) -> Iterator[dict]:
    """A camera seeing a person, a pipeline drawing its box; what the test needs of both."""
    noise = np.random.default_rng(7)

    def picture(_index: int) -> np.ndarray:
        # A band of noise above the person: a second of restream is ~the bitrate's bytes.
        seen = scene.copy()
        seen[:60] = noise.integers(0, 256, (60, 1280, 3), np.uint8)
        return seen

    with RTSPCamera(1280, 720, fps=10, picture=picture) as camera:
        started = call(
            restream_server, "POST", "/inference_pipelines/initialise",
            json={
                "video_configuration": {"type": "VideoConfiguration",
                                        "video_reference": [camera.url, camera.url]},
                "processing_configuration": {"type": "WorkflowConfiguration",
                                             "workflow_specification": SPEC},
            },
        )  # fmt: skip
        assert started.status_code == 200, started.text
        pipeline_id = started.json()["context"]["pipeline_id"]
        result = wait_for(
            lambda: [
                output for output in call(
                    restream_server, "GET", f"/inference_pipelines/{pipeline_id}/consume",
                    json={"wait_seconds": 5},
                ).json().get("outputs", [])
                if output and output["predictions"]["predictions"]
            ],
            90,
            "a result with the person",
        )  # fmt: skip
        person = max(result[0]["predictions"]["predictions"], key=lambda p: p["confidence"])
        x, y, w, h = (person[k] for k in ("x", "y", "width", "height"))
        box = tuple(v * SCALE for v in (x - w / 2, y - h / 2, x + w / 2, y + h / 2))
        colour = sv.ColorPalette.DEFAULT.by_idx(person["class_id"]).as_bgr()
        listing = call(restream_server, "GET", f"/inference_pipelines/{pipeline_id}/restream")
        assert listing.status_code == 200, listing.text
        yield {
            "pipeline_id": pipeline_id,
            "box": box,
            "colour": colour,
            "urls": listing.json()["sources"]["0"]["urls"],
            "other": listing.json()["sources"]["1"]["urls"],
        }
        call(restream_server, "POST", f"/inference_pipelines/{pipeline_id}/terminate")


def restream_stats(server: ServerProcess, pipeline_id: str, source: str = "0") -> dict:
    listing = call(server, "GET", f"/inference_pipelines/{pipeline_id}/restream").json()
    return listing["sources"][source]["restream"]


def assert_box(image: np.ndarray, watched: dict) -> None:
    assert image.shape[:2] == (SIZE[1], SIZE[0]), image.shape
    # supervision draws each line centred on the box's edge: sample on the edge itself.
    share = box_drawn(image, watched["box"], watched["colour"], inset=0)
    assert share >= 0.8, f"only {share:.0%} of the box's edge has its colour"


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
        stats = wait_for(
            lambda: (
                (s := restream_stats(restream_server, pipeline_id, "1"))["subscriptions"].get(
                    "h264"
                )
                == 10
                and s
            ),
            60,
            "ten RTSP players",
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


def test_urls_carry_a_token_for_their_source_only(restream_server, watched):
    status = call(restream_server, "GET", f"/inference_pipelines/{watched['pipeline_id']}/status")
    listed = status.json()["restream"]["1"]
    assert set(listed["urls"]) == {"rtsp", "hls", "mjpeg", "snapshot", "whep"}
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
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode != 0 and "401" in refused.stderr
