"""Events' vectors, as the store keeps and compares them: unit-length, stored as
little-endian float32 bytes, compared by cosine distance (one minus the dot product).

Two ways to compare, the same answer:

- **In SQLite**, by sqlite-vec's ``vec_distance_cosine``. sqlite-vec is a loadable
  extension, and the ``sqlite3`` of Debian's Python (and others) is built without
  ``enable_load_extension``: the store's SQLite is pysqlite3's where that is installed (it
  bundles a recent SQLite, FTS5 included).
- **In numpy** (``Scan``), reading the rows in chunks and keeping the best: PostgreSQL's
  way (pgvector is not in Debian's archive; an SQL loop over ``real[]`` was measured 5 times
  slower than reading the bytes out), and SQLite's where sqlite-vec cannot be loaded.

Either way a search compares at most the newest ``most`` vectors its filter lets through."""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, LargeBinary, bindparam, func

from ..language import ProviderError, Providers
from ..language.embeddings import Embedding
from .schema import event_vectors

__all__ = [
    "CHUNK",
    "Embedding",
    "Scan",
    "distance",
    "embedding_for",
    "fits",
    "load_sqlite_vec",
    "meaning",
    "read",
    "sqlite_module",
    "stored",
]

log = logging.getLogger(__name__)

CHUNK = 2000
"""Rows read at a time by a scan in numpy (6 MB at 768 dimensions)."""


def meaning(description: str, class_name: str | None, kind: str) -> str:
    """What is embedded of an event: its description, then what it is of (a search's
    words are compared with this)."""
    return f"{description}\n{class_name or 'object'} ({kind.replace('_', ' ')})"


def embedding_for(
    providers: Providers | None, description: str | None, class_name: str | None, kind: str
) -> Embedding | None:
    """The vector of an event's new description, where the server makes them
    (``VISIONSTREAM_VLM_EMBEDDINGS``); None without, or when the provider fails (the
    description is stored all the same, and searched by its words). Blocks: a thread's."""
    if description is None or providers is None:
        return None
    try:
        embedder = providers.embedder()
        return embedder.embed(meaning(description, class_name, kind)) if embedder else None
    except ProviderError as exc:
        log.warning("event store: a description has no vector: %s", exc)
        return None


def sqlite_module() -> ModuleType | None:
    """pysqlite3's DB-API module where it is installed (it can load extensions); None: the
    standard library's."""
    try:
        from pysqlite3 import dbapi2
    except ImportError:
        return None
    return dbapi2


def load_sqlite_vec(connection: Any) -> bool:
    """sqlite-vec's functions on this DB-API connection; False where they cannot be."""
    if not hasattr(connection, "enable_load_extension"):
        return False
    try:
        import sqlite_vec

        connection.enable_load_extension(True)
        try:
            sqlite_vec.load(connection)
        finally:
            connection.enable_load_extension(False)
    except Exception as exc:  # no extension for this platform, or a refusing SQLite
        log.warning("event store: sqlite-vec not loaded (vectors compared in numpy): %s", exc)
        return False
    return True


def stored(vector: np.ndarray) -> bytes:
    """A vector as its column holds it."""
    return np.asarray(vector, dtype="<f4").tobytes()


def read(value: bytes | memoryview) -> np.ndarray:
    return np.frombuffer(bytes(value), dtype="<f4").astype(np.float32)


def fits(vector: np.ndarray) -> ColumnElement[bool]:
    """A stored vector has as many dimensions as ``vector`` (a model's vectors all do)."""
    return func.length(event_vectors.c.vector) == 4 * len(vector)


def distance(vector: np.ndarray) -> ColumnElement[Any]:
    """sqlite-vec's cosine distance of each stored vector to ``vector`` (0: the same
    direction, 2: opposite)."""
    query = bindparam("query_vector", stored(vector), type_=LargeBinary)
    return func.vec_distance_cosine(event_vectors.c.vector, query)


class Scan:
    """The ``limit`` nearest of rows ``(id, vector bytes)`` fed a chunk at a time: memory
    is one chunk and the best so far, whatever the rows' number. Ties: the newer id first."""

    def __init__(self, vector: np.ndarray, limit: int) -> None:
        self._vector = np.asarray(vector, dtype=np.float32)
        self._limit = limit
        self._ids = np.empty(0, np.int64)
        self._distances = np.empty(0, np.float64)

    def feed(self, rows: list[Any]) -> None:
        if not rows:
            return
        ids = np.fromiter((row[0] for row in rows), np.int64, len(rows))
        matrix = np.frombuffer(b"".join(bytes(row[1]) for row in rows), dtype="<f4")
        distances = 1.0 - matrix.reshape(len(rows), -1).astype(np.float64) @ self._vector
        ids = np.concatenate([self._ids, ids])
        distances = np.concatenate([self._distances, distances])
        best = np.lexsort((-ids, distances))[: self._limit]
        self._ids, self._distances = ids[best], distances[best]

    def nearest(self) -> list[tuple[int, float]]:
        """(id, distance), nearest first."""
        return [(int(i), float(d)) for i, d in zip(self._ids, self._distances, strict=True)]
