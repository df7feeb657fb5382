"""The event store's routes: ``GET /events`` (filters, cursor pages, newest first; or by
meaning, nearest first: the words or an event's description made a vector by the server's
embeddings model, ``VISIONSTREAM_VLM_EMBEDDINGS``, off the event loop),
``GET /events/summary`` (counts per time bucket, for charts), ``GET /events/{id}`` and its
evidence, ``/events/{id}/snapshot`` and ``/events/{id}/clip``, served with HTTP range
requests so that a browser's video element can seek in a clip.

Every replica of a cluster answers for all of it: the rows are in the shared database, the
files in the shared evidence directory (``VISIONSTREAM_SINK_DIR``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Depends, Query
from fastapi.responses import FileResponse
from sqlalchemy.exc import SQLAlchemyError

from ...errors import (
    Conflict,
    InvalidRequest,
    ModelProviderFailed,
    NotFound,
    StoreUnavailable,
)
from ...events.store import BUCKETS, EventFilter, EventStore, InvalidCursor
from ...events.vectors import embedding_for, meaning
from ...language import ProviderError
from ...language.embeddings import Embedder, Embedding
from ...pipelines.recording import recording_directory
from ..docs import ERROR_RESPONSES
from ..exports import export_file
from ..http import AUTHENTICATED
from ..state import ServerState, get_state

__all__ = ["event_body", "milliseconds", "read_store", "router"]

router = APIRouter(
    prefix="/events", responses=ERROR_RESPONSES, dependencies=[AUTHENTICATED], tags=["events"]
)

T = TypeVar("T")

_MAX_SUMMARY_ROWS = 20_000
CLIP_AROUND_S = 5.0
"""An event's clip from its source's recording: this long before and after it."""
_TEXT = Annotated[str | None, Query(max_length=256)]
_TIME = Annotated[
    str | None,
    Query(
        max_length=64,
        description="ISO 8601 (UTC unless it says otherwise) or seconds since the epoch",
    ),
]


def _store(state: ServerState) -> EventStore:
    if state.events is None:
        raise NotFound("this server keeps no events (VISIONSTREAM_STORE_EVENTS is false)")
    return state.events.store


async def read_store(store: EventStore, read: Callable[[], T]) -> T:
    """``read`` on a thread, after the schema is in place; a database that cannot be
    reached is a 503 that names it (password masked), a model provider that fails (a
    search's embedding) a 502."""

    def run() -> T:
        store.migrate()
        return read()

    try:
        return await asyncio.to_thread(run)
    except ProviderError as exc:
        raise ModelProviderFailed(f"the embeddings model did not answer: {exc}") from None
    except SQLAlchemyError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StoreUnavailable(f"the event store {store.shown} is unreachable: {first}") from exc


def milliseconds(name: str, value: str | None) -> int | None:
    """A time query parameter (ISO 8601, UTC unless it says; or epoch seconds) in ms."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidRequest(
                f"{name} must be ISO 8601 or seconds since the epoch, got {value!r}"
            ) from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        seconds = stamp.timestamp()
    if not -1e11 < seconds < 1e11:  # NaN fails too
        raise InvalidRequest(f"{name} is out of range: {value!r}")
    return round(seconds * 1000)


def _filter(
    pipeline: _TEXT = None,
    source: _TEXT = None,
    kind: _TEXT = None,
    step: _TEXT = None,
    class_name: _TEXT = None,
    direction: _TEXT = None,
    since: _TIME = None,
    until: _TIME = None,
    q: Annotated[
        str | None,
        Query(
            max_length=256,
            description="words every event found holds in its description, class, kind or "
            "pipeline (stemmed: 'cars' finds 'car')",
        ),
    ] = None,
) -> EventFilter:
    return EventFilter(
        pipeline,
        source,
        kind,
        step,
        class_name,
        direction,
        milliseconds("since", since),
        milliseconds("until", until),
        q,
    )


def _embedder(state: ServerState) -> Embedder:
    try:
        embedder = state.language.embedder() if state.language is not None else None
    except ProviderError as exc:
        raise InvalidRequest(f"VISIONSTREAM_VLM_EMBEDDINGS: {exc}") from None
    if embedder is None:
        raise InvalidRequest(
            "search by meaning needs an embeddings model: set VISIONSTREAM_VLM_EMBEDDINGS to a "
            "provider of VISIONSTREAM_VLM_PROVIDERS (and its model), e.g. ollama:nomic-embed-text"
        )
    return embedder


async def nearest_events(
    state: ServerState,
    store: EventStore,
    where: EventFilter,
    about: str | None,
    similar_to: int | None,
    limit: int,
) -> list[dict[str, Any]]:
    """The described events (of ``where``) nearest ``about`` or the event ``similar_to``
    (which is not among them), nearest first, each with its ``distance``."""
    embedder = _embedder(state)
    most = state.settings.events_search_max_compared
    if about is not None:
        if not about.strip():
            raise InvalidRequest("about is empty: give words to search by")
        embedding = await read_store(store, lambda: embedder.embed(about))
        return await read_store(store, lambda: store.nearest(where, embedding, limit, most=most))
    assert similar_to is not None
    embedding = await read_store(store, lambda: _of_event(store, embedder, similar_to))
    found = await read_store(store, lambda: store.nearest(where, embedding, limit + 1, most=most))
    return [row for row in found if row["id"] != similar_to][:limit]


def _of_event(store: EventStore, embedder: Embedder, event_id: int) -> Embedding:
    """The event's vector: stored, or made now from its description (and stored)."""
    row = store.get(event_id)
    if row is None:
        raise NotFound(f"no event {event_id} (it may have passed its retention)")
    found = store.embedding_of(event_id, embedder.model)
    if found is not None:
        return found
    if not row.get("description"):
        raise Conflict(f"event {event_id} has no description yet: nothing to compare it by")
    made = embedder.embed(meaning(row["description"], row["class_name"], row["kind"]))
    store.embed(event_id, made)
    return made


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def event_body(row: dict[str, Any], sink_dir: Path) -> dict[str, Any]:
    """An event as the API shows it. ``clip_url`` is given for an event with a clip of its
    own, or whose source is recorded (the recording around it is its clip)."""
    event_id = row["id"]
    recorded = row["clip"] is not None or _recording_of(row, sink_dir) is not None
    return {
        "id": event_id,
        "time": _iso(row["at_ms"]),
        "timestamp": row["at_ms"] / 1000,
        "pipeline": row["pipeline"],
        "source": row["source"],
        "kind": row["kind"],
        "step": row["step"],
        "direction": row["direction"],
        "class_name": row["class_name"],
        "tracker_id": row["tracker_id"],
        "payload": row["payload"],
        "snapshot_url": f"/events/{event_id}/snapshot" if row["snapshot"] else None,
        "clip_url": f"/events/{event_id}/clip" if recorded else None,
        "description": row.get("description"),
        "summary": row.get("summary"),
        "verdict": row.get("verdict"),
    }


@router.get("")
async def list_events(
    where: Annotated[EventFilter, Depends(_filter)],
    state: Annotated[ServerState, Depends(get_state)],
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(max_length=128)] = None,
    order: Literal["desc", "asc"] = "desc",
    about: Annotated[
        str | None,
        Query(
            max_length=256,
            description="search by meaning: the events whose descriptions are nearest these "
            "words ('someone at the door' finds 'a man rings the bell'), nearest first; needs "
            "VISIONSTREAM_VLM_EMBEDDINGS",
        ),
    ] = None,
    similar_to: Annotated[
        int | None,
        Query(
            ge=1,
            lt=2**63,
            description="the events whose descriptions are nearest this event's, nearest "
            "first; needs VISIONSTREAM_VLM_EMBEDDINGS",
        ),
    ] = None,
) -> dict:
    """Events, newest first (``order=asc``: oldest first), ``limit`` per page; pass
    ``next_cursor`` back as ``cursor`` for the next page (the same filters). With ``about``
    or ``similar_to``, one page (at most 100) of the described events nearest it, each with
    its cosine ``distance`` (0 to 2), the other filters applied."""
    store = _store(state)
    if about is not None or similar_to is not None:
        if cursor is not None or (about is not None and similar_to is not None):
            raise InvalidRequest(
                "a search by meaning (about or similar_to, one of them) is one page, nearest "
                "first: it takes no cursor"
            )
        found = await nearest_events(state, store, where, about, similar_to, min(limit, 100))
        return {
            "events": [
                event_body(row, state.settings.sink_dir) | {"distance": round(row["distance"], 4)}
                for row in found
            ],
            "next_cursor": None,
        }
    try:
        page = await read_store(
            store, lambda: store.page(where, limit=limit, cursor=cursor, order=order)
        )
    except InvalidCursor as exc:
        raise InvalidRequest(str(exc)) from None
    return {
        "events": [event_body(row, state.settings.sink_dir) for row in page.rows],
        "next_cursor": page.next_cursor,
    }


@router.get("/summary")
async def summary(
    where: Annotated[EventFilter, Depends(_filter)],
    state: Annotated[ServerState, Depends(get_state)],
    bucket: Literal["minute", "hour", "day"] = "hour",
) -> dict:
    """Counts of events per ``bucket`` (UTC) per pipeline, source, step, kind and direction,
    oldest bucket first."""
    store = _store(state)
    rows = await read_store(store, lambda: store.summary(where, bucket))
    if len(rows) > _MAX_SUMMARY_ROWS:
        raise InvalidRequest(
            f"the summary has more than {_MAX_SUMMARY_ROWS} rows: narrow it (since, until, "
            "pipeline) or take a wider bucket"
        )
    return {
        "bucket": bucket,
        "bucket_seconds": BUCKETS[bucket] // 1000,
        "buckets": [{"start": _iso(row.pop("start_ms")), **row} for row in rows],
    }


async def _row(state: ServerState, event_id: int) -> dict[str, Any]:
    store = _store(state)
    row = await read_store(store, lambda: store.get(event_id))
    if row is None:
        raise NotFound(f"no event {event_id} (it may have passed its retention)")
    return row


@router.get("/{event_id}")
async def get_event(event_id: int, state: Annotated[ServerState, Depends(get_state)]) -> dict:
    """One stored event: its kind, time, pipeline, source, zone and detections."""
    return event_body(await _row(state, _checked_id(event_id)), state.settings.sink_dir)


def _checked_id(event_id: int) -> int:
    if not 1 <= event_id < 2**63:
        raise NotFound(f"no event {event_id}")
    return event_id


def _evidence_file(state: ServerState, row: dict[str, Any], what: str) -> Path:
    relative = row[what]
    if not relative:
        raise NotFound(f"event {row['id']} has no {what}")
    root = state.settings.sink_dir.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise NotFound(f"the {what} of event {row['id']} is gone (evidence retention)")
    return path


def _evidence(state: ServerState, row: dict[str, Any], what: str) -> FileResponse:
    path = _evidence_file(state, row, what)
    media = "image/jpeg" if what == "snapshot" else "video/mp4"
    return FileResponse(path, media_type=media, filename=path.name)


@router.post("/{event_id}/describe")
async def describe(event_id: int, state: Annotated[ServerState, Depends(get_state)]) -> dict:
    """Ours: describes a stored event now, with its snapshot and its pipeline's
    ``describe`` settings (a test of the prompt), and stores the answer on it. 409 when the
    pipeline describes nothing; 404 when the event has no snapshot."""
    row = await _row(state, _checked_id(event_id))
    snapshot = _evidence_file(state, row, "snapshot")
    fields = await state.pipelines.describe_event(row["pipeline"], row, snapshot)
    store = _store(state)
    embedding = await asyncio.to_thread(
        embedding_for, state.language, fields.get("description"), row["class_name"], row["kind"]
    )
    await read_store(store, lambda: store.annotate(row["id"], fields, embedding))
    return event_body(await _row(state, row["id"]), state.settings.sink_dir)


_FILE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"image/jpeg": {}, "video/mp4": {}}, "description": "the file"},
    206: {"description": "the range asked for (Range: bytes=...)"},
}


@router.get("/{event_id}/snapshot", response_class=FileResponse, responses=_FILE_RESPONSES)
async def snapshot(event_id: int, state: Annotated[ServerState, Depends(get_state)]):
    """The JPEG snapshot taken when the event happened (404 when it has none)."""
    return _evidence(state, await _row(state, _checked_id(event_id)), "snapshot")


@router.get("/{event_id}/clip", response_class=FileResponse, responses=_FILE_RESPONSES)
async def clip(event_id: int, state: Annotated[ServerState, Depends(get_state)]):
    """The event's own clip (an event sink's), else its source's recording around it."""
    row = await _row(state, _checked_id(event_id))
    if row["clip"] is not None:
        return _evidence(state, row, "clip")
    directory = _recording_of(row, state.settings.sink_dir)
    if directory is None:
        raise NotFound(f"event {row['id']} has no clip, and its source is not recorded")
    at = row["at_ms"] / 1000
    return await export_file(directory, at - CLIP_AROUND_S, at + CLIP_AROUND_S, f"event-{event_id}")


def _recording_of(row: dict[str, Any], sink_dir: Path) -> Path | None:
    directory = recording_directory(sink_dir, row["pipeline"], row["source"])
    return directory if directory is not None and directory.is_dir() else None
