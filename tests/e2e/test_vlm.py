"""Vision-language workflows through the unmodified ``inference-sdk`` against the server
process, whose providers (``VISIONSTREAM_VLM_PROVIDERS``) are the suite's provider on loopback
(``tests/support/vlm_provider.py``), answering from the pixels it is sent: ``run_workflow``
gives the reference's output shapes for each block family, and ``webrtc.stream`` keeps its
frame rate while the model answers slowly, each frame carrying the last answer."""

from __future__ import annotations

import base64
import json
import threading

import cv2
import httpx
import pytest
from inference_sdk import InferenceHTTPClient
from inference_sdk.webrtc import StreamConfig

from streaming.protocol.workflows import people_counting
from tests.conftest import load_photo
from tests.e2e.test_browser import open_page
from tests.e2e.test_review_page import WAIT_MS, shot
from tests.support.browser import chromium
from tests.support.camera import RTSPCamera
from tests.support.media import walking_back_and_forth
from tests.support.sdk import LoopManualSource
from tests.support.server import running_server, wait_for
from tests.support.vlm_provider import VlmProvider
from tests.support.webhook import RequestRecorder
from tests.support.workflows import crossing_gate

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def provider(detector):
    with VlmProvider(detector) as fake:
        yield fake


@pytest.fixture(scope="module")
def vlm_server(provider, default_model_dir, tmp_path_factory):
    providers = {
        "openai": {"api": "openai", "base_url": provider.openai_url, "model": "classify"},
        "anthropic": {"api": "anthropic", "base_url": provider.anthropic_url, "model": "describe"},
        "gemini": {"api": "gemini", "base_url": provider.gemini_url, "model": "detect-yxyx_1000"},
        "openrouter": {"api": "openai", "base_url": provider.openai_url, "model": "multilabel"},
    }
    with running_server(
        models_dir=str(default_model_dir),
        vlm_providers=json.dumps(providers),
        vlm_embeddings="openai:embed",
        vlm_families=json.dumps({"qwen-vl": "anthropic:describe"}),
        vlm_live_min_interval_s="0",
        sink_dir=str(tmp_path_factory.mktemp("evidence")),
    ) as process:
        yield process


def workflow(*steps: dict) -> dict:
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "base_url"},
        ],
        "steps": list(steps),
        "outputs": [
            {"type": "JsonField", "name": s["name"], "selector": f"$steps.{s['name']}.*"}
            for s in steps
        ],
    }


EVERY_FAMILY = workflow(
    {
        "type": "roboflow_core/open_ai@v7",
        "name": "gpt",
        "images": "$inputs.image",
        "task_type": "classification",
        "classes": ["person", "dog", "horse"],
    },
    {
        "type": "roboflow_core/anthropic_claude@v3",
        "name": "claude",
        "images": "$inputs.image",
        "task_type": "caption",
    },
    {
        "type": "roboflow_core/google_gemini@v6",
        "name": "gemini",
        "images": "$inputs.image",
        "task_type": "object-detection",
        "classes": ["person", "dog", "horse"],
    },
    {
        "type": "roboflow_core/openrouter@v2",
        "name": "router",
        "images": "$inputs.image",
        "model_id": "qwen/qwen2.5-vl",
        "task_type": "multi-label-classification",
        "classes": ["person", "dog"],
    },
    {
        "type": "roboflow_core/string_template@v1",
        "name": "ask",
        "template": "Find the {what}.",
        "data": {"what": "animals"},
    },
    {
        "type": "roboflow_core/openai_compatible@v1",
        "name": "local",
        "base_url": "$inputs.base_url",
        "model_name": "fenced-detect-xyxy_1000",
        "prompt": "$steps.ask.output",
        "prompt_parameters": {"frame": "$inputs.image"},
    },
    {
        "type": "roboflow_core/vlm_as_detector@v2",
        "name": "boxes",
        "image": "$inputs.image",
        "vlm_output": "$steps.local.output",
        "classes": ["person", "dog", "horse"],
        "model_type": "qwen",
        "task_type": "object-detection",
    },
    {
        "type": "roboflow_core/vlm_as_classifier@v2",
        "name": "gpt_class",
        "image": "$inputs.image",
        "vlm_output": "$steps.gpt.output",
        "classes": ["person", "dog", "horse"],
    },
    {"type": "roboflow_core/qwen25vl@v1", "name": "qwen", "images": "$inputs.image"},
    {
        "type": "roboflow_core/llama_vision@v2",
        "name": "llama",
        "images": "$inputs.image",
        "task_type": "caption",
    },
    {
        "type": "roboflow_core/open_ai@v1",
        "name": "first",
        "images": "$inputs.image",
        "prompt": "What is the main object?",
        "openai_api_key": "sk-unused",
        "json_output_format": {"class_name": "the main object"},
    },
    {"type": "roboflow_core/image_stack@v1", "name": "stack", "image": "$inputs.image"},
)


def test_run_workflow_gives_the_reference_shapes_for_every_block_family(
    vlm_server, provider, photos
):
    client = InferenceHTTPClient(api_url=vlm_server.url, api_key=None)
    photo = load_photo(photos, "person.jpg")
    (out,) = client.run_workflow(
        specification=EVERY_FAMILY,
        images={"image": photo},
        parameters={"base_url": provider.openai_url},
    )
    gpt = out["gpt"]
    assert gpt["error_status"] is False and gpt["classes"] == ["person", "dog", "horse"]
    assert gpt["predictions"]["top"] in ("person", "dog", "horse")
    assert gpt["predictions"]["image"] == {"width": 640, "height": 480}
    assert out["gpt_class"]["predictions"]["top"] == gpt["predictions"]["top"]
    assert "1 person" in out["claude"]["output"]
    for step in ("gemini", "boxes"):
        found = out[step]["predictions"]
        assert found["image"] == {"width": 640, "height": 480}
        classes = {p["class"] for p in found["predictions"]}
        assert "person" in classes, step
        for p in found["predictions"]:
            assert {"x", "y", "width", "height", "confidence", "class_id", "detection_id"} <= set(p)
    assert "person" in out["router"]["output"]
    local_call = next(c for c in provider.calls if c.model == "fenced-detect-xyxy_1000")
    assert local_call.text == "Find the animals." and len(local_call.images) == 1
    assert "1 person" in out["qwen"]["parsed_output"] and out["qwen"]["error_message"] == ""
    assert "person" in out["llama"]["output"]
    assert out["first"]["class_name"] == gpt["predictions"]["top"]
    assert out["first"]["image"] == {"width": 640, "height": 480}
    assert out["stack"]["frames_count"] == 1


def test_a_roboflow_key_uses_the_configured_provider_and_a_task_without_classes_is_a_400(
    vlm_server, photos
):
    image = {"type": "base64", "value": _png(load_photo(photos, "person.jpg"))}
    step = {
        "type": "roboflow_core/open_ai@v4",
        "name": "gpt",
        "images": "$inputs.image",
        "task_type": "caption",
        "api_key": "rf_abc",  # a Roboflow proxy key: the provider named 'openai' answers
    }
    ran = httpx.post(
        f"{vlm_server.url}/workflows/run",
        json={"specification": workflow(step), "inputs": {"image": image, "base_url": ""}},
        timeout=60,
    )
    assert ran.status_code == 200, ran.text
    assert ran.json()["outputs"][0]["gpt"]["error_message"] == ""
    refused = httpx.post(
        f"{vlm_server.url}/workflows/run",
        json={
            "specification": workflow({**step, "task_type": "classification"}),
            "inputs": {"image": image, "base_url": ""},
        },
        timeout=60,
    )
    assert refused.status_code == 400
    assert (
        "`classes` parameter required to be set for task `classification`"
        in (refused.json()["message"])
    )


def _png(image) -> str:
    return base64.b64encode(cv2.imencode(".png", image)[1]).decode()


def test_a_live_stream_keeps_its_rate_while_the_model_answers_slowly(vlm_server, provider, photos):
    """Each answer takes two seconds: frames come back at the rate they are sent, the first
    without an answer, later ones with the last answer and its age."""
    provider.delay_s = 2.0
    spec = workflow(
        {
            "type": "roboflow_core/anthropic_claude@v3",
            "name": "claude",
            "images": "$inputs.image",
            "task_type": "caption",
        },
    )
    source = LoopManualSource()
    client = InferenceHTTPClient(api_url=vlm_server.url, api_key=None)
    session = client.webrtc.stream(
        source=source, workflow=spec, config=StreamConfig(data_output=["claude"])
    )
    seen: list[dict] = []
    changed = threading.Condition()

    @session.on_data()
    def on_data(data, metadata):
        with changed:
            seen.append(data["claude"])
            changed.notify_all()

    photo = load_photo(photos, "person.jpg")
    stop = threading.Event()

    def feed() -> None:
        source.connected.wait(60)
        while not stop.wait(0.1):
            source.send_on_loop(photo)

    threading.Thread(target=feed, daemon=True).start()
    runner = threading.Thread(target=session.run, daemon=True)
    runner.start()
    try:
        with changed:
            answered = changed.wait_for(lambda: any(s["output"] for s in seen), 120)
            assert answered, seen[-3:]
            first_answer = next(i for i, s in enumerate(seen) if s["output"])
            # Frames kept coming while the first answer took its 2 s (10 a second sent).
            assert first_answer >= 3, first_answer
            assert not seen[0]["output"] and "in flight" in seen[0]["error_message"]
            later = seen[-1]
        assert "1 person" in later["output"] and later["answer_age_s"] >= 0
    finally:
        provider.delay_s = 0.0
        stop.set()
        session.close()
        runner.join(30)


def crossings_logged() -> dict:
    """The people counter, and an event sink (a snapshot each) on every crossing."""
    spec = people_counting()
    spec["steps"] += [
        crossing_gate("$steps.log"),
        {
            "type": "visionstream/event_sink@v1",
            "name": "log",
            "file": "crossings",
            "payload": {"count_in": "$steps.counter.count_in"},
        },
    ]
    return spec


def test_a_camera_pipeline_describes_its_crossings_and_search_finds_them(
    vlm_server, provider, person
):
    """A person walks across the line before an RTSP camera: each crossing is stored with
    the model's description of the frame it happened on (what the detector saw there), the
    prompt filled for that class and camera; search finds it by a word of it; a stored
    event is described again on demand; descriptions switch off at run time."""
    hook = RequestRecorder()
    describe = {
        "provider": "anthropic",
        "kinds": ["line_crossing"],
        "min_interval_s": 0,
        "camera_names": {"0": "the yard"},
        "class_prompts": {"person": "Who is this {label} at {camera}{zone}?"},
        "webhook_url": hook.url,
    }
    with (
        hook,
        RTSPCamera(640, 480, fps=30, path="yard", picture=walking_back_and_forth(person)) as cam,
    ):
        started = vlm_server.start_pipeline(cam.url, crossings_logged(), describe=describe)
        assert started.status_code == 200, started.text
        pipeline_id = started.json()["context"]["pipeline_id"]
        try:
            described = wait_for(
                lambda: [
                    e
                    for e in vlm_server.events(pipeline=pipeline_id, kind="line_crossing")
                    if e["description"]
                ],
                120,
                "a described crossing",
            )
            logged = wait_for(
                lambda: vlm_server.events(pipeline=pipeline_id, kind="event_sink"),
                60,
                "an event sink's event",
            )
            again = vlm_server.post(f"/events/{logged[0]['id']}/describe")
            off = vlm_server.post(
                f"/inference_pipelines/{pipeline_id}/describe", json={"enabled": False}
            )
            report = vlm_server.get(f"/inference_pipelines/{pipeline_id}/status").json()
        finally:
            vlm_server.post(f"/inference_pipelines/{pipeline_id}/terminate")
    event = described[0]
    assert event["description"].startswith("I see ") and "1 person" in event["description"]
    asked = [c for c in provider.calls if c.text == "Who is this person at the yard in counter?"]
    assert asked and asked[0].images[0].shape == (480, 640, 3)
    found = vlm_server.events(pipeline=pipeline_id, q="persons seeing")  # stemmed
    assert event["id"] in {e["id"] for e in found}
    assert vlm_server.events(pipeline=pipeline_id, q="unicorn") == []
    # By meaning: words the description never used ("I see 1 person.") find it.
    nearest = vlm_server.events(pipeline=pipeline_id, about="a pedestrian walking")
    assert event["id"] in {e["id"] for e in nearest}
    assert "person" in nearest[0]["description"]
    assert [e["distance"] for e in nearest] == sorted(e["distance"] for e in nearest)
    alike = vlm_server.events(pipeline=pipeline_id, similar_to=event["id"])
    assert event["id"] not in {e["id"] for e in alike}
    assert again.status_code == 200, again.text
    assert "1 person" in again.json()["description"]
    assert off.json()["descriptions"]["enabled"] is False
    announced = [json.loads(r[3]) for r in hook.requests]
    assert any(a["uid"] and a["description"] == event["description"] for a in announced)
    assert report["report"]["descriptions"]["described"] >= 1


def test_the_review_page_shows_descriptions_and_searches_them(vlm_server, person):
    """In Chromium: a crossing's description on the timeline (it comes after the event, and
    the entry is shown again with it), a search that finds it, one that finds nothing and
    says so, a search by meaning and an event's "Similar" (nearest first, each with its
    distance); a screenshot of each state in tests/artifacts/."""
    describe = {"provider": "anthropic", "kinds": ["line_crossing"], "min_interval_s": 0}
    with (
        RTSPCamera(640, 480, fps=30, path="porch", picture=walking_back_and_forth(person)) as cam,
        chromium() as browser,
    ):
        started = vlm_server.start_pipeline(cam.url, people_counting(), describe=describe)
        assert started.status_code == 200, started.text
        pipeline_id = started.json()["context"]["pipeline_id"]
        try:
            with open_page(browser, vlm_server.url + "/review.html", camera=False) as page:
                own = f"{pipeline_id}#0"  # this test's camera only: other tests' events too
                option = f'#camera option[value="{own}"]'
                page.wait_for_selector(option, state="attached", timeout=WAIT_MS)
                page.select_option("#camera", own)
                page.wait_for_selector("#timeline p.description", timeout=WAIT_MS)
                said = page.locator("#timeline p.description").first.text_content()
                assert "1 person" in said, said
                shot(page, "descriptions")
                page.fill("#search", "unicorn")
                page.press("#search", "Enter")
                page.wait_for_function(
                    "() => document.getElementById('timeline').dataset.empty.includes('unicorn')",
                    timeout=WAIT_MS,
                )
                assert page.locator("#timeline li").count() == 0
                shot(page, "search-nothing")
                page.fill("#search", "persons seeing")
                page.press("#search", "Enter")
                page.wait_for_selector("#timeline p.description", timeout=WAIT_MS)
                texts = page.locator("#timeline li").all_text_contents()
                assert texts and all("person" in t for t in texts), texts
                shot(page, "search")
                page.select_option("#search-by", "about")  # by meaning: no word in common
                page.fill("#search", "a pedestrian")
                page.press("#search", "Enter")
                page.wait_for_selector("#timeline small.distance", timeout=WAIT_MS)
                assert "person" in page.locator("#timeline p.description").first.text_content()
                shot(page, "search-meaning")
                page.locator("#timeline button.similar").first.click()
                page.wait_for_selector("#similar-banner:not([hidden])", timeout=WAIT_MS)
                page.wait_for_function(
                    "() => document.querySelector('#timeline small.distance') || "
                    "document.getElementById('timeline').dataset.empty",
                    timeout=WAIT_MS,
                )
                shot(page, "similar")
                page.click("#similar-clear")
                page.wait_for_selector("#similar-banner", state="hidden", timeout=WAIT_MS)
        finally:
            vlm_server.post(f"/inference_pipelines/{pipeline_id}/terminate")
