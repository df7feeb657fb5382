"""The event store: SQLite (one file, WAL) embedded, PostgreSQL for a cluster, through
SQLAlchemy Core. Its schema is the package's Alembic migrations, applied by ``migrate``.

Listing is newest first (or oldest first), ordered by ``(at_ms, id)``: a stable order even
where several writers' ids interleave, and a cursor that is that pair of the page's last row.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from alembic import command
from alembic.config import Config
from sqlalchemy import (
    ColumnElement,
    Engine,
    create_engine,
    delete,
    event,
    false,
    func,
    literal_column,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.engine import URL, make_url

from .records import EventRecord
from .schema import POSTGRES_TEXT, event_vectors, events
from .vectors import (
    CHUNK,
    Embedding,
    Scan,
    distance,
    fits,
    load_sqlite_vec,
    read,
    sqlite_module,
    stored,
)

__all__ = ["BUCKETS", "EventFilter", "EventPage", "EventStore", "InvalidCursor", "database_url"]

BUCKETS: dict[str, int] = {"minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
"""Summary bucket widths in ms (UTC: a day bucket starts at 00:00 UTC)."""

_MIGRATION_LOCK = 7_216_031
"""PostgreSQL advisory lock id: replicas starting together migrate one at a time."""

_MAX_WORDS = 16
"""Words of a text search, at most (each one is a term of the full-text query)."""

_MIGRATING = threading.Lock()
"""Alembic's ``context`` and ``op`` are module-level proxies: one migration at a time per
process, whichever store runs it."""


class InvalidCursor(ValueError):
    """A cursor this store did not give."""


def database_url(url: str) -> URL:
    """``postgresql://`` goes through psycopg 3 (SQLAlchemy's default driver for that scheme
    is psycopg2, which we do not install); other URLs as given."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


@dataclass(frozen=True)
class EventFilter:
    """What a listing or a summary is narrowed to; None: any. Times in ms since the epoch,
    ``since_ms`` inclusive, ``until_ms`` exclusive."""

    pipeline: str | None = None
    source: str | None = None
    kind: str | None = None
    """One kind, or several comma-separated (``line_crossing,zone_entry``)."""
    step: str | None = None
    class_name: str | None = None
    direction: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    text: str | None = None
    """Words every matching event's description, class, kind or pipeline holds (stemmed:
    ``cars`` finds ``car``); none: any."""

    def clauses(self, dialect: str = "sqlite") -> list[ColumnElement[bool]]:
        c = events.c
        found: list[ColumnElement[bool]] = [
            column == value
            for column, value in (
                (c.pipeline, self.pipeline),
                (c.source, self.source),
                (c.step, self.step),
                (c.class_name, self.class_name),
                (c.direction, self.direction),
            )
            if value is not None
        ]
        if self.kind is not None:  # one kind, or several comma-separated
            found.append(c.kind.in_([k for k in self.kind.split(",") if k] or [""]))
        if self.since_ms is not None:
            found.append(c.at_ms >= self.since_ms)
        if self.until_ms is not None:
            found.append(c.at_ms < self.until_ms)
        if self.text is not None:
            found.append(_matching(self.text, dialect))
        return found


_WORD = re.compile(r"\w+")


def _matching(words: str, dialect: str) -> ColumnElement[bool]:
    """Events whose searched text holds every word of ``words`` (the caller's text is only
    ever a bound parameter: on SQLite each word is quoted, so FTS5's syntax is not theirs)."""
    found = _WORD.findall(words)[:_MAX_WORDS]
    if not found:
        return false()
    if dialect == "postgresql":
        searched = literal_column(POSTGRES_TEXT).op("@@")(
            func.plainto_tsquery("english", " ".join(found))
        )
        return searched.self_group()
    query = " ".join(f'"{word}"' for word in found)
    return events.c.id.in_(
        text("SELECT rowid FROM events_text WHERE events_text MATCH :words").bindparams(words=query)
    )


@dataclass(frozen=True)
class EventPage:
    rows: list[dict[str, Any]]
    next_cursor: str | None
    """Gives the next page; None: this was the last."""


def _cursor(row: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(f"{row['at_ms']}.{row['id']}".encode()).decode().rstrip("=")


def _parse_cursor(cursor: str) -> tuple[int, int]:
    try:
        decoded = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        at_ms, _, row_id = decoded.partition(".")
        return int(at_ms), int(row_id)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidCursor(f"cursor {cursor[:40]!r} was not given by this server") from None


class EventStore:
    """Thread-safe (SQLAlchemy's pool); ``migrate`` before anything else, and again after
    a failure (it is idempotent)."""

    def __init__(
        self, url: str, *, connect_timeout_s: float = 5.0, sqlite_vec: bool = True
    ) -> None:
        """``sqlite_vec``: compare vectors in SQLite where sqlite-vec loads (False: always in
        numpy, as on PostgreSQL)."""
        self._sqlite_vec = sqlite_vec
        self.url = database_url(url)
        self.shown = self.url.render_as_string(hide_password=True)
        """The URL with its password masked: the only form that is logged."""
        self.dialect = self.url.get_backend_name()
        self._migrated = False
        self._lock = threading.Lock()
        self._in_sqlite = False
        """Vectors compared by sqlite-vec in SQLite (else in numpy): where it loaded."""
        if self.dialect == "sqlite":
            database = self.url.database
            if database and database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            module = sqlite_module()  # one that loads sqlite-vec, where installed
            self.engine: Engine = create_engine(
                self.url,
                connect_args={"timeout": 30, "check_same_thread": False},
                **({"module": module} if module is not None else {}),
            )
            event.listen(self.engine, "connect", self._sqlite_connected)
        else:
            # pre_ping: a database restarted under us costs one reconnect, not one error.
            self.engine = create_engine(
                self.url,
                pool_pre_ping=True,
                pool_size=4,
                max_overflow=4,
                connect_args={"connect_timeout": max(1, int(connect_timeout_s))},
            )

    @property
    def ready(self) -> bool:
        return self._migrated

    def migrate(self) -> None:
        """Brings the schema to the package's newest migration."""
        with self._lock, _MIGRATING:
            if self._migrated:
                return
            config = Config()
            config.set_main_option("script_location", "streaming.events:migrations")
            with self.engine.begin() as connection:
                if self.dialect == "postgresql":
                    connection.execute(text(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"))
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
            self._migrated = True

    def insert(self, records: Sequence[EventRecord]) -> None:
        """All of ``records`` in one transaction, or none."""
        if not records:
            return
        rows = [
            {
                "at_ms": round(r.at * 1000),
                "pipeline": r.pipeline,
                "source": r.source,
                "kind": r.kind,
                "step": r.step,
                "direction": r.direction,
                "class_name": r.class_name,
                "tracker_id": r.tracker_id,
                "payload": r.payload,
                "snapshot": r.snapshot,
                "clip": r.clip,
                "uid": r.uid,
                "description": r.description,
                "verdict": r.verdict,
            }
            for r in records
        ]
        with self.engine.begin() as connection:
            connection.execute(events.insert(), rows)

    def page(
        self,
        where: EventFilter,
        *,
        limit: int = 100,
        cursor: str | None = None,
        order: Literal["desc", "asc"] = "desc",
    ) -> EventPage:
        query = select(events).where(*where.clauses(self.dialect))
        if cursor is not None:
            # A row value comparison: both databases read the (at_ms, id) index from the
            # cursor on (spelled out as OR, SQLite scanned; measured: 40 ms against 1.5 ms).
            key = tuple_(events.c.at_ms, events.c.id)
            after = _parse_cursor(cursor)
            query = query.where(key < after if order == "desc" else key > after)
        ordering = (
            (events.c.at_ms.desc(), events.c.id.desc())
            if order == "desc"
            else (events.c.at_ms.asc(), events.c.id.asc())
        )
        query = query.order_by(*ordering).limit(limit + 1)
        with self.engine.connect() as connection:
            rows = [dict(row._mapping) for row in connection.execute(query)]
        more = len(rows) > limit
        rows = rows[:limit]
        return EventPage(rows, _cursor(rows[-1]) if more else None)

    def annotate(
        self, uid: str | int, fields: dict[str, Any], embedding: Embedding | None = None
    ) -> int:
        """Writes ``fields`` (``description``, ``summary``, ``verdict``) onto the event
        ``uid`` (or, an int, its id), and its description's ``embedding`` with them; how
        many rows it changed (0: not stored, or expired)."""
        column = events.c.id if isinstance(uid, int) else events.c.uid
        changed = 0
        with self.engine.begin() as connection:
            if fields:
                done = connection.execute(update(events).where(column == uid).values(**fields))
                changed = int(done.rowcount)
            if embedding is not None and (changed or not fields):
                found = connection.execute(select(events.c.id).where(column == uid)).scalars()
                ids = found.all()
                for event_id in ids:
                    self._embed(connection, event_id, embedding)
                changed = changed or len(ids)
        return changed

    def embed(self, event_id: int, embedding: Embedding) -> None:
        """Stores (or replaces) the vector of the event ``event_id``."""
        with self.engine.begin() as connection:
            self._embed(connection, event_id, embedding)

    def _embed(self, connection: Any, event_id: int, embedding: Embedding) -> None:
        vectors = event_vectors.c
        connection.execute(delete(event_vectors).where(vectors.event_id == event_id))
        row = {
            "event_id": event_id,
            "model": embedding.model,
            "vector": stored(embedding.vector),
        }
        connection.execute(event_vectors.insert(), [row])

    def embedding_of(self, event_id: int, model: str) -> Embedding | None:
        """The event's vector by ``model``; None: it has none (undescribed, or by another)."""
        vectors = event_vectors.c
        query = select(vectors.vector).where(vectors.event_id == event_id, vectors.model == model)
        with self.engine.connect() as connection:
            value = connection.execute(query).scalar()
        return Embedding(model, read(value)) if value is not None else None

    def nearest(
        self, where: EventFilter, embedding: Embedding, limit: int, *, most: int = 20_000
    ) -> list[dict[str, Any]]:
        """The ``limit`` events (of ``where``) whose vectors by the same model are nearest
        ``embedding``, nearest first, each with its cosine ``distance``: an exact scan of
        the newest ``most`` such events (a bounded cost), in SQLite by sqlite-vec, else in
        numpy (``vectors``)."""
        vectors = event_vectors.c
        compared = (
            select(events.c.id, vectors.vector)
            .join(event_vectors, vectors.event_id == events.c.id)
            .where(
                vectors.model == embedding.model,
                fits(embedding.vector),
                *where.clauses(self.dialect),
            )
            .order_by(events.c.at_ms.desc(), events.c.id.desc())
            .limit(most)
        )
        with self.engine.connect() as connection:
            if self._in_sqlite:  # known once a connection was made
                # The distance is taken in the one scan of the newest ``most``; the events'
                # rows are then read by key for the ``limit`` nearest only.
                far = distance(embedding.vector).label("distance")
                newest = compared.with_only_columns(events.c.id, far).subquery()
                query = (
                    select(events, newest.c.distance)
                    .join(newest, newest.c.id == events.c.id)
                    .order_by(newest.c.distance, events.c.id.desc())
                    .limit(limit)
                )
                return [dict(row._mapping) for row in connection.execute(query)]
            scan = Scan(embedding.vector, limit)
            streamed = connection.execution_options(stream_results=True, yield_per=CHUNK)
            for rows in streamed.execute(compared).partitions():
                scan.feed(list(rows))
            found = scan.nearest()
            by_id = {
                row.id: dict(row._mapping)
                for row in connection.execute(
                    select(events).where(events.c.id.in_([i for i, _ in found]))
                )
            }
        return [by_id[i] | {"distance": d} for i, d in found if i in by_id]

    def get(self, event_id: int) -> dict[str, Any] | None:
        with self.engine.connect() as connection:
            row = connection.execute(select(events).where(events.c.id == event_id)).first()
        return dict(row._mapping) if row is not None else None

    def summary(self, where: EventFilter, bucket: str) -> list[dict[str, Any]]:
        """Counts per bucket per pipeline, source, step, kind and direction, oldest first."""
        width = BUCKETS[bucket]
        c = events.c
        start = ((c.at_ms // width) * width).label("start_ms")
        groups = (start, c.pipeline, c.source, c.step, c.kind, c.direction)
        query = (
            select(*groups, func.count().label("count"))
            .where(*where.clauses(self.dialect))
            .group_by(*groups)
            .order_by(start, c.pipeline, c.source, c.step, c.kind, c.direction)
        )
        with self.engine.connect() as connection:
            return [dict(row._mapping) for row in connection.execute(query)]

    def count(self) -> int:
        with self.engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(events)).scalar_one())

    def expire(self, *, before_ms: int | None, keep: int | None, batch: int = 5000) -> list[str]:
        """Deletes events older than ``before_ms`` and all but the newest ``keep``, in batches
        of ``batch`` rows (one short transaction each: writers wait at most one batch).
        Returns the evidence paths of the deleted rows, for the caller to remove."""
        removed: list[str] = []
        c = events.c
        if before_ms is not None:
            removed += self._delete_while(c.at_ms < before_ms, batch)
        if keep is not None and self.count() > keep:
            query = select(c.at_ms, c.id).order_by(c.at_ms.desc(), c.id.desc()).offset(keep)
            with self.engine.connect() as connection:
                newest_removed = connection.execute(query.limit(1)).first()
            if newest_removed is not None:
                at_ms, row_id = newest_removed
                old = tuple_(c.at_ms, c.id) <= (at_ms, row_id)
                removed += self._delete_while(old, batch)
        return removed

    def _delete_while(self, condition: ColumnElement[bool], batch: int) -> list[str]:
        c = events.c
        removed: list[str] = []
        while True:
            with self.engine.begin() as connection:
                rows = connection.execute(
                    select(c.id, c.snapshot, c.clip)
                    .where(condition)
                    .order_by(c.at_ms, c.id)
                    .limit(batch)
                ).all()
                if not rows:
                    return removed
                gone = [r.id for r in rows]
                connection.execute(delete(events).where(c.id.in_(gone)))
                connection.execute(delete(event_vectors).where(event_vectors.c.event_id.in_(gone)))
            removed += _evidence(rows)

    def _sqlite_connected(self, connection: Any, record: Any) -> None:
        _sqlite_pragmas(connection, record)
        self._in_sqlite = self._sqlite_vec and load_sqlite_vec(connection)

    def close(self) -> None:
        """Closes the pool's connections. Idempotent."""
        self.engine.dispose()


def _evidence(rows: Iterable[Any]) -> list[str]:
    return [path for row in rows for path in (row.snapshot, row.clip) if path]


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    # WAL: readers never wait for the writer, and a crash loses no committed transaction;
    # NORMAL sync is durable across process crashes in WAL mode (not across power loss).
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
