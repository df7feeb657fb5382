"""What the server keeps on disk: sink files, the event store, recordings, pipelines, stored
workflows."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings

__all__ = ["StorageSettings"]


class StorageSettings(BaseSettings):
    """What the server keeps on disk: sink files, the event store, recordings, pipelines, stored
    workflows. A part of ``Settings`` (``VISIONSTREAM_<NAME>``)."""

    sink_dir: Path = Field(
        default_factory=lambda: Path.home() / ".local" / "share" / "visionstream" / "sinks"
    )
    """Where pipelines' jsonl and video_file sinks and workflows' event sinks write (requests
    name files, never paths)."""
    file_sink_dir: Path | None = None
    """Where ``local_file_sink`` steps may write; unset, such a step is refused."""
    data_dir: Path = Field(
        default_factory=lambda: Path.home() / ".local" / "share" / "visionstream"
    )
    """The server's own state: ``pipelines/`` holds the requests of running pipelines, so a
    restarted server restarts them (one server per directory)."""
    data_group_readable: bool = False
    """Let the owner's group read what the server stores (``data_dir``, ``sink_dir``): by
    default only the server's own user can (directories 0700, files 0600)."""
    store_events: bool = True
    """Keep events (line crossings, zone entries and exits, event sinks, sources' states,
    failures) in the event store, for ``GET /events``."""
    events_url: str | None = None
    """The event store: None keeps it in ``<data_dir>/events.sqlite3`` (SQLite, one
    server); ``postgresql://user:password@host/db`` for a cluster, where every replica and
    pipeline actor writes to it and any replica answers. Its password is never logged."""
    events_max_age_days: float | None = Field(default=30.0, gt=0)
    """Events older than this are deleted, with their snapshots and clips (None: kept)."""
    events_max_count: int | None = Field(default=5_000_000, ge=1)
    """At most this many events are kept: the oldest go first, with their evidence."""
    events_queue: int = Field(default=10_000, ge=1)
    """Events waiting for the database at most (it is down or slow); beyond, they are
    dropped and counted (``visionstream_events_dropped``), and frames never wait."""
    events_search_max_compared: int = Field(default=20_000, ge=100, le=10_000_000)
    """A search by meaning (``GET /events?about=``, ``similar_to=``) compares at most this
    many described events: the newest that pass its filters (narrow with ``since`` and
    ``until`` to reach older ones). Each costs about 3 µs on SQLite and 15 µs on PostgreSQL
    (768 dimensions), so this bounds a search's time and memory."""
    recordings_min_free_mb: int = Field(default=1024, ge=0)
    """Pipelines' recordings never fill the disk: below this much free space the oldest
    segments are removed, and with none left no new segment starts."""
    max_export_seconds: float = Field(default=3600.0, gt=0)
    """Longest range ``GET /recordings/{pipeline}/{source}`` exports as one file."""
    persist_pipelines: bool = True
    """Keep pipelines across restarts (false: a server starts with none)."""
    workflows_dir: Path | None = None
    """Directory of ``<id>.json`` workflow specifications requests may name as ``local/<id>``."""
