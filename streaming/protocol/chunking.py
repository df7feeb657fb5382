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
    """Client side: collects chunks per message id, bounded in messages and in bytes.

    The headers come from the peer, so nothing is sized from them: a message whose declared
    size exceeds the byte budget is refused at its first chunk, incomplete messages more
    than ``window`` ids behind the newest one are dropped (message ids are frame ids, so a
    lost chunk is given ``window`` frames to turn up), and the oldest incomplete messages
    are dropped while the held bytes exceed ``max_bytes``. ``dropped`` counts messages lost
    either way, ``rejected`` the chunks refused outright.
    """

    def __init__(
        self, window: int = 64, max_bytes: int = 64 << 20, chunk_size: int = CHUNK_SIZE
    ) -> None:
        self._window = window
        self._max_bytes = max_bytes
        self._chunk_size = chunk_size
        self._pending: dict[int, dict[int, bytes]] = {}  # insertion order = arrival order
        self._totals: dict[int, int] = {}
        self._newest: int | None = None
        self.pending_bytes = 0
        self.dropped = 0
        self.rejected = 0

    def add(self, chunk: bytes) -> tuple[int, bytes] | None:
        """Returns ``(message id, payload)`` once complete; raises ``ValueError`` on a bad chunk."""
        if len(chunk) < HEADER.size:
            self.rejected += 1
            raise ValueError(f"chunk of {len(chunk)} bytes is shorter than its header")
        message_id, index, total = HEADER.unpack_from(chunk)
        if total == 0 or index >= total:
            self.rejected += 1
            raise ValueError(f"chunk {index} of {total} is out of range")
        if (total - 1) * self._chunk_size >= self._max_bytes:
            self.rejected += 1
            raise ValueError(
                f"message {message_id} declares {total} chunks, beyond the "
                f"{self._max_bytes}-byte budget"
            )
        if self._newest is not None and message_id + self._window < self._newest:
            self.rejected += 1
            raise ValueError(f"chunk of message {message_id} arrived after its window closed")
        known = self._totals.setdefault(message_id, total)
        if known != total:
            self._discard(message_id)
            self.rejected += 1
            raise ValueError(f"message {message_id} changed its chunk count ({known} -> {total})")
        parts = self._pending.setdefault(message_id, {})
        payload = chunk[HEADER.size :]
        self.pending_bytes += len(payload) - len(parts.get(index, b""))
        parts[index] = payload
        if self._newest is None or message_id > self._newest:
            self._newest = message_id
        if len(parts) == total:
            self._discard(message_id)
            self._evict()
            return message_id, b"".join(parts[i] for i in range(total))
        self._evict()
        return None

    def _evict(self) -> None:
        assert self._newest is not None
        for stale in [m for m in self._pending if m + self._window < self._newest]:
            self._discard(stale)
            self.dropped += 1
        while self.pending_bytes > self._max_bytes and self._pending:
            self._discard(next(iter(self._pending)))
            self.dropped += 1

    def _discard(self, message_id: int) -> None:
        parts = self._pending.pop(message_id, {})
        self._totals.pop(message_id, None)
        self.pending_bytes -= sum(len(p) for p in parts.values())
