"""Vectors of event descriptions, for search by meaning and "similar to this event".

One row per described event: the embeddings model's name and the vector, of unit length. On
SQLite the vector is float32 bytes, compared by sqlite-vec's ``vec_distance_cosine`` (loaded
by the store where its SQLite can load extensions); on PostgreSQL a ``real[]``, compared by
the function made here (pgvector is not in Debian's archive: an exact scan in SQL).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from streaming.events.schema import VECTOR

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "event_vectors",
        sa.Column("event_id", _ID, primary_key=True, autoincrement=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("vector", VECTOR, nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION event_vector_distance(a real[], b real[]) RETURNS double precision "
            "LANGUAGE sql IMMUTABLE PARALLEL SAFE AS "
            "$$ SELECT 1 - sum(x::double precision * y) FROM unnest(a, b) AS t(x, y) $$"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION event_vector_distance(real[], real[])")
    op.drop_table("event_vectors")
