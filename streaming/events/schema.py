"""The events table. Migrations (``migrations/versions``) create and change it; this module
is what the code reads and writes, and must match the newest migration (a test checks)."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

__all__ = ["POSTGRES_TEXT", "VECTOR", "event_vectors", "events", "metadata"]

POSTGRES_TEXT = (
    "to_tsvector('english', coalesce(class_name, '') || ' ' || kind || ' ' || pipeline || ' ' "
    "|| coalesce(description, ''))"
)
"""What text search reads on PostgreSQL: the expression of the ``events_text`` GIN index
(migration 0002) and of the store's query, the same so that the index serves it."""

metadata = MetaData()

# BigInteger ids on PostgreSQL; SQLite's rowid alias must be exactly INTEGER to autoincrement.
_ID = BigInteger().with_variant(Integer(), "sqlite")

events = Table(
    "events",
    metadata,
    Column("id", _ID, primary_key=True, autoincrement=True),
    # Milliseconds since the epoch, an integer: time buckets are integer division, the same
    # on SQLite and PostgreSQL (their date functions differ).
    Column("at_ms", BigInteger, nullable=False),
    Column("pipeline", String(128), nullable=False),
    Column("source", String(64), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("step", String(128), nullable=True),
    Column("direction", String(16), nullable=True),
    Column("class_name", String(128), nullable=True),
    Column("tracker_id", BigInteger, nullable=True),
    Column("payload", JSON, nullable=False),
    Column("snapshot", String(512), nullable=True),
    Column("clip", String(512), nullable=True),
    # What a vision-language model said of it (0002): written back by ``uid`` once the
    # event is stored; searched through the full-text index the migration keeps
    # (``events_text``: FTS5 on SQLite, a GIN expression index on PostgreSQL).
    Column("uid", String(32), nullable=True),
    Column("description", Text, nullable=True),
    Column("summary", JSON, nullable=True),
    Column("verdict", JSON, nullable=True),
    # Every listing is newest first, optionally narrowed to a pipeline or a kind: each of
    # those reads an index in order and stops at the page's end.
    Index("events_at", "at_ms", "id"),
    Index("events_pipeline_at", "pipeline", "at_ms", "id"),
    Index("events_source_at", "pipeline", "source", "at_ms", "id"),
    Index("events_kind_at", "kind", "at_ms", "id"),
    Index("events_uid", "uid"),
)

VECTOR = LargeBinary()
"""An embedding: little-endian float32 bytes (what sqlite-vec's functions read, and numpy
reads in one go: ``real[]`` on PostgreSQL was measured 5 times slower to compare)."""

# What an embeddings model made of an event's description (0003): one row per event, its
# model named (a query is only compared with vectors of its own model), unit length, so
# that the cosine distance is one minus the dot product.
event_vectors = Table(
    "event_vectors",
    metadata,
    Column("event_id", _ID, primary_key=True, autoincrement=False),
    Column("model", String(256), nullable=False),
    Column("vector", VECTOR, nullable=False),
)
