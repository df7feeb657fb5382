"""The events table. Migrations (``migrations/versions``) create and change it; this module
is what the code reads and writes, and must match the newest migration (a test checks)."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Column, Index, Integer, MetaData, String, Table

__all__ = ["events", "metadata"]

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
    # Every listing is newest first, optionally narrowed to a pipeline or a kind: each of
    # those reads an index in order and stops at the page's end.
    Index("events_at", "at_ms", "id"),
    Index("events_pipeline_at", "pipeline", "at_ms", "id"),
    Index("events_source_at", "pipeline", "source", "at_ms", "id"),
    Index("events_kind_at", "kind", "at_ms", "id"),
)
