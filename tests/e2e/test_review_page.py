"""The review page in real Chromium against the real server: a counting pipeline on the RTSP
test camera (a person walking across the line and back) with an event sink and recording
around events. Its tile plays live with the counts, each crossing appears on the timeline,
a click plays the event's clip, and the chart draws the buckets ``/events/summary`` gives.

The delay from a crossing being stored to it showing is written beside the screenshot
(``tests/artifacts/review-page.json``) for people to read, not asserted: a loaded machine
stretches it."""

from __future__ import annotations

import json

import cv2
import httpx
import numpy as np
import pytest

from tests.e2e.test_browser import ARTIFACTS, open_page
from tests.e2e.test_events import counting_with_evidence
from tests.support.browser import at_widths, chromium, overflowing
from tests.support.camera import RTSPCamera
from tests.support.media import walking_back_and_forth
from tests.support.server import running_server, wait_for

pytestmark = pytest.mark.e2e

WAIT_MS = 120_000


def wait_state(page, condition: str, timeout_ms: int = WAIT_MS):
    """Until ``condition`` (JavaScript over ``v``, the page's ``window.visionstream``) holds."""
    try:
        page.wait_for_function(f"() => {{ const v = window.visionstream; return {condition}; }}",
                               timeout=timeout_ms)  # fmt: skip
    except Exception as exc:
        shown = page.evaluate("() => JSON.stringify(window.visionstream)")
        raise AssertionError(f"{condition} never held; the page: {shown[:2000]}") from exc
    return page.evaluate("() => window.visionstream")


def test_the_review_page_shows_live_tiles_events_clips_and_counts(tmp_path, person):
    spec = counting_with_evidence()
    record = {"mode": "events", "pre_seconds": 2, "post_seconds": 2}
    with (
        running_server(sink_dir=str(tmp_path / "sinks")) as server,
        RTSPCamera(640, 480, fps=30, path="door", picture=walking_back_and_forth(person)) as cam,
        chromium() as browser,
    ):
        started = server.start_pipeline(cam.url, spec, sink_configuration={"record": record})
        assert started.status_code == 200, started.text
        pipeline_id = started.json()["context"]["pipeline_id"]
        key = f"{pipeline_id}#0"
        try:
            with open_page(browser, server.url + "/review.html", camera=False) as page:
                # The tile: the pipeline's annotated video, live, with its counts.
                wait_state(page, f"v.tiles[{key!r}] && v.tiles[{key!r}].results > 0")
                page.wait_for_function(
                    "() => { const t = document.querySelector('.tile video');"
                    " return t && t.videoWidth === 640 && !t.paused; }",
                    timeout=WAIT_MS,
                )
                # Each crossing on the timeline, with the event sink's record beside it.
                shown = wait_state(
                    page,
                    "v.events.some(e => e.kind === 'line_crossing') &&"
                    " v.events.some(e => e.kind === 'event_sink' && e.clip_url)",
                )
                counts = shown["tiles"][key]["counts"]
                assert set(counts) >= {"count_in", "count_out"}
                crossing = next(e for e in shown["events"] if e["kind"] == "line_crossing")
                stored = server.get(f"/events/{crossing['id']}").json()
                assert stored["direction"] in ("in", "out") and stored["class_name"] == "person"
                delay_ms = shown["shownAt"][str(crossing["id"])] - crossing["timestamp"] * 1000

                # A click plays the event's clip: the player plays and its frames advance.
                # (The sink writes the clip after its post-roll: clicked once it is there.)
                logged = next(e for e in shown["events"] if e["kind"] == "event_sink")
                wait_for(lambda: server.get(logged["clip_url"]).status_code == 200, 60,
                         "the event sink's clip written")  # fmt: skip
                page.click(f"#timeline button[data-id='{logged['id']}']")
                played = wait_state(page, "v.playback && v.playback.playing &&"
                                          " v.playback.frames >= 2")["playback"]  # fmt: skip
                assert played["id"] == logged["id"]

                # The chart: the buckets the API gives, each a point.
                chart = wait_state(page, "v.chart.some(b => b.kind === 'line_crossing')")["chart"]
                summary = server.get("/events/summary?bucket=minute&kind=line_crossing").json()
                api = {(b["start"][:16], b["step"], b["direction"]): b["count"]
                       for b in summary["buckets"]}  # fmt: skip
                drawn = {(b["start"][:16], b["step"], b["direction"]): b["count"]
                         for b in chart if b["kind"] == "line_crossing"}  # fmt: skip
                assert drawn.items() <= api.items() or drawn == api, (drawn, api)
                points = page.evaluate(
                    "() => [...document.querySelectorAll('#chart circle')]"
                    ".map(c => Number(c.dataset.count))"
                )
                assert sum(points) == sum(b["count"] for b in chart)

                # The screenshot: a tile with a picture, a chart with its coloured series.
                ARTIFACTS.mkdir(exist_ok=True)
                shot = ARTIFACTS / "review-page.png"
                page.screenshot(path=str(shot), full_page=True)
                image = cv2.imread(str(shot))
                tile = page.locator(".tile video").bounding_box()
                region = image[int(tile["y"]):int(tile["y"] + tile["height"]),
                               int(tile["x"]):int(tile["x"] + tile["width"])]  # fmt: skip
                assert region.std() > 10  # a picture, not a black box
                box = page.locator("#chart").bounding_box()
                plot = image[int(box["y"]):int(box["y"] + box["height"]),
                             int(box["x"]):int(box["x"] + box["width"])]  # fmt: skip
                # The series' colours (#2f6fdd, #d9480f: in and out, drawn over each other
                # where their counts are equal), as BGR.
                drawn_pixels = sum(
                    int(np.all(np.abs(plot.astype(int) - colour) < 40, axis=2).sum())
                    for colour in ([221, 111, 47], [15, 72, 217])
                )
                assert drawn_pixels > 50
                (ARTIFACTS / "review-page.json").write_text(
                    json.dumps({"event_to_timeline_ms": round(delay_ms)}) + "\n"
                )
        finally:
            server.post(f"/inference_pipelines/{pipeline_id}/terminate")


KEY = "review-key"


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"review-{name}.png"), full_page=True)


def assert_chart_text_readable(page) -> None:
    """The chart's text as rendered, not as declared: a fixed viewBox squeezed into a narrow
    column once drew it about 6 px high."""
    heights = page.evaluate(
        "() => [...document.querySelectorAll('#chart text')]"
        ".map(t => t.getBoundingClientRect().height)"
    )
    assert heights and min(heights) >= 11, heights


def test_each_state_of_the_review_page_says_what_it_is(tmp_path):
    """Unauthorised, empty, a search by meaning the server cannot make, running, and an event
    without a clip, each shown in words (and a screenshot of each in tests/artifacts/)."""
    headers = {"Authorization": f"Bearer {KEY}"}
    with (
        running_server(api_key=KEY) as server,
        RTSPCamera(320, 240, fps=15, path="front-door") as cam,
        chromium() as browser,
        open_page(browser, server.url + "/review.html", camera=False) as page,
    ):
        # No key given: not "No pipeline is running", but what to do.
        page.wait_for_function(
            "() => document.getElementById('no-tiles').textContent.includes('needs an API key')",
            timeout=WAIT_MS,
        )
        assert page.locator("#key-box").get_attribute("open") is not None
        shot(page, "unauthorised")

        page.fill("#api-key", KEY)
        page.press("#api-key", "Tab")  # the value is committed (change) as a person leaves it
        page.wait_for_function(
            "() => document.getElementById('no-tiles').textContent === 'No pipeline is running.'"
            " && document.querySelector('#chart text')",
            timeout=WAIT_MS,
        )
        assert "No counts in the last hour" in page.locator("#chart").text_content()
        assert_chart_text_readable(page)
        shot(page, "empty")

        # A search by meaning on a server with no embeddings model: said where its results
        # would be, naming the setting; then back to words.
        page.select_option("#search-by", "about")
        page.fill("#search", "someone at the door")
        page.press("#search", "Enter")
        page.wait_for_function(
            "() => document.getElementById('timeline').dataset.empty"
            ".includes('VISIONSTREAM_VLM_EMBEDDINGS')",
            timeout=WAIT_MS,
        )
        shot(page, "search-meaning-unavailable")
        page.fill("#search", "")
        page.select_option("#search-by", "q")
        page.press("#search", "Enter")
        page.wait_for_function(
            "() => !document.getElementById('timeline').dataset.empty", timeout=WAIT_MS
        )

        body = {
            "video_configuration": {"type": "VideoConfiguration", "video_reference": [cam.url]},
            "processing_configuration": {"type": "WorkflowConfiguration",
                                         "workflow_specification": counting_with_evidence()},
        }  # fmt: skip
        started = httpx.post(
            f"{server.url}/inference_pipelines/initialise", json=body, headers=headers, timeout=60
        )
        assert started.status_code == 200, started.text
        pipeline_id = started.json()["context"]["pipeline_id"]
        try:
            # The tile is named by its camera, not by an id.
            key = f"{pipeline_id}#0"
            wait_state(page, f"v.tiles[{key!r}] && v.tiles[{key!r}].results > 0")
            title = page.locator(".tile h3").text_content()
            assert "/front-door" in title and pipeline_id[:8] in title, title
            # The camera connecting is on the timeline; the pipeline's own status is not,
            # unless asked for.
            shown = wait_state(page, "v.events.some(e => e.kind === 'source_state')")
            assert not any(e["kind"] == "inference_thread_started" for e in shown["events"])
            assert page.locator("#timeline img").count() == 0  # no picture: no empty frame
            shot(page, "running")
            # A tile wide enough to read the counts drawn on it, at every width.
            for width in at_widths(page):
                assert not overflowing(page), (width, overflowing(page))
                tile = page.locator(".tile video").bounding_box()
                assert tile is not None and tile["width"] >= min(320, width - 48), (width, tile)
                shot(page, f"running-{width}px")

            # An event without a clip says so at once, with no empty player.
            state_event = next(e for e in shown["events"] if e["kind"] == "source_state")
            assert not state_event.get("clip_url")
            page.click(f"#timeline button[data-id='{state_event['id']}']")
            page.wait_for_function(
                "() => document.getElementById('player-caption').textContent.includes('no clip')",
                timeout=WAIT_MS,
            )
            assert not page.locator("#player").is_visible()
            shot(page, "no-clip")

            page.select_option("#kind", "")  # everything, the pipeline's own status too
            wait_state(page, "v.events.some(e => e.kind === 'inference_thread_started')")
        finally:
            httpx.post(f"{server.url}/inference_pipelines/{pipeline_id}/terminate",
                       headers=headers, timeout=60)  # fmt: skip
