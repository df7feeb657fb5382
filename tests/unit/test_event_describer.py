"""Event descriptions (``streaming.events.describer``) against the provider played on
loopback and a real event store: the frame an event happened on is what the model sees, the
prompt is the class's or the camera's with its placeholders filled, the answer lands on the
stored event (a summary's fields typed), filters and the per-camera interval hold, and a
provider that fails or is away costs no event."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streaming.egress import EgressPolicy
from streaming.events import EventRecord
from streaming.events.describer import DescribeConfiguration, EventDescriber
from streaming.events.store import EventFilter, EventStore
from streaming.events.writer import EventWriter
from streaming.language import Providers
from streaming.settings.language import ProviderSettings, VlmSettings
from tests.conftest import load_photo
from tests.support.server import wait_for
from tests.support.webhook import RequestRecorder

T0 = 1_790_000_000.0


@pytest.fixture
def writer(tmp_path):
    store = EventStore(f"sqlite:///{tmp_path / 'events.sqlite3'}")
    writer = EventWriter(store, linger_s=0.0)
    yield writer
    writer.close()
    store.close()


def describer_for(fake, writer, model: str = "describe", **config) -> EventDescriber:
    local = ProviderSettings(api="openai", base_url=fake.openai_url, model=model, retries=0)
    providers = Providers(
        VlmSettings(providers={"local": local}), pin=EgressPolicy(["127.0.0.1/32"]).pin
    )
    settings = DescribeConfiguration(provider="local", min_interval_s=0, **config)
    return EventDescriber(settings, providers, writer, write_timeout_s=30)


def crossing(source: str = "0", class_name: str = "person", **fields) -> EventRecord:
    return EventRecord(
        "line_crossing", "gate", source, "counter", at=T0, class_name=class_name, **fields
    )


def stored(writer: EventWriter, uid: str) -> dict:
    def row() -> dict | None:
        writer.flush(10)
        rows = writer.store.page(EventFilter(pipeline="gate"), limit=100).rows
        found = [r for r in rows if r["uid"] == uid and (r["description"] or r["summary"])]
        return found[0] if found else None

    return wait_for(row, 60, f"event {uid} described")


def described_once(describer: EventDescriber, writer: EventWriter, photo: np.ndarray) -> dict:
    """One crossing recorded through the describer, its frame done: its stored row once
    described (the describer closed after)."""
    try:
        event = crossing()
        describer.wrap(writer).record(event)
        describer.frame_done("0", photo)
        return stored(writer, event.uid)
    finally:
        describer.close()


@pytest.fixture(scope="module")
def photo(photos) -> np.ndarray:
    return load_photo(photos, "person.jpg")


def test_an_event_is_described_from_the_frame_it_happened_on(vlm_provider, writer, photo):
    describer = describer_for(
        vlm_provider,
        writer,
        camera_names={"0": "the gate"},
        class_prompts={"person": "Who is the {label} at {camera}{zone}?"},
    )
    row = described_once(describer, writer, photo)
    (call,) = vlm_provider.calls
    assert call.text == "Who is the person at the gate in counter?"
    assert call.images[0].shape == photo.shape  # the frame itself
    assert row["description"].startswith("I see ") and "1 person" in row["description"]
    assert describer.stats()["described"] == 1


def test_an_alert_summary_is_typed_and_bounded(vlm_provider, writer, photo):
    vlm_provider.answer = lambda script, images: (
        '```json\n{"title": "Visitor", "summary": "A person at the door.", '
        '"threat_level": 7, "confidence": 1.5}\n```'
    )
    describer = describer_for(vlm_provider, writer, summary=True)
    row = described_once(describer, writer, photo)
    assert row["summary"] == {
        "title": "Visitor",
        "summary": "A person at the door.",
        "threat_level": 2,
        "confidence": 1.0,
    }
    assert row["description"] == "A person at the door."
    body = vlm_provider.calls[0].body
    assert body["response_format"]["json_schema"]["schema"]["required"] == [
        "title",
        "summary",
        "threat_level",
        "confidence",
    ]


def test_filters_the_interval_and_the_switch_choose_what_is_described(vlm_provider, writer, photo):
    describer = describer_for(
        vlm_provider, writer, classes=["person"], zones=["counter"], kinds=["line_crossing"]
    )
    describer.config.min_interval_s = 3600.0  # one per camera per hour, from here on
    assert describer.wants(crossing(source="0"))
    assert not describer.wants(crossing(source="0"))  # its camera's interval
    assert describer.wants(crossing(source="1"))  # another camera's own interval
    assert not describer.wants(crossing(source="2", class_name="car"))
    assert not describer.wants(
        EventRecord("zone_exit", "gate", "3", "counter", class_name="person")
    )
    assert not describer.wants(
        EventRecord("line_crossing", "gate", "4", "other", class_name="person")
    )
    describer.enabled = False
    assert not describer.wants(crossing(source="5"))
    describer.close()
    assert vlm_provider.calls == []


def test_a_provider_that_fails_loses_no_event_and_says_why(vlm_provider, writer, photo):
    vlm_provider.fail_next = [503]
    describer = describer_for(vlm_provider, writer)
    row = described_once(describer, writer, photo)
    assert row["description"] is None
    assert "HTTP 503" in row["summary"]["error"]
    assert describer.stats()["failed"] == 1
    assert writer.store.count() == 1  # the event itself, stored as ever


def test_events_past_the_queue_are_dropped_and_counted_never_waited_for(
    vlm_provider, writer, photo
):
    """``queue``: while the model is hung, a burst of events waits at most that many deep;
    the oldest go, counted, and recording an event never blocks."""
    vlm_provider.hang()
    describer = describer_for(vlm_provider, writer, queue=2)
    events = describer.wrap(writer)
    try:
        events.record(crossing(source="0"))
        describer.frame_done("0", photo)
        vlm_provider.wait_calls(1)  # the first is with the model, which holds it
        for source in range(1, 6):
            events.record(crossing(source=str(source)))
            describer.frame_done(str(source), photo)
        assert describer.stats()["dropped"] == 3  # of the five after it, two wait
        writer.flush(30)
        assert writer.store.count() == 6  # every event stored all the same
    finally:
        vlm_provider.release()
        describer.close()


def test_a_described_event_is_announced_to_the_webhook(vlm_provider, writer, photo):
    with RequestRecorder() as hook:
        describer = describer_for(vlm_provider, writer, webhook_url=hook.url)
        row = described_once(describer, writer, photo)
        (request,) = hook.wait_requests(1)
    method, _, headers, body = request
    sent = json.loads(body)
    assert method == "POST" and headers["content-type"] == "application/json"
    assert sent["type"] == "event_described" and sent["uid"] == row["uid"]
    assert sent["description"] == row["description"] and sent["class_name"] == "person"
