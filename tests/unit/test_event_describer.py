"""Event descriptions (``streaming.events.describer``) against the provider played on
loopback and a real event store: the frame an event happened on is what the model sees, the
prompt is the class's or the camera's with its placeholders filled, the answer lands on the
stored event (a summary's fields typed), filters and the per-camera interval hold, and a
provider that fails or is away costs no event."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from sinks.email import SmtpServer
from streaming.egress import EgressPolicy
from streaming.events import EventRecord
from streaming.events.announcing import Mail
from streaming.events.describer import DescribeConfiguration, EventDescriber
from streaming.events.store import EventFilter, EventStore
from streaming.events.writer import EventWriter
from streaming.language import Providers
from streaming.language.embeddings import Embedding, unit
from streaming.protocol.workflows import people_counting
from streaming.settings.language import ProviderSettings, VlmSettings
from streaming.settings.notifications import SmtpSettings
from tests.conftest import load_photo
from tests.support.mqtt import Subscriber, mosquitto
from tests.support.server import wait_for
from tests.support.smtp import PASSWORD, USER, MailServer
from tests.support.vlm_provider import sense
from tests.support.webhook import RequestRecorder
from tests.unit.test_events_api import app_client

T0 = 1_790_000_000.0


@pytest.fixture
def writer(tmp_path):
    store = EventStore(f"sqlite:///{tmp_path / 'events.sqlite3'}")
    writer = EventWriter(store, linger_s=0.0)
    yield writer
    writer.close()
    store.close()


def describer_for(
    fake,
    writer,
    model: str = "describe",
    embeddings: str | None = None,
    mail: Mail | None = None,
    **config,
) -> EventDescriber:
    local = ProviderSettings(api="openai", base_url=fake.openai_url, model=model, retries=0)
    providers = Providers(
        VlmSettings(providers={"local": local}, embeddings=embeddings),
        pin=EgressPolicy(["127.0.0.1/32"]).pin,
    )
    settings = DescribeConfiguration(provider="local", min_interval_s=0, **config)
    return EventDescriber(
        settings,
        providers,
        writer,
        write_timeout_s=30,
        pin=EgressPolicy(["127.0.0.1/32"]).pin,
        pipeline_id="gate",
        mail=mail,
    )


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


def test_mqtt_gets_each_description_and_switches_descriptions_at_run_time(
    vlm_provider, writer, photo, tmp_path
):
    """Frigate's way: the described event at ``<topic>/event``, the switch's state retained
    at ``<topic>/state``, and ``OFF``/``ON`` at ``<topic>/set`` switch descriptions; the
    API's switch is said there too."""
    with mosquitto(tmp_path) as broker:
        topic = "visionstream/gate/descriptions"
        watcher = Subscriber(broker, f"{topic}/#")
        describer = describer_for(vlm_provider, writer, mqtt_url=broker)
        try:
            describer.open()
            watcher.wait_for(lambda seen: seen.get(f"{topic}/state") == "ON")
            event = crossing()
            describer.wrap(writer).record(event)
            describer.frame_done("0", photo)
            seen = watcher.wait_for(lambda seen: f"{topic}/event" in seen)
            sent = json.loads(seen[f"{topic}/event"])
            assert sent["uid"] == event.uid and "1 person" in sent["description"]
            switch = Subscriber(broker, "unused/#")
            switch.publish(f"{topic}/set", "OFF")
            watcher.wait_for(lambda seen: seen.get(f"{topic}/state") == "OFF")
            assert describer.enabled is False and not describer.wants(crossing())
            switch.publish(f"{topic}/set", "nonsense")  # neither: ignored
            switch.publish(f"{topic}/set", "on")
            watcher.wait_for(lambda seen: seen.get(f"{topic}/state") == "ON")
            assert describer.enabled is True
            describer.switch(False)  # the API's switch
            watcher.wait_for(lambda seen: seen.get(f"{topic}/state") == "OFF")
            switch.close()
        finally:
            describer.close()
            watcher.close()


def test_a_description_is_mailed_through_the_relay_with_its_frame_once_per_interval(
    vlm_provider, writer, photo, tmp_path
):
    """``email_to``: the relay's message says the description, what, where and when, with
    the frame the model saw attached; the next description within the relay's interval is
    not mailed (counted)."""
    mail_server = MailServer(tmp_path, "starttls")
    relay = SmtpServer(
        "127.0.0.1",
        mail_server.port,
        username=USER,
        password=PASSWORD,
        tls="starttls",
        ca_file=mail_server.ca_file,
    )
    mail = Mail(relay, USER, ["ops@example.test"], min_interval_s=3600)
    describer = describer_for(vlm_provider, writer, mail=mail)
    try:
        for _ in range(2):
            event = crossing()
            describer.wrap(writer).record(event)
            describer.frame_done("0", photo)
            row = stored(writer, event.uid)
        (received,) = mail_server.wait_for("person seen by pipeline gate")
        wait_for(lambda: describer.announcer.mails_skipped == 1, 60, "the second one skipped")
    finally:
        describer.close()
        mail_server.stop()
    message = received.message
    assert received.recipients == ["ops@example.test"]
    text = message.get_body(("plain",)).get_content()
    assert row["description"] in text and "line crossing, person in counter" in text
    (attached,) = list(message.iter_attachments())
    frame = cv2.imdecode(np.frombuffer(attached.get_content(), np.uint8), cv2.IMREAD_COLOR)
    assert frame.shape == photo.shape
    assert len(mail_server.with_subject("person seen by pipeline gate")) == 1


def test_a_description_is_stored_with_its_vector_and_found_by_meaning(vlm_provider, writer, photo):
    """With ``VISIONSTREAM_VLM_EMBEDDINGS``, the description and its vector are written in one
    transaction: a search by a word the description never used finds the event; an
    embeddings model that fails leaves the description stored, searchable by its words."""
    describer = describer_for(vlm_provider, writer, embeddings="local:embed")
    row = described_once(describer, writer, photo)
    assert "1 person" in row["description"]  # what the detector saw in the frame
    assert vlm_provider.embedded == [f"{row['description']}\nperson (line crossing)"]
    asked = Embedding("embed", unit(sense("a pedestrian")))  # the query, as the model makes it
    nearest = writer.store.nearest(EventFilter(pipeline="gate"), asked, 5)
    assert [r["uid"] for r in nearest] == [row["uid"]]
    broken = describer_for(vlm_provider, writer, embeddings="local:broken-embeddings")
    row = described_once(broken, writer, photo)
    assert "1 person" in row["description"]
    assert writer.store.embedding_of(row["id"], "broken-embeddings") is None
    assert [r["uid"] for r in writer.store.page(EventFilter(text="person"), limit=5).rows]


@pytest.mark.parametrize(
    ("describe", "smtp", "status", "words"),
    [
        ({"email_to": ["ops@example.test"]}, {}, 400, "VISIONSTREAM_SMTP_HOST"),
        (
            {"email_to": ["someone@elsewhere.test"]},
            {
                "host": "127.0.0.1",
                "sender": "cam@example.test",
                "allowed_recipients": ["@example.test"],
            },
            400,
            "VISIONSTREAM_SMTP_ALLOWED_RECIPIENTS",
        ),
        ({"mqtt_url": "mqtt://127.0.0.2:1883"}, {}, 400, "VISIONSTREAM_ALLOWED_NETWORKS"),
        ({"mqtt_url": "http://127.0.0.1:1883"}, {}, 422, "describe.mqtt_url"),
        ({"mqtt_topic": "a/#"}, {}, 422, "describe.mqtt_topic"),
    ],
)
async def test_where_descriptions_go_is_checked_when_the_pipeline_starts(
    tmp_path, describe, smtp, status, words
):
    """A relay that is not set or does not send there, a broker outside the egress policy, a
    URL or topic of the wrong shape: a 400 naming the setting, before anything connects."""
    vlm = VlmSettings(providers={"local": ProviderSettings(base_url="http://127.0.0.1:9/v1")})
    async with app_client(
        # 127.0.0.2 is loopback, yet outside this allow-list: refused before any connection.
        tmp_path,
        vlm=vlm,
        smtp=SmtpSettings(**smtp),
        allowed_networks="127.0.0.1/32",
    ) as (http, _state):
        response = await http.post(
            "/inference_pipelines/initialise",
            json={
                "video_configuration": {
                    "type": "VideoConfiguration",
                    "video_reference": "rtsp://127.0.0.1:9/none",
                },
                "processing_configuration": {
                    "type": "WorkflowConfiguration",
                    "workflow_specification": people_counting(),
                },
                "describe": {"provider": "local", **describe},
            },
        )
    assert response.status_code == status, response.text
    assert words in response.json()["message"]
