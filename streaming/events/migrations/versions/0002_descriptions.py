"""What a vision-language model said of an event, and search by text.

Each event gets a ``uid`` (what a description is written back to, before the row's id is
known), its ``description``, an alert's structured ``summary`` and a verification's
``verdict``. Full-text search over the description, the class, the kind and the pipeline:
on SQLite an FTS5 table (porter stemming) kept by triggers, on PostgreSQL a GIN index on the
same text as an English ``tsvector``; both made over the events already stored.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from streaming.events.schema import POSTGRES_TEXT  # the index's expression is the query's

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

SQLITE_TEXT = (
    "coalesce({t}.class_name, '') || ' ' || {t}.kind || ' ' || {t}.pipeline || ' ' || "
    "coalesce({t}.description, '')"
)
"""What is searched, row ``{t}`` (``new``, ``old``, ``events``)."""


def upgrade() -> None:
    with op.batch_alter_table("events") as table:
        table.add_column(sa.Column("uid", sa.String(32), nullable=True))
        table.add_column(sa.Column("description", sa.Text, nullable=True))
        table.add_column(sa.Column("summary", sa.JSON, nullable=True))
        table.add_column(sa.Column("verdict", sa.JSON, nullable=True))
    op.create_index("events_uid", "events", ["uid"])
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_text()
    else:
        op.execute(f"CREATE INDEX events_text ON events USING gin ({POSTGRES_TEXT})")


def _sqlite_text() -> None:
    op.execute("CREATE VIRTUAL TABLE events_text USING fts5(body, tokenize='porter unicode61')")
    op.execute(
        "INSERT INTO events_text(rowid, body) SELECT id, "
        + SQLITE_TEXT.format(t="events")
        + " FROM events"
    )
    op.execute(
        "CREATE TRIGGER events_text_insert AFTER INSERT ON events BEGIN "
        "INSERT INTO events_text(rowid, body) VALUES (new.id, "
        + SQLITE_TEXT.format(t="new")
        + "); END"
    )
    op.execute(
        "CREATE TRIGGER events_text_update AFTER UPDATE OF description, class_name ON events "
        "BEGIN UPDATE events_text SET body = "
        + SQLITE_TEXT.format(t="new")
        + " WHERE rowid = new.id; END"
    )
    op.execute(
        "CREATE TRIGGER events_text_delete AFTER DELETE ON events BEGIN "
        "DELETE FROM events_text WHERE rowid = old.id; END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for trigger in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER events_text_{trigger}")
        op.execute("DROP TABLE events_text")
    else:
        op.execute("DROP INDEX events_text")
    op.drop_index("events_uid", "events")
    with op.batch_alter_table("events") as table:
        for column in ("verdict", "summary", "description", "uid"):
            table.drop_column(column)
