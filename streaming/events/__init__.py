"""What happened while nobody watched: events of pipelines and sessions, stored (SQLite
embedded, PostgreSQL for a cluster) and queried (``server/events.py``). ``store`` and
``writer`` import SQLAlchemy; this package's top level is what producers need, and stays light."""

from .records import EventKind, EventRecord, EventRecorder

__all__ = ["EventKind", "EventRecord", "EventRecorder"]
