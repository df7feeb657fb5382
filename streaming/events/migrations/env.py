"""Alembic's entry: runs the package's migrations on the connection the store hands over
(``EventStore.migrate``); there is no alembic.ini and no URL here."""

from __future__ import annotations

from alembic import context

from streaming.events.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
