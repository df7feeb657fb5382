"""The events table.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("at_ms", sa.BigInteger, nullable=False),
        sa.Column("pipeline", sa.String(128), nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("step", sa.String(128), nullable=True),
        sa.Column("direction", sa.String(16), nullable=True),
        sa.Column("class_name", sa.String(128), nullable=True),
        sa.Column("tracker_id", sa.BigInteger, nullable=True),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("snapshot", sa.String(512), nullable=True),
        sa.Column("clip", sa.String(512), nullable=True),
    )
    op.create_index("events_at", "events", ["at_ms", "id"])
    op.create_index("events_pipeline_at", "events", ["pipeline", "at_ms", "id"])
    op.create_index("events_source_at", "events", ["pipeline", "source", "at_ms", "id"])
    op.create_index("events_kind_at", "events", ["kind", "at_ms", "id"])


def downgrade() -> None:
    op.drop_table("events")
