"""Notifications verified by a vision-language model first (``verify`` on a webhook, e-mail
or Slack step): the frame the step fired on goes to the provider played on loopback, which
confirms when its detector finds a person; confirmed, the webhook is sent; rejected or
unanswered, it is not; every verdict is recorded as a ``verification`` event with its
reason, and the frame never waits for it."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from streaming.config import Settings
from streaming.errors import WorkflowCompilationError
from streaming.events import EventRecord
from streaming.inference.registry import ModelRegistry
from streaming.settings.language import ProviderSettings, VlmSettings
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState
from tests.conftest import load_photo
from tests.support.webhook import RequestRecorder


class Recorded:
    def __init__(self) -> None:
        self.events: list[EventRecord] = []
        self.changed = threading.Condition()

    def record(self, event: EventRecord) -> None:
        with self.changed:
            self.events.append(event)
            self.changed.notify_all()

    def wait(self, count: int) -> list[EventRecord]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.events) >= count, 60), self.events
            return list(self.events)


def hooked(url: str, **verify) -> dict:
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [
            {
                "type": "roboflow_core/webhook_sink@v1",
                "name": "alert",
                "url": url,
                "json_payload": {"what": "someone at the gate"},
                "cooldown_seconds": 0,
                "verify": {"provider": "local", "prompt": "Is there a person?", **verify},
            }
        ],
        "outputs": [{"type": "JsonField", "name": "alert", "selector": "$steps.alert.*"}],
    }


def run_once(spec: dict, fake, tmp_path, image: np.ndarray, events: Recorded) -> dict:
    local = ProviderSettings(api="openai", base_url=fake.openai_url, model="verify", retries=0)
    settings = Settings(
        models_dir=tmp_path,
        allowed_networks="127.0.0.1/32",
        vlm=VlmSettings(providers={"local": local}),
    )
    registry = ModelRegistry(settings)
    context = BuildContext(registry, settings=settings, events=events, live=True)
    workflow = compile_workflow(parse_spec(spec), context)
    try:
        started = time.monotonic()
        outputs = workflow.run(image, {}, FrameState())["alert"]
        assert time.monotonic() - started < 1.0  # the frame did not wait for the verdict
        events.wait(1)
        return outputs
    finally:
        workflow.close()
        registry.close()


@pytest.fixture(scope="module")
def photo(photos) -> np.ndarray:
    return load_photo(photos, "person.jpg")


def test_a_confirmed_alert_is_sent_and_its_verdict_recorded(vlm_provider, photo, tmp_path):
    events = Recorded()
    with RequestRecorder() as hook:
        outputs = run_once(hooked(hook.url), vlm_provider, tmp_path, photo, events)
        (request,) = hook.wait_requests(1)
    assert outputs["message"] == "Notification waits for the model's verdict"
    assert b"someone at the gate" in request[3]
    (call,) = vlm_provider.calls
    assert call.text.startswith("Is there a person?") and call.images[0].shape == photo.shape
    (event,) = events.events
    assert event.kind == "verification" and event.step == "alert"
    assert event.verdict == {"confirmed": True, "reason": event.description, "sent": True}
    assert "1 person" in event.description


def test_a_rejected_alert_is_not_sent_and_stays_on_record(vlm_provider, tmp_path):
    events = Recorded()
    empty = np.full((480, 640, 3), 90, np.uint8)
    with RequestRecorder() as hook:
        run_once(hooked(hook.url), vlm_provider, tmp_path, empty, events)
        hook_requests = list(hook.requests)
    (event,) = events.events
    assert event.verdict == {"confirmed": False, "reason": "I see nothing.", "sent": False}
    assert hook_requests == []


def test_no_verdict_sends_nothing_and_says_why(vlm_provider, photo, tmp_path):
    vlm_provider.fail_next = [503]
    events = Recorded()
    with RequestRecorder() as hook:
        run_once(hooked(hook.url), vlm_provider, tmp_path, photo, events)
        hook_requests = list(hook.requests)
    (event,) = events.events
    assert event.verdict["confirmed"] is None and event.verdict["sent"] is False
    assert "HTTP 503" in event.verdict["reason"]
    assert hook_requests == []


@pytest.mark.parametrize(
    ("verify", "message"),
    [
        ({"provider": "nobody"}, "VISIONSTREAM_VLM_PROVIDERS names: local"),
        ({"provider": "local", "colour": "red"}, "verify: colour: Extra inputs"),
    ],
)
def test_a_verify_that_names_no_provider_or_an_unknown_field_is_refused(
    vlm_provider, tmp_path, verify, message
):
    spec = hooked("http://127.0.0.1:9/hook")
    spec["steps"][0]["verify"] = verify
    local = ProviderSettings(api="openai", base_url=vlm_provider.openai_url)
    settings = Settings(models_dir=tmp_path, vlm=VlmSettings(providers={"local": local}))
    with pytest.raises(WorkflowCompilationError, match=message):
        compile_workflow(parse_spec(spec), BuildContext(ModelRegistry(settings), settings=settings))
