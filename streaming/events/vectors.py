"""Events' vectors, as the store keeps and compares them: unit-length float32, float32
bytes on SQLite compared by sqlite-vec's ``vec_distance_cosine``, ``real[]`` on PostgreSQL
compared by migration 0003's ``event_vector_distance``.

sqlite-vec is a loadable extension, and the ``sqlite3`` of Debian's Python (and others) is
built without ``enable_load_extension``: the store's SQLite is pysqlite3's where that is
installed (it bundles a recent SQLite, FTS5 included), and vectors are refused with a
reason where the extension cannot be loaded."""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, LargeBinary, bindparam, func
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.types import REAL

from ..language import ProviderError, Providers
from ..language.embeddings import Embedding
from .schema import event_vectors

__all__ = [
    "Embedding",
    "VectorsUnavailable",
    "distance",
    "embedding_for",
    "load_sqlite_vec",
    "meaning",
    "read",
    "sqlite_module",
    "stored",
]

log = logging.getLogger(__name__)


class VectorsUnavailable(RuntimeError):
    """This store cannot compare vectors (its SQLite cannot load sqlite-vec)."""


def meaning(description: str, class_name: str | None, kind: str) -> str:
    """What is embedded of an event: its description, then what it is of (a search's
    words are compared with this)."""
    return f"{description}\n{class_name or 'object'} ({kind.replace('_', ' ')})"


def embedding_for(
    providers: Providers | None, description: str | None, class_name: str | None, kind: str
) -> Embedding | None:
    """The vector of an event's new description, where the server makes them
    (``STREAMING_VLM_EMBEDDINGS``); None without, or when the provider fails (the
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
        log.warning("event store: sqlite-vec not loaded (no search by meaning): %s", exc)
        return False
    return True


def stored(vector: np.ndarray, dialect: str) -> bytes | list[float]:
    """A vector as its column holds it."""
    if dialect == "postgresql":
        return [float(v) for v in vector]
    return np.asarray(vector, dtype="<f4").tobytes()


def read(value: bytes | list[float]) -> np.ndarray:
    if isinstance(value, bytes | bytearray | memoryview):
        return np.frombuffer(bytes(value), dtype="<f4").astype(np.float32)
    return np.asarray(value, dtype=np.float32)


def distance(vector: np.ndarray, dialect: str) -> tuple[ColumnElement[Any], ColumnElement[bool]]:
    """The cosine distance of each stored vector to ``vector`` (0: the same direction, 2:
    opposite), and the condition that a stored vector has as many dimensions."""
    column = event_vectors.c.vector
    if dialect == "postgresql":
        query = bindparam("query_vector", stored(vector, dialect), type_=ARRAY(REAL))
        return func.event_vector_distance(column, query), func.cardinality(column) == len(vector)
    query = bindparam("query_vector", stored(vector, dialect), type_=LargeBinary)
    return func.vec_distance_cosine(column, query), func.length(column) == 4 * len(vector)
