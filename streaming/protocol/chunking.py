"""Server -> client result framing: ``<III`` header (message id, chunk index, total) + payload."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator

__all__ = [
    "CHUNK_SIZE",
    "HEADER",
    "Reassembler",
    "iter_chunks",
    "maybe_gunzip",
]

CHUNK_SIZE = 48 * 1024
HEADER = struct.Struct("<III")
_GZIP_MAGIC = b"\x1f\x8b"


def iter_chunks(message_id: int, payload: bytes, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """Split one message into binary chunks; an empty payload is still one chunk."""
    total = max(1, -(-len(payload) // chunk_size))
    view = memoryview(payload)
    for index in range(total):
        piece = view[index * chunk_size : (index + 1) * chunk_size]
        yield HEADER.pack(message_id, index, total) + piece.tobytes()


def maybe_gunzip(payload: bytes) -> bytes:
    """The client rule: a payload starting with the gzip magic is compressed."""
    return gzip.decompress(payload) if payload[:2] == _GZIP_MAGIC else payload


class Reassembler:
    """Client side: collects chunks per message id, bounded so a lost chunk cannot leak."""

    def __init__(self, max_pending: int = 64) -> None:
        self._pending: dict[int, dict[int, bytes]] = {}
        self._totals: dict[int, int] = {}
        self._max_pending = max_pending

    def add(self, chunk: bytes) -> tuple[int, bytes] | None:
        if len(chunk) < HEADER.size:
            raise ValueError(f"chunk of {len(chunk)} bytes is shorter than its header")
        message_id, index, total = HEADER.unpack_from(chunk)
        if total == 0 or index >= total:
            raise ValueError(f"chunk {index} of {total} is out of range")
        parts = self._pending.setdefault(message_id, {})
        self._totals[message_id] = total
        parts[index] = chunk[HEADER.size :]
        if len(parts) < total:
            if len(self._pending) > self._max_pending:
                oldest = next(iter(self._pending))
                del self._pending[oldest], self._totals[oldest]
            return None
        del self._pending[message_id], self._totals[message_id]
        return message_id, b"".join(parts[i] for i in range(total))
