"""PipelineStore: the requests of the server's pipelines on disk, so a restarted server
restarts them (the embedded server's durability; the Ray deployment has its actors for that).

One JSON file per pipeline, ``<pipeline id>.json``, written when the pipeline has started and
removed when it is terminated; a server that stops (SIGTERM) or dies (SIGKILL) leaves its
files, and the next server on the same data directory starts each again under the same id.
The requests keep camera URLs, credentials included, so the directory is the server user's
alone (0700, files 0600); the request's ``api_key`` is not kept (a restart needs none).

One server owns a directory (an exclusive lock on ``lock`` in it): a second server started on
the same one would start the same pipelines twice, so it keeps nothing and says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .models import InitialisePipelinePayload

__all__ = ["PipelineStore", "StoredPipeline"]

log = logging.getLogger(__name__)

_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True)
class StoredPipeline:
    """A pipeline's id and its request as it was stored (validated again on restart)."""

    pipeline_id: str
    request: dict[str, Any]


class PipelineStore:
    """Saves, lists and forgets pipeline requests in ``directory``; ``None``, or a directory
    another server holds: keeps nothing. ``close`` (idempotent) releases the directory."""

    def __init__(self, directory: Path | None) -> None:
        self._directory: Path | None = None
        self._lock: int | None = None
        if directory is not None:
            self._claim(directory)

    def _claim(self, directory: Path) -> None:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.chmod(0o700)  # also when it existed before: the records hold camera URLs
        lock = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            log.warning(
                "%s is in use by another server: this one will not keep its pipelines "
                "across restarts (give it its own VISIONSTREAM_DATA_DIR)",
                directory,
            )
            return
        self._directory, self._lock = directory, lock

    @property
    def enabled(self) -> bool:
        return self._directory is not None

    def close(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # releases the lock
            self._lock = None

    def save(self, pipeline_id: str, payload: InitialisePipelinePayload) -> None:
        """Atomically (a crash leaves the old file or the new one, never half of one)."""
        if self._directory is None:
            return
        record = payload.model_dump(mode="json", exclude={"api_key"}, exclude_unset=True)
        descriptor, temporary = tempfile.mkstemp(dir=self._directory, suffix=".tmp")
        try:
            with os.fdopen(descriptor, "w") as file:  # mkstemp's file is 0600
                json.dump(record, file)
            os.replace(temporary, self._path(pipeline_id))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def forget(self, pipeline_id: str) -> None:
        """Idempotent."""
        if self._directory is not None:
            self._path(pipeline_id).unlink(missing_ok=True)

    def stored(self) -> list[StoredPipeline]:
        """Every readable record, oldest first (as far as the file system's clock tells them
        apart); unreadable ones are logged and removed (a corrupt file must not stop the
        server, nor be tried at every start)."""
        if self._directory is None:
            return []
        for leftover in self._directory.glob("*.tmp"):  # a save cut short by a crash
            leftover.unlink(missing_ok=True)
        records = []
        for path in sorted(self._directory.glob("*.json"), key=_modified):
            try:
                if not _ID.match(path.stem):
                    raise ValueError("not a pipeline record")
                request = json.loads(path.read_text())
                if not isinstance(request, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeError included
                log.warning("pipeline record %s is unreadable (%s): removed", path.name, exc)
                path.unlink(missing_ok=True)
                continue
            records.append(StoredPipeline(path.stem, request))
        return records

    def _path(self, pipeline_id: str) -> Path:
        assert self._directory is not None
        if not _ID.match(pipeline_id):
            raise ValueError(f"not a pipeline id: {pipeline_id!r}")
        return self._directory / f"{pipeline_id}.json"


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
