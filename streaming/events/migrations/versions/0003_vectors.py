"""Vectors of event descriptions, for search by meaning and "similar to this event".

One row per described event: the embeddings model's name and the vector, of unit length, as
little-endian float32 bytes. SQLite compares them with sqlite-vec's ``vec_distance_cosine``
where its SQLite can load the extension; PostgreSQL's (pgvector is not in Debian's archive)
are read in chunks and compared with numpy (``events/vectors.py``).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

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
        sa.Column("vector", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("event_vectors")
