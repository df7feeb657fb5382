"""``/events`` in the whole app, in this process: its pages, filters, times, summary and
evidence (range requests), and a clear answer for each bad request and for a database that
cannot be reached."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import cv2
import httpx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.config import Settings
from streaming.errors import InvalidRequest
from streaming.events import EventRecord
from streaming.events.vectors import meaning
from streaming.server.app import create_app
from streaming.server.routes.events import milliseconds
from streaming.settings.language import ProviderSettings, VlmSettings
from tests.support.media import write_clip
from tests.support.onnx_models import YOLO_ROWS, model_directory
from tests.support.server import free_port

WAIT_S = 60.0
T0 = 1_790_000_000.0  # 2026-09-21T14:13:20Z


@asynccontextmanager
async def app_client(tmp_path, **settings) -> AsyncIterator[tuple[httpx.AsyncClient, object]]:
    model_directory(tmp_path / "models", "fixed", [("output", YOLO_ROWS)], decoder="yolov3")
    fields = {
        "models_dir": tmp_path / "models",
        "default_model": "fixed",
        "prepare_default_model": False,
        "inference_backend": "onnxruntime",
        "upload_dir": tmp_path / "uploads",
        "sink_dir": tmp_path / "sinks",
        "data_dir": tmp_path / "data",
        **settings,
    }
    app = create_app(Settings(**fields), install_rtc=False)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            yield http, app.state.server


@pytest.fixture
def evidence(tmp_path):
    """A snapshot and a clip where an event sink would have written them."""
    door = tmp_path / "sinks" / "door"
    door.mkdir(parents=True)
    image = np.full((48, 64, 3), 90, np.uint8)
    cv2.imwrite(str(door / "e1.jpg"), image)
    write_clip(door / "e1.mp4", [image] * 30)
    return door


async def test_events_are_listed_in_pages_filtered_and_summarised(tmp_path, evidence):
    async with app_client(tmp_path) as (http, state):
        records = [
            EventRecord("line_crossing", "p1", "0", "counter", at=T0 + i, direction="in",
                        class_name="person", tracker_id=i, payload={"count_in": i + 1})
            for i in range(5)
        ] + [
            EventRecord("event_sink", "p1", "0", "log", at=T0 + 10, payload={"event_id": "e1"},
                        snapshot="door/e1.jpg", clip="door/e1.mp4"),
            EventRecord("source_state", "p2", "0", at=T0 + 20,
                        payload={"previous_state": "RUNNING", "new_state": "RECONNECTING"}),
        ]  # fmt: skip
        for record in records:
            state.events.record(record)
        assert await asyncio.to_thread(state.events.flush, WAIT_S)

        newest = (await http.get("/events", params={"limit": 2})).json()
        assert [e["kind"] for e in newest["events"]] == ["source_state", "event_sink"]
        assert newest["events"][0]["time"] == "2026-09-21T14:13:40.000+00:00"
        seen = [e["id"] for e in newest["events"]]
        cursor = newest["next_cursor"]
        while cursor:
            page = (await http.get("/events", params={"limit": 2, "cursor": cursor})).json()
            seen += [e["id"] for e in page["events"]]
            cursor = page["next_cursor"]
        assert len(seen) == len(set(seen)) == 7

        crossing = await http.get("/events", params={"kind": "line_crossing", "order": "asc"})
        first = crossing.json()["events"][0]
        assert first["direction"] == "in" and first["class_name"] == "person"
        assert first["tracker_id"] == 0 and first["payload"] == {"count_in": 1}
        assert first["snapshot_url"] is None
        window = {"since": "2026-09-21T14:13:22Z", "until": str(T0 + 4)}
        timed = (await http.get("/events", params=window)).json()["events"]
        assert [e["tracker_id"] for e in timed] == [3, 2]

        summary = (await http.get("/events/summary", params={"bucket": "minute"})).json()
        assert summary["bucket_seconds"] == 60
        counts = {(b["pipeline"], b["step"], b["kind"]): b["count"] for b in summary["buckets"]}
        assert counts == {
            ("p1", "counter", "line_crossing"): 5,
            ("p1", "log", "event_sink"): 1,
            ("p2", None, "source_state"): 1,
        }
        assert summary["buckets"][0]["start"] == "2026-09-21T14:13:00.000+00:00"

        sink_event = next(e for e in newest["events"] if e["kind"] == "event_sink")
        one = (await http.get(f"/events/{sink_event['id']}")).json()
        assert one == sink_event
        snapshot = await http.get(one["snapshot_url"])
        assert snapshot.headers["content-type"] == "image/jpeg"
        assert snapshot.content == (evidence / "e1.jpg").read_bytes()
        whole = (evidence / "e1.mp4").read_bytes()
        part = await http.get(one["clip_url"], headers={"Range": "bytes=100-199"})
        assert part.status_code == 206 and part.content == whole[100:200]
        assert part.headers["content-range"] == f"bytes 100-199/{len(whole)}"
        assert part.headers["accept-ranges"] == "bytes"

        (evidence / "e1.mp4").unlink()  # its own retention removed it
        gone = await http.get(one["clip_url"])
        assert gone.status_code == 404 and "gone" in gone.json()["message"]


@pytest.mark.parametrize(
    ("path", "params", "status", "words"),
    [
        ("/events", {"since": "yesterday"}, 400, "since must be ISO 8601"),
        ("/events", {"until": "1e300"}, 400, "until is out of range"),
        ("/events", {"until": "nan"}, 400, "until is out of range"),
        ("/events", {"cursor": "not-ours"}, 400, "was not given by this server"),
        ("/events", {"limit": "0"}, 422, ""),
        ("/events", {"order": "sideways"}, 422, ""),
        ("/events/summary", {"bucket": "week"}, 422, ""),
        ("/events/12345", {}, 404, "no event 12345"),
        ("/events/-1", {}, 404, "no event -1"),
        ("/events/99999999999999999999999", {}, 404, "no event"),
        ("/events/abc", {}, 422, ""),
        ("/events/12345/clip", {}, 404, "no event 12345"),
    ],
)
async def test_each_bad_request_is_answered_with_what_is_wrong(
    tmp_path, path, params, status, words
):
    async with app_client(tmp_path) as (http, _state):
        response = await http.get(path, params=params)
        assert response.status_code == status, response.text
        assert words in response.json()["message"]


async def test_events_are_found_by_meaning_and_by_likeness(tmp_path, vlm_provider):
    """``about`` and ``similar_to`` (``VISIONSTREAM_VLM_EMBEDDINGS``): a word no description
    used finds the event whose description means it, nearest first; an event described
    before the server made vectors gets one when first compared; filters narrow."""
    vlm = VlmSettings(
        providers={"local": ProviderSettings(base_url=vlm_provider.openai_url)},
        embeddings="local:embed",
    )
    async with app_client(tmp_path, vlm=vlm, allowed_networks="127.0.0.1/32") as (http, state):
        said = {
            "a": ("person", "A man in a red coat walks to the door."),
            "b": ("car", "A white van parks by the gate."),
            "c": ("dog", "A small animal runs across the lawn."),
            "d": ("person", None),
        }
        for i, (uid, (name, _)) in enumerate(said.items()):
            state.events.record(
                EventRecord(
                    "line_crossing", "yard", "0", "gate", at=T0 + i, uid=uid, class_name=name
                )
            )
        assert await asyncio.to_thread(state.events.flush, WAIT_S)
        store, embedder = state.events.store, state.language.embedder()
        for uid in ("a", "b"):
            name, text = said[uid]
            vector = embedder.embed(meaning(text, name, "line_crossing"))
            assert store.annotate(uid, {"description": text}, vector) == 1
        assert store.annotate("c", {"description": said["c"][1]}) == 1  # no vector yet
        listed = (await http.get("/events")).json()["events"]
        ids = {uid: e["id"] for uid, e in zip("dcba", listed, strict=True)}  # newest first

        async def nearest(**params) -> list[tuple[str, float]]:
            response = await http.get("/events", params=params)
            assert response.status_code == 200, response.text
            assert response.json()["next_cursor"] is None
            return [(e["class_name"], e["distance"]) for e in response.json()["events"]]

        found = await nearest(about="a pedestrian")
        assert [name for name, _ in found] == ["person", "car"]  # c has no vector yet
        assert found[0][1] < found[1][1]
        assert await nearest(about="a pedestrian", class_name="car") == [("car", found[1][1])]
        alike = await nearest(similar_to=ids["c"])  # made now, and stored
        assert [name for name, _ in alike] == ["person", "car"]
        assert [name for name, _ in await nearest(about="pets", limit=1)] == ["dog"]

        for params, status, words in (
            ({"similar_to": ids["d"]}, 409, "no description yet"),
            ({"about": "x", "cursor": "abc"}, 400, "no cursor"),
            ({"about": "x", "similar_to": 1}, 400, "one of them"),
            ({"about": "  "}, 400, "empty"),
            ({"similar_to": 2**40}, 404, "no event"),
        ):
            response = await http.get("/events", params=params)
            assert response.status_code == status and words in response.text, response.text
        vlm_provider.fail_next = [400]
        response = await http.get("/events", params={"about": "someone"})
        assert response.status_code == 502 and "HTTP 400" in response.json()["message"]


async def test_search_by_meaning_without_an_embeddings_model_names_the_setting(tmp_path):
    async with app_client(tmp_path) as (http, _state):
        response = await http.get("/events", params={"about": "someone at the door"})
        assert response.status_code == 400
        assert "VISIONSTREAM_VLM_EMBEDDINGS" in response.json()["message"]


async def test_an_event_without_evidence_says_so(tmp_path):
    async with app_client(tmp_path) as (http, state):
        state.events.record(EventRecord("zone_entry", "p", "0", "zone"))
        assert await asyncio.to_thread(state.events.flush, WAIT_S)
        (event,) = (await http.get("/events")).json()["events"]
        for what in ("snapshot", "clip"):
            response = await http.get(f"/events/{event['id']}/{what}")
            assert response.status_code == 404
            assert response.json()["message"].startswith(f"event {event['id']} has no {what}")


async def test_an_unreachable_database_is_a_503_that_names_it_without_its_password(tmp_path):
    url = f"postgresql://events:s3cret@127.0.0.1:{free_port()}/events"
    async with app_client(tmp_path, events_url=url) as (http, state):
        state.events.record(EventRecord("zone_entry", "p", "0", "zone"))  # waits, never blocks
        response = await http.get("/events")
        assert response.status_code == 503, response.text
        body = response.json()
        assert body["code"] == "store_unavailable" and "127.0.0.1" in body["message"]
        assert "s3cret" not in response.text
        health = (await http.get("/healthz")).json()["events"]
        assert health["database"] == f"postgresql+psycopg://events:***@{url.split('@')[1]}"
        assert health["queued"] == 1


async def test_a_server_that_keeps_no_events_says_so(tmp_path):
    async with app_client(tmp_path, store_events=False) as (http, _state):
        response = await http.get("/events")
        assert response.status_code == 404
        assert "VISIONSTREAM_STORE_EVENTS" in response.json()["message"]


@given(st.text(max_size=64))
def test_a_time_parameter_is_parsed_or_refused_by_name(text):
    try:
        parsed = milliseconds("since", text)
    except InvalidRequest as exc:
        assert str(exc).startswith("since ")
    else:
        assert isinstance(parsed, int) and -1e14 < parsed < 1e14
