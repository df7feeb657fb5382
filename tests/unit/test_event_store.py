"""The event store on a real SQLite file and a real PostgreSQL (Debian's, started by the
tests as an unprivileged user on 127.0.0.1): pages, summaries, retention with evidence,
the migrations, and the writer through a database that stops and comes back."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from streaming.events import EventRecord
from streaming.events.schema import metadata
from streaming.events.store import EventFilter, EventStore, InvalidCursor, database_url
from streaming.events.vectors import Scan, stored
from streaming.events.writer import EventRetention, EventWriter
from streaming.language.embeddings import Embedding, unit
from streaming.metrics import Metrics
from tests.support.postgres import PostgresServer, postgres_available

WAIT_S = 60.0
T0 = 1_790_000_000.0  # 2026-09-21T14:13:20Z
_databases = itertools.count()


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    if not postgres_available():
        pytest.skip("Debian's postgresql is not installed (tests/install.sh installs it)")
    with PostgresServer() as server:
        yield server


def fresh_postgres_url(server: PostgresServer) -> str:
    """A database of its own on ``server``: tests never see each other's rows."""
    name = f"events_{next(_databases)}"
    engine = create_engine(database_url(server.url), isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return server.url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path) -> Iterator[EventStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'events.sqlite3'}"
    else:
        url = fresh_postgres_url(request.getfixturevalue("postgres"))
    store = EventStore(url)
    store.migrate()
    yield store
    store.close()


def crossing(at: float, pipeline: str = "p1", **fields) -> EventRecord:
    return EventRecord("line_crossing", pipeline, "0", "counter", at=at, **fields)


def _not_the_text_index(obj, name, type_, reflected, compare_to) -> bool:
    """The full-text index (migration 0002: SQLite's FTS5 table and its shadow tables,
    PostgreSQL's expression index) is the migration's alone: no SQLAlchemy table says it."""
    return not (name or "").startswith("events_text")


def test_the_migrations_make_exactly_the_schema_the_code_reads(store):
    store.migrate()  # again: idempotent
    with store.engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"include_object": _not_the_text_index}
        )
        assert compare_metadata(context, metadata) == []
        version = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    assert version == "0003"


def test_text_search_finds_descriptions_classes_and_kinds_stemmed(store):
    store.insert([
        crossing(T0, class_name="person", uid="a"),
        crossing(T0 + 1, class_name="car", uid="b"),
        EventRecord("zone_exit", "yard", "0", "zone", at=T0 + 2, class_name="dog", uid="c"),
        EventRecord("verification", "yard", "0", "alert", at=T0 + 3, uid="d",
                    description="A shadow of the fence moved.",
                    verdict={"confirmed": False, "reason": "A shadow of the fence moved."}),
    ])  # fmt: skip
    assert store.annotate("a", {"description": "A man in a red coat walks to the door."}) == 1
    assert store.annotate("nobody", {"description": "x"}) == 0

    def found(words: str, **narrowed) -> list[str]:
        rows = store.page(EventFilter(text=words, **narrowed), limit=100).rows
        return sorted(row["uid"] for row in rows)

    assert found("walking doors") == ["a"]  # stemmed: walks, door
    assert found("coat") == ["a"] and found("COAT red") == ["a"]
    assert found("cars") == ["b"] and found("zone_exit") == ["c"]
    assert found("yard") == ["c", "d"]
    assert found("shadows") == ["d"]  # a rejected alert's reason, searchable
    (rejected,) = store.page(EventFilter(text="shadows"), limit=1).rows
    assert rejected["verdict"] == {"confirmed": False, "reason": "A shadow of the fence moved."}
    assert found("coat", pipeline="p2") == []
    assert found("unicorn") == [] and found("!!! ***") == []
    # The caller's words are never query syntax: quotes, operators, NEAR, column filters.
    for hostile in ('"', "coat OR car", "body:coat", "NEAR(coat car)", "co*", "-coat"):
        store.page(EventFilter(text=hostile), limit=10)


def test_an_upgrade_indexes_the_events_stored_before_it(tmp_path):
    from alembic import command
    from alembic.config import Config

    store = EventStore(f"sqlite:///{tmp_path / 'old.sqlite3'}")
    config = Config()
    config.set_main_option("script_location", "streaming.events:migrations")
    with store.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
        connection.execute(
            text(
                "INSERT INTO events (at_ms, pipeline, source, kind, class_name, payload) "
                "VALUES (1, 'gate', '0', 'line_crossing', 'bicycle', '{}')"
            )
        )
    store.migrate()
    (row,) = store.page(EventFilter(text="bicycles"), limit=10).rows
    assert row["pipeline"] == "gate" and row["uid"] is None
    assert store.annotate(row["id"], {"description": "a bicycle"}) == 1
    store.close()


def test_nearest_ranks_described_events_by_cosine_distance_within_the_filter(store):
    """Vectors (migration 0003) ranked by sqlite-vec on SQLite and in numpy on PostgreSQL:
    the same order and distances; only the query's model and dimensions are compared; a
    filter narrows; the newest ``most`` only; an expired event takes its vector along."""
    ranks_by_cosine_distance(store)


def test_sqlite_without_sqlite_vec_ranks_the_same_in_numpy(tmp_path):
    store = EventStore(f"sqlite:///{tmp_path / 'events.sqlite3'}", sqlite_vec=False)
    store.migrate()
    try:
        ranks_by_cosine_distance(store)
    finally:
        store.close()


@given(
    st.integers(1, 60),
    st.integers(1, 9),
    st.integers(1, 12),
    st.integers(0, 2**32 - 1),
)
def test_a_scan_fed_in_chunks_keeps_exactly_the_nearest(count, limit, chunk, seed):
    rng = np.random.default_rng(seed)
    vectors = [unit(rng.standard_normal(5)) for _ in range(count)]
    query = unit(rng.standard_normal(5))
    scan = Scan(query, limit)
    rows = [(i, stored(v)) for i, v in enumerate(vectors)]
    for start in range(0, count, chunk):
        scan.feed(rows[start : start + chunk])
    distances = [1.0 - float(np.dot(v, query)) for v in vectors]
    found = scan.nearest()
    assert np.allclose([d for _, d in found], sorted(distances)[:limit], atol=1e-5)
    assert all(abs(distances[i] - d) < 1e-5 for i, d in found)  # each id with its own


def ranks_by_cosine_distance(store: EventStore) -> None:
    store.insert(
        [
            crossing(T0 + i, uid=f"e{i}", class_name=c)
            for i, c in enumerate(["person", "person", "car", "dog"])
        ]
    )
    directions = {"e0": [1, 0, 0], "e1": [0.8, 0.6, 0], "e2": [0, 1, 0], "e3": [0, 0, 1]}
    for uid, values in directions.items():
        assert store.annotate(uid, {"description": uid}, Embedding("m", unit(values))) == 1
    store.annotate("e3", {}, Embedding("m", unit([0, 0, 1, 0])))  # another dimension count
    store.annotate("e2", {}, Embedding("other", unit([1, 0, 0])))  # re-embedded, other model

    def near(values, limit=10, model="m", **where) -> list[tuple[str, float]]:
        rows = store.nearest(EventFilter(**where), Embedding(model, unit(values)), limit)
        return [(row["uid"], round(row["distance"], 3)) for row in rows]

    assert near([1, 0, 0]) == [("e0", 0.0), ("e1", 0.2)]
    assert near([1, 0, 0], limit=1) == [("e0", 0.0)]
    newest = store.nearest(EventFilter(), Embedding("m", unit([1, 0, 0])), 10, most=1)
    assert [row["uid"] for row in newest] == ["e1"]  # the newest comparable one only
    assert near([0.8, 0.6, 0], class_name="person") == [("e1", 0.0), ("e0", 0.2)]
    assert near([1, 0, 0], model="other") == [("e2", 0.0)]
    assert near([0, 0, 1, 0]) == [("e3", 0.0)]
    (e1,) = (r for r in store.page(EventFilter(), limit=10).rows if r["uid"] == "e1")
    found = store.embedding_of(e1["id"], "m")
    assert found is not None and np.allclose(found.vector, unit([0.8, 0.6, 0]))
    assert store.embedding_of(e1["id"], "other") is None
    store.expire(before_ms=round((T0 + 1.5) * 1000), keep=None)
    assert near([1, 0, 0]) == []
    with store.engine.connect() as connection:
        left = connection.execute(text("SELECT count(*) FROM event_vectors")).scalar()
    assert left == 2  # e2's and e3's


def test_an_embedding_is_unit_length_or_refused():
    assert np.isclose(np.linalg.norm(unit([3, 4])), 1.0)
    for bad in ([], [0, 0], [float("nan"), 1], [1.0] * 9000):
        with pytest.raises(ValueError):
            unit(bad)


def test_pages_cover_every_event_once_in_a_stable_order(store):
    # Many events share a millisecond (one frame's crossings): the id breaks the tie.
    records = [crossing(T0 + (i // 7) / 1000, pipeline=f"p{i % 2}") for i in range(250)]
    store.insert(records)
    for order in ("desc", "asc"):
        seen, cursor = [], None
        while True:
            page = store.page(EventFilter(), limit=40, cursor=cursor, order=order)
            seen += [(row["at_ms"], row["id"]) for row in page.rows]
            if (cursor := page.next_cursor) is None:
                break
        assert len(seen) == 250 and len(set(seen)) == 250
        assert seen == sorted(seen, reverse=order == "desc")
    only = store.page(EventFilter(pipeline="p1"), limit=1000)
    assert len(only.rows) == 125 and only.next_cursor is None
    assert {row["pipeline"] for row in only.rows} == {"p1"}
    # New events arriving meanwhile never shift a page already handed out.
    first = store.page(EventFilter(), limit=10)
    store.insert([crossing(T0 + 10)])
    second = store.page(EventFilter(), limit=10, cursor=first.next_cursor)
    assert second.rows[0]["id"] not in {row["id"] for row in first.rows}
    assert (second.rows[0]["at_ms"], second.rows[0]["id"]) < (
        first.rows[-1]["at_ms"],
        first.rows[-1]["id"],
    )


def test_filters_narrow_by_every_field_and_by_time(store):
    store.insert([
        crossing(T0, direction="in", class_name="person", tracker_id=3),
        crossing(T0 + 60, direction="out", class_name="car", tracker_id=4),
        EventRecord("zone_entry", "p1", "1", "zone", at=T0 + 120, class_name="person"),
        EventRecord("source_state", "p2", "0", at=T0 + 180, payload={"new_state": "RUNNING"}),
    ])  # fmt: skip

    def kinds(**where) -> list[str]:
        return [row["kind"] for row in store.page(EventFilter(**where)).rows]

    assert kinds(direction="in") == ["line_crossing"]
    assert kinds(class_name="person") == ["zone_entry", "line_crossing"]
    assert kinds(source="1") == ["zone_entry"]
    assert kinds(step="zone", kind="zone_entry") == ["zone_entry"]
    assert kinds(kind="source_state,zone_entry") == ["source_state", "zone_entry"]  # several
    assert kinds(pipeline="p2") == ["source_state"]
    since, until = round((T0 + 60) * 1000), round((T0 + 180) * 1000)
    assert kinds(since_ms=since, until_ms=until) == ["zone_entry", "line_crossing"]
    row = store.page(EventFilter(pipeline="p2")).rows[0]
    assert row["payload"] == {"new_state": "RUNNING"} and store.get(row["id"]) == row
    assert store.get(10**12) is None


def test_the_summary_counts_each_bucket_per_step_and_direction(store):
    hour = 3600.0
    start = (T0 // hour + 1) * hour  # on an hour boundary
    store.insert(
        [crossing(start + 5, direction="in")] * 3
        + [crossing(start + 65, direction="in"), crossing(start + 70, direction="out")]
        + [crossing(start + hour + 1, direction="out")]
    )
    minutes = store.summary(EventFilter(), "minute")
    assert [(r["start_ms"] / 1000 - start, r["direction"], r["count"]) for r in minutes] == [
        (0, "in", 3),
        (60, "in", 1),
        (60, "out", 1),
        (hour, "out", 1),
    ]
    hours = store.summary(EventFilter(direction="in"), "hour")
    assert [(r["start_ms"] / 1000 - start, r["count"]) for r in hours] == [(0, 4)]
    assert store.summary(EventFilter(), "day")[0]["start_ms"] % 86_400_000 == 0


def test_retention_removes_the_oldest_events_with_their_evidence(store, tmp_path):
    evidence = tmp_path / "sinks"
    (evidence / "door").mkdir(parents=True)
    records = []
    for i in range(6):
        snapshot = evidence / "door" / f"{i}.jpg"
        snapshot.write_bytes(b"jpeg")
        records.append(crossing(T0 + i, snapshot=f"door/{i}.jpg"))
    store.insert(records)
    writer = EventWriter(
        store,
        evidence_dir=evidence,
        retention=EventRetention(max_age_s=None, max_count=4, every_s=3600),
    )
    try:
        writer.enforce_retention()
        assert sorted(p.name for p in (evidence / "door").iterdir()) == [
            f"{i}.jpg" for i in range(2, 6)
        ]
        assert store.count() == 4
        # By age: everything older than 30 days (all of these, from 2026-09).
        store.insert([crossing(T0 + 10, snapshot="../outside.jpg")])
        (tmp_path / "outside.jpg").write_bytes(b"not evidence")
        writer.enforce_retention()
    finally:
        writer.close()
    assert store.count() == 4  # the count rule keeps the newest 4 of 5
    assert (tmp_path / "outside.jpg").exists()  # a path outside the evidence is never touched
    aged = EventWriter(store, evidence_dir=evidence, retention=EventRetention(max_age_s=86400))
    aged.enforce_retention()
    aged.close()
    assert store.count() == 0 and not list((evidence / "door").iterdir())


def test_what_the_writer_acknowledged_survives_a_restart(tmp_path):
    url = f"sqlite:///{tmp_path / 'events.sqlite3'}"
    metrics = Metrics()
    writer = EventWriter(EventStore(url), metrics=metrics)
    for i in range(1000):
        writer.record(crossing(T0 + i))
    assert writer.flush(WAIT_S)
    writer.close()
    writer.close()  # idempotent
    writer.record(crossing(T0))  # after close: dropped and counted, never raised
    assert writer.stats()["dropped"] == 1
    again = EventStore(url)
    again.migrate()
    assert again.count() == 1000
    again.close()
    assert metrics.registry.get_sample_value("visionstream_events_written_total") == 1000


def test_postgresql_down_mid_run_loses_nothing_acknowledged_and_counts_what_did_not_fit(
    postgres,
):
    url = fresh_postgres_url(postgres)
    metrics = Metrics()
    writer = EventWriter(EventStore(url), max_queued=50, metrics=metrics, retry_max_s=0.5)
    try:
        for i in range(100):
            writer.record(crossing(T0 + i))
            assert i % 25 or writer.flush(WAIT_S)  # within the queue's bound
        assert writer.flush(WAIT_S) and writer.written == 100  # acknowledged
        postgres.kill()  # a crash: no checkpoint, no goodbye
        for i in range(80):  # 50 wait in the queue, 30 do not fit
            writer.record(crossing(T0 + 100 + i))
        assert writer.dropped == 30
        dropped = metrics.registry.get_sample_value(
            "visionstream_events_dropped_total", {"reason": "queue_full"}
        )
        assert dropped == 30
        postgres.start()
        assert writer.flush(WAIT_S)
        assert writer.written == 150 and writer.stats()["error"] is None
    finally:
        writer.close()
    check = EventStore(url)
    assert check.count() == 150
    check.close()


def test_a_database_unreachable_at_close_gives_up_within_its_timeout(postgres):
    url = fresh_postgres_url(postgres)
    writer = EventWriter(EventStore(url), close_timeout_s=1.0, retry_max_s=0.2)
    try:
        writer.record(crossing(T0))
        assert writer.flush(WAIT_S)
        postgres.stop()
        for i in range(5):
            writer.record(crossing(T0 + i))
        writer.close()  # returns: the server's exit is never held up by its database
        assert writer.dropped == 5 and writer.written == 1
        assert "connection" in (writer.stats()["error"] or "").lower()
    finally:
        postgres.start()


def test_the_password_of_a_database_url_is_never_shown():
    store = EventStore("postgresql://events:s3cret@127.0.0.1:1/db")
    assert "s3cret" not in store.shown and "***" in store.shown
    assert store.url.drivername == "postgresql+psycopg"
    store.close()


@given(st.text(max_size=60))
def test_a_cursor_is_parsed_or_refused_by_name(cursor):
    store = EventStore("sqlite://")
    try:
        store.migrate()
        store.page(EventFilter(), cursor=cursor)
    except InvalidCursor as exc:
        assert "was not given by this server" in str(exc)
    finally:
        store.close()


def test_sqlite_runs_in_wal_mode(tmp_path: Path):
    store = EventStore(f"sqlite:///{tmp_path / 'events.sqlite3'}")
    with store.engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    store.close()


def test_an_event_the_database_refuses_is_dropped_and_the_others_are_written(tmp_path):
    metrics = Metrics()
    writer = EventWriter(EventStore(f"sqlite:///{tmp_path / 'e.sqlite3'}"), metrics=metrics)
    try:
        writer.record(crossing(T0))
        writer.record(crossing(T0 + 1, payload={"not json": object()}))
        writer.record(crossing(T0 + 2))
        assert writer.flush(WAIT_S)
        assert (writer.written, writer.dropped) == (2, 1)
        assert writer.store.count() == 2
        refused = {"reason": "invalid"}
        assert metrics.registry.get_sample_value("visionstream_events_dropped_total", refused) == 1
    finally:
        writer.close()
