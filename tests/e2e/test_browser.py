"""The browser page in real Chromium (Playwright) against the real server on 127.0.0.1.

Screenshots of each mode are written to ``tests/artifacts/`` (ignored by git) for people to
look at. The page keeps its live figures in ``window.visionstream.stats``; waits poll that on
Chromium's animation frames, never on a timer.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import cv2
import numpy as np
import pytest

from streaming.access import Role
from streaming.server.keys import add_key
from tests.conftest import DETECT_SPEC, load_photo
from tests.support.browser import at_widths, chromium, overflowing
from tests.support.camera import RTSPCamera
from tests.support.media import outline_difference, write_clip, write_y4m
from tests.support.server import ServerProcess, free_port, running_server, wait_for
from tests.support.turn import PASSWORD, USER, TurnServer

pytestmark = pytest.mark.e2e

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
WAIT_MS = 30_000


def screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"browser-{name}.png"), full_page=True)


def wait_stats(page, condition: str, timeout_ms: int = WAIT_MS):
    """Until ``condition`` (JavaScript over ``s``, the page's stats) holds; returns the stats."""
    try:
        predicate = f"() => {{ const s = window.visionstream.stats; return {condition}; }}"
        page.wait_for_function(predicate, timeout=timeout_ms)
    except Exception as exc:
        stats = page.evaluate("() => window.visionstream.stats")
        raise AssertionError(f"{condition} never held; stats: {json.dumps(stats)}") from exc
    return page.evaluate("() => window.visionstream.stats")


def shown_error(page) -> str:
    alert = page.get_by_role("alert")
    alert.wait_for(state="visible", timeout=WAIT_MS)
    return alert.inner_text()


def returned_frame(page) -> np.ndarray:
    """The frame the <video> shows now, as BGR pixels (drawn through a canvas)."""
    data_url = page.evaluate(
        """() => {
            const video = document.getElementById("output");
            const canvas = document.createElement("canvas");
            canvas.width = video.videoWidth;
            canvas.height = video.videoHeight;
            canvas.getContext("2d").drawImage(video, 0, 0);
            return canvas.toDataURL("image/png");
        }"""
    )
    png = base64.b64decode(data_url.split(",", 1)[1])
    return cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)


@pytest.fixture(scope="module")
def scene(photos) -> np.ndarray:
    return load_photo(photos, "person.jpg")  # a person, a dog and a horse


@pytest.fixture(scope="module")
def browser(tmp_path_factory, scene):
    """Chromium whose fake camera loops the scene."""
    clip = write_y4m(tmp_path_factory.mktemp("camera") / "scene.y4m", [scene] * 10)
    with chromium(fake_camera=clip) as browser:
        yield browser


@contextmanager
def open_page(browser, url: str, camera: bool = True):
    """A fresh page (own context: own session storage) at ``url``; fails the test on any
    uncaught exception in the page."""
    context = browser.new_context(permissions=["camera"] if camera else [])
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(url)
    try:
        yield page
    finally:
        context.close()
    assert not problems, problems


@pytest.fixture
def page(browser, server):
    with open_page(browser, server.url + "/") as page:
        yield page


def test_page_and_its_files_come_from_this_server(server):
    response = server.get("/")
    assert response.status_code == 200 and "<title>visionstream</title>" in response.text
    assert "default-src 'self'" in response.headers["content-security-policy"]
    for name in ("app.js", "session.js", "protocol.js", "whip.js", "style.css", "favicon.svg"):
        assert server.get(f"/{name}").status_code == 200, name
    assert "http" not in "".join(
        line for line in response.text.splitlines() if "src=" in line or "href=" in line
    )


def test_webcam_mode_shows_annotated_video_and_detections_then_stop_frees_the_session(
    page, server, scene
):
    assert page.get_by_label("Workflow").input_value() == "local/object-detection"
    closed = server.closed_sessions
    page.get_by_role("button", name="Start", exact=True).click()
    stats = wait_stats(
        page, 's.state === "connected" && s.framesReceived >= 15 && s.detections > 0'
    )
    assert stats["latencyMs"] is not None and stats["latencyBasis"] == "sent"
    assert page.evaluate("() => document.getElementById('output').videoWidth") > 0
    assert "CPU" in page.locator("#provider").inner_text()
    assert page.get_by_role("status").inner_text().count("connected") == 1

    # The detections panel lists what the server found in this frame.
    cells = page.locator("#detections tbody tr td:first-child").all_inner_texts()
    assert "person" in cells and len(cells) >= 2, cells

    # The server drew the boxes: along a box's edge the returned pixels differ from the
    # scene; away from every box they match it (up to VP8's loss).
    frame = returned_frame(page)
    height, width = frame.shape[:2]
    source = cv2.resize(scene, (width, height))
    predictions, found_in = page.evaluate(
        "() => [window.visionstream.detections, window.visionstream.metadata]"
    )
    # Chromium ramps its resolution up: boxes are in the size of the frame they were found in.
    # The frame on screen may be a result or two older than the boxes: the surest detection
    # is in both (a weak one may come and go).
    p = max(predictions, key=lambda p: p["confidence"])
    sx, sy = width / found_in["width"], height / found_in["height"]
    box = {"x": p["x"] * sx, "y": p["y"] * sy, "width": p["width"] * sx, "height": p["height"] * sy}
    outline, background = outline_difference(frame, source, box)
    assert outline > 40 and outline > 4 * background, (p, found_in, outline, background)
    assert_status_bar_on_one_line(page)
    screenshot(page, "webcam")

    page.get_by_role("button", name="Stop", exact=True).click()
    wait_stats(page, 's.phase === "stopped"')
    server.wait_sessions_closed(closed + 1)
    assert server.sessions() == 0


def test_file_mode_uploads_with_progress_and_gets_every_result(page, server, scene, tmp_path):
    frames = 40
    clip = write_clip(tmp_path / "clip.mp4", [np.roll(scene, 4 * i, axis=1) for i in range(frames)])
    page.get_by_role("radio", name="Video file").check()
    assert page.get_by_label("Process every frame").is_checked()  # files default to every frame
    page.get_by_label("Choose a video file").set_input_files(str(clip))
    page.get_by_role("button", name="Start", exact=True).click()
    stats = wait_stats(page, 's.phase === "done"', timeout_ms=60_000)
    assert stats["uploadPercent"] == 100
    assert stats["resultsReceived"] == frames and stats["dropped"] == 0
    assert page.locator("#upload-progress").get_attribute("value") == "100"
    assert f"Done: {frames} frames processed" in page.locator("#processed-text").inner_text()
    assert page.get_by_role("status").inner_text().startswith("Connection: done")
    screenshot(page, "file")


def test_every_control_is_labelled_and_the_keyboard_starts_and_stops(page, server):
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll("input, select, button, video")]
            .filter((e) => !(e.labels?.length || e.getAttribute("aria-label") ||
                             (e.tagName === "BUTTON" && e.textContent.trim())))
            .map((e) => e.outerHTML)"""
    )
    assert unlabelled == []
    closed = server.closed_sessions
    page.locator("body").focus()
    for _ in range(20):  # Tab walks the controls in reading order up to Start
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.id") == "start":
            break
    assert page.evaluate("() => document.activeElement.textContent") == "Start"
    page.keyboard.press("Enter")
    wait_stats(page, 's.state === "connected" && s.framesReceived > 0')
    assert page.evaluate("() => document.activeElement.id") == "stop"  # focus follows
    page.keyboard.press("Enter")
    wait_stats(page, 's.phase === "stopped"')
    assert page.evaluate("() => document.activeElement.id") == "start"
    server.wait_sessions_closed(closed + 1)


def test_the_page_reassembles_results_within_bounds(page):
    """The page's own chunk reassembler and gzip decoding, fed crafted chunks in Chromium."""
    outcome = page.evaluate(
        """async () => {
            const { ResultAssembler, decodeResult, CHUNK_BYTES } = await import("/protocol.js");
            const chunk = (id, index, total, bytes) => {
                const out = new Uint8Array(12 + bytes.length);
                const view = new DataView(out.buffer);
                view.setUint32(0, id, true); view.setUint32(4, index, true);
                view.setUint32(8, total, true);
                out.set(bytes, 12);
                return out.buffer;
            };
            const message = JSON.stringify({ frame: 7, pad: "x".repeat(100) });
            const text = new TextEncoder().encode(message);
            const zipped = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
            const gz = new Uint8Array(await new Response(zipped).arrayBuffer());
            const out = {};
            const assembler = new ResultAssembler({ window: 4 });
            const half = Math.ceil(gz.length / 2);
            out.first = assembler.add(chunk(1, 1, 2, gz.subarray(half)));  // out of order
            const whole = assembler.add(chunk(1, 0, 2, gz.subarray(0, half)));
            out.decoded = await decodeResult(whole);
            out.plain = await decodeResult(assembler.add(chunk(2, 0, 1, text)));
            const refused = [];
            for (const bad of [chunk(3, 0, 0xffffffff, text), chunk(3, 5, 2, text),
                               new Uint8Array(5).buffer]) {
                try { assembler.add(bad); } catch (error) { refused.push(error.message); }
            }
            assembler.add(chunk(10, 0, 3, text));            // never completed...
            assembler.add(chunk(20, 0, 1, text));            // ...and left behind by 10 ids
            out.dropped = assembler.dropped;
            out.pendingBytes = assembler.pendingBytes;
            try { assembler.add(chunk(10, 1, 3, text)); }
            catch (error) { refused.push(error.message); }
            out.refused = refused;
            out.chunkBytes = CHUNK_BYTES;
            return out;
        }"""
    )
    assert outcome["first"] is None
    assert outcome["decoded"]["frame"] == 7 and outcome["plain"]["frame"] == 7
    assert outcome["chunkBytes"] == 48 * 1024
    assert outcome["dropped"] == 1 and outcome["pendingBytes"] == 0
    refused = outcome["refused"]
    assert "beyond the byte budget" in refused[0]
    assert "out of range" in refused[1]
    assert "shorter than its header" in refused[2]
    assert "after its window closed" in refused[3]


def test_camera_mode_reads_a_url_or_watches_a_running_pipeline(page, server):
    with RTSPCamera(320, 240, fps=15) as camera:
        page.get_by_role("radio", name="Camera or pipeline").check()
        url = page.get_by_label("Camera URL (RTSP or MJPEG)")
        url.fill(f"rtsp://127.0.0.1:{free_port()}/nothing-here")
        page.get_by_role("button", name="Start", exact=True).click()
        message = shown_error(page)
        assert "502" in message and "nothing-here" in message, message
        wait_stats(page, 's.phase === "failed"')

        url.fill(camera.url)
        page.get_by_role("button", name="Start", exact=True).click()
        wait_stats(page, 's.state === "connected" && s.framesReceived >= 10')
        assert page.get_by_role("alert").is_hidden()
        page.get_by_role("button", name="Stop", exact=True).click()
        wait_stats(page, 's.phase === "stopped"')
        url.fill("")

        started = server.start_pipeline(camera.url, DETECT_SPEC)
        assert started.status_code == 200, started.text
        pipeline_id = started.json()["context"]["pipeline_id"]
        # A source added to the running pipeline is listed, and watched, like the first.
        added = server.post(
            f"/inference_pipelines/{pipeline_id}/sources", json={"video_reference": camera.url}
        )
        assert added.status_code == 200 and added.json()["source_id"] == 1, added.text
        page.get_by_role("button", name="Refresh pipelines").click()
        choice = page.get_by_label("or watch a running pipeline")
        choice.locator(f'option[value="{pipeline_id}#1"]').wait_for(state="attached")
        assert choice.inner_text().count("rtsp://") == 2
        choice.select_option(f"{pipeline_id}#1")
        # Its URLs for other players (VLC, Home Assistant) are shown, each with a token.
        page.locator("#restream-panel summary").click()
        hls = page.locator('#restream-urls input[data-output="hls"]').input_value()
        assert f"/restream/{pipeline_id}/1/index.m3u8?token=" in hls
        # Watching: the workflow, its line and its pace are the pipeline's, not chosen here.
        for control in ("#workflow", "#geometry-panel", "#every-frame"):
            assert page.locator(control).is_hidden(), control
        page.get_by_role("button", name="Start", exact=True).click()
        shown = wait_stats(
            page, 's.state === "connected" && s.framesReceived >= 30 && s.resultsReceived >= 10'
        )
        # Frames counted once each (two counters once showed 57 fps for a 30 fps camera),
        # and no drops of its own for a viewer that sends nothing.
        assert shown["fps"] <= 15 * 1.4, shown
        assert page.locator("#dropped").inner_text() == "\u2013"  # a dash: nothing to count
        assert_status_bar_on_one_line(page)
        screenshot(page, "pipeline")
        page.get_by_role("button", name="Stop", exact=True).click()
        wait_stats(page, 's.phase === "stopped"')
        assert server.post(f"/inference_pipelines/{pipeline_id}/terminate").status_code == 200


def test_the_page_fits_a_phone_a_laptop_and_a_desktop_while_it_streams(page, server):
    """At 390, 1280 and 1920 px, streaming: nothing clipped or pushed sideways (the status
    bar, the workflow names), the status bar on one line from a laptop up; a screenshot of
    each in tests/artifacts/."""
    page.get_by_role("button", name="Start", exact=True).click()
    wait_stats(page, 's.state === "connected" && s.framesReceived >= 5 && s.detections > 0')
    try:
        for width in at_widths(page):
            assert not overflowing(page), (width, overflowing(page))
            if width >= 1280:
                assert_status_bar_on_one_line(page)
            screenshot(page, f"streaming-{width}px")
    finally:
        page.get_by_role("button", name="Stop", exact=True).click()
        wait_stats(page, 's.phase === "stopped"')


def assert_status_bar_on_one_line(page) -> None:
    tops = page.evaluate(
        "() => [...document.querySelectorAll('#status > span')]"
        ".map(s => Math.round(s.getBoundingClientRect().top))"
    )
    assert len(set(tops)) == 1, f"the status bar wraps: {tops}"


def click_on_video(page, x: float, y: float) -> None:
    """A click on the video where its picture's pixel (x, y) is shown (scrolled into view
    first: a focused button low on a tall form scrolls the page)."""
    box = page.evaluate(
        """() => {
            const video = document.getElementById("output");
            video.scrollIntoView({block: "nearest"});
            const r = video.getBoundingClientRect();
            const scale = Math.min(r.width / video.videoWidth, r.height / video.videoHeight);
            return {left: r.left + (r.width - video.videoWidth * scale) / 2,
                    top: r.top + (r.height - video.videoHeight * scale) / 2, scale};
        }"""
    )
    page.mouse.click(box["left"] + x * box["scale"], box["top"] + y * box["scale"])


def test_a_line_drawn_on_the_video_counts_there_and_the_counts_show_live(page, server, scene):
    page.get_by_label("Workflow").select_option("local/people-counting")
    help_text = page.locator("#geometry-help")
    assert "Using the default" in help_text.inner_text()
    page.get_by_role("button", name="Start", exact=True).click()
    wait_stats(page, 's.state === "connected" && s.framesReceived >= 5 && s.resultsReceived >= 5')
    counts = page.evaluate("() => window.visionstream.counts")
    assert counts == {"count_in": 0, "count_out": 0}
    assert page.locator("#counts").inner_text().split() == ["count", "in", "0", "count", "out", "0"]

    # Across the top, clear of every object in the scene (their boxes start at y = 115).
    width, height = page.evaluate("() => [output.videoWidth, output.videoHeight]")
    ends = [(0.05 * width, 0.08 * height), (0.45 * width, 0.08 * height)]
    for x, y in ends:
        click_on_video(page, x, y)
    geometry = page.evaluate("() => window.visionstream.geometry")
    assert geometry["name"] == "line" and geometry["drawn"] is True
    # In the video's pixels, up to the rounding of the mouse's position on screen.
    assert np.abs(np.array(geometry["points"]) - np.array(ends)).max() <= 1.5, geometry
    page.get_by_role("button", name="Apply").click()  # a new session with that line
    wait_stats(page, 's.state === "connected" && s.framesReceived >= 15 && s.resultsReceived >= 5')
    page.wait_for_function(f"() => output.videoWidth === {width}", timeout=WAIT_MS)

    # The server draws the line where it was clicked: along it the returned pixels differ
    # from the scene; along a parallel band 30 px lower they match (up to VP8's loss).
    frame = returned_frame(page)
    source = cv2.resize(scene, (frame.shape[1], frame.shape[0]))
    diff = np.abs(frame.astype(int) - source.astype(int)).sum(axis=2)
    x1, x2 = round(ends[0][0]) + 10, round(ends[1][0]) - 10
    y = round(ends[0][1])
    on_line = float(diff[y - 1 : y + 2, x1:x2].mean())
    below = float(diff[y + 29 : y + 32, x1:x2].mean())
    assert on_line > 40 and on_line > 4 * below, (on_line, below)
    assert page.evaluate("() => window.visionstream.counts") == {"count_in": 0, "count_out": 0}
    screenshot(page, "line-drawn")
    page.get_by_role("button", name="Stop", exact=True).click()
    wait_stats(page, 's.phase === "stopped"')


@pytest.fixture(scope="module")
def keyed_server():
    process = ServerProcess(api_key="s3cret-key")
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def test_a_wrong_api_key_is_shown_in_words_and_the_right_one_works(browser, keyed_server):
    with open_page(browser, keyed_server.url + "/") as page:
        assert "requires an API key" in shown_error(page)  # the workflow list needs it
        key = page.get_by_label("API key (kept for this browser tab only)")
        page.get_by_text("API key", exact=True).click()
        key.fill("wrong-key")
        key.dispatch_event("change")
        page.get_by_role("button", name="Start", exact=True).click()
        wait_stats(page, 's.phase === "failed"')
        message = shown_error(page)
        assert "401" in message and "invalid API key" in message, message
        assert "s3cret-key" not in message and "wrong-key" not in message
        screenshot(page, "wrong-key")

        key.fill("s3cret-key")
        key.dispatch_event("change")
        page.get_by_role("button", name="Start", exact=True).click()
        wait_stats(page, 's.state === "connected" && s.resultsReceived > 0')
        assert page.get_by_role("alert").is_hidden()
        assert page.evaluate("() => sessionStorage.getItem('visionstream.apiKey')") == "s3cret-key"
        page.get_by_role("button", name="Stop", exact=True).click()
        wait_stats(page, 's.phase === "stopped"')


def test_a_stopped_server_is_a_readable_error(browser):
    stopping = ServerProcess()
    stopping.wait_ready()
    try:
        with open_page(browser, stopping.url + "/") as page:
            wait_stats(page, "s.provider !== null")
            stopping.stop()
            page.get_by_role("button", name="Start", exact=True).click()
            message = shown_error(page)
            assert f"Cannot reach the server at {stopping.url}" in message, message
            assert "Is visionstream running?" in message
            wait_stats(page, 's.phase === "failed"')
            assert page.get_by_role("button", name="Start", exact=True).is_enabled()
            screenshot(page, "server-stopped")
    finally:
        stopping.stop()


def test_a_server_no_peer_can_reach_says_so_at_start_in_the_page_and_in_the_cli(browser):
    """The tests' namespace has loopback alone, which ICE never offers unless told: a server
    left to its own scan offers its media no address. It says so when it starts; the page
    and the CLI say at once that the connection cannot be made, why and what to set, rather
    than "connecting" until a timeout."""
    unreachable = ServerProcess(environment={"VISIONSTREAM_ICE_HOST_ADDRESSES": ""})
    unreachable.wait_ready()
    try:
        said = [line for line in unreachable.lines if "no network address but loopback" in line]
        assert said and "VISIONSTREAM_ICE_HOST_ADDRESSES=127.0.0.1" in said[0], said
        with open_page(browser, unreachable.url + "/") as page:
            wait_stats(page, "s.provider !== null")
            page.get_by_role("button", name="Start", exact=True).click()
            message = shown_error(page)
            assert "the server offered no address for its media" in message, message
            assert "VISIONSTREAM_ICE_HOST_ADDRESSES" in message
            wait_stats(page, 's.phase === "failed"')
        done = subprocess.run(
            [sys.executable, "-m", "streaming.cli", "stream", "--source", "synthetic:320x240@30",
             "--frames", "5", "--api-url", unreachable.url],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert "the server offered no address for its media" in done.stderr, done.stderr
    finally:
        unreachable.stop()


def test_a_denied_camera_is_a_readable_error(browser, server):
    with open_page(browser, server.url + "/", camera=False) as page:
        page.get_by_role("button", name="Start", exact=True).click()
        assert "Camera permission was denied" in shown_error(page)
        wait_stats(page, 's.phase === "failed"')
    assert server.sessions() == 0


# --- beyond our own protocol: WHIP/WHEP and a TURN relay ---------------------------------


def health(server) -> dict:
    return server.get("/healthz").json()


def test_the_page_publishes_over_whip_and_plays_the_annotated_output_over_whep(page, server):
    page.get_by_label("Send with WHIP").check()
    page.get_by_role("button", name="Start", exact=True).click()
    stats = wait_stats(page, 's.state === "connected" && s.framesReceived >= 15 && s.path')
    assert stats["path"] == "host → host"
    assert "host → host" in page.get_by_role("status").inner_text()
    assert health(server)["publishers"] == 1  # the webcam, as a WHIP publisher
    assert page.evaluate("() => document.getElementById('output').videoWidth") > 0
    screenshot(page, "whip")
    page.get_by_role("button", name="Stop", exact=True).click()
    wait_stats(page, 's.phase === "stopped"')
    # Stop sends DELETE for the player's and the publisher's resources.
    wait_for(
        lambda: (h := health(server))["publishers"] == 0 and h["sessions"] == 0,
        30,
        "the WHIP resource and the WHEP session ended",
    )


def test_the_page_relays_through_turn_when_told_and_shows_the_relayed_path(page, server, tmp_path):
    turn = TurnServer(tmp_path / "turn")
    try:
        allocations = turn.allocations()
        page.get_by_text("Network (TURN)").click()
        page.get_by_label("TURN server").fill(turn.url("udp"))
        page.get_by_label("User name").fill(USER)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_label("Relay only").check()
        page.get_by_role("button", name="Start", exact=True).click()
        stats = wait_stats(page, 's.state === "connected" && s.framesReceived >= 10 && s.path')
        assert stats["path"].startswith("relay → "), stats["path"]
        assert turn.allocations() >= allocations + 1
        page.get_by_role("button", name="Stop", exact=True).click()
        wait_stats(page, 's.phase === "stopped"')
    finally:
        turn.stop()


@pytest.fixture(scope="module")
def roles_server(tmp_path_factory):
    keys_file = tmp_path_factory.mktemp("keys") / "keys.json"
    viewer = add_key(keys_file, "guard", Role.VIEWER, None)
    with running_server(auth_keys_file=str(keys_file)) as process:
        yield process, viewer


def test_the_pages_say_who_is_signed_in_and_a_viewer_is_offered_only_watching(
    browser, roles_server
):
    server, viewer = roles_server
    with open_page(browser, server.url + "/") as page:
        page.get_by_text("API key", exact=True).click()
        key = page.get_by_label("API key (kept for this browser tab only)")
        key.fill(viewer)
        key.dispatch_event("change")
        who = page.locator("#who")
        who.filter(has_text="guard (viewer)").wait_for(timeout=WAIT_MS)
        wait_stats(page, "s.watchOnly === true")
        for source in ("Webcam", "Video file"):
            assert page.get_by_role("radio", name=source).is_hidden(), source
        assert page.get_by_label("or watch a running pipeline").is_visible()
        assert page.locator("#camera-url").is_hidden() and page.locator("#workflow").is_hidden()
        screenshot(page, "viewer")
    with open_page(browser, server.url + "/review.html", camera=False) as page:
        page.evaluate(f"() => sessionStorage.setItem('visionstream.apiKey', {viewer!r})")
        page.reload()
        page.locator("#who").filter(has_text="guard (viewer)").wait_for(timeout=WAIT_MS)
        screenshot(page, "review-viewer")
