"""Client -> server file upload framing on the ``video_upload`` channel (reference §3).

Each SCTP message is a ``<II`` header (chunk index, total chunks) followed by raw file
bytes; messages of at most one byte are keepalives the server echoes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

__all__ = [
    "UPLOAD_CHANNEL",
    "UPLOAD_CHUNK_SIZE",
    "UPLOAD_HEADER",
    "iter_upload_chunks",
    "upload_chunk_count",
]

UPLOAD_CHANNEL = "video_upload"  # the data channel a file is uploaded on
UPLOAD_CHUNK_SIZE = 48 * 1024
UPLOAD_HEADER = struct.Struct("<II")


def upload_chunk_count(size: int, chunk_size: int = UPLOAD_CHUNK_SIZE) -> int:
    return max(1, -(-size // chunk_size))


def iter_upload_chunks(
    file: BinaryIO, size: int, chunk_size: int = UPLOAD_CHUNK_SIZE
) -> Iterator[bytes]:
    """Read ``file`` lazily, one framed chunk at a time (the file is never held whole)."""
    total = upload_chunk_count(size, chunk_size)
    for index in range(total):
        yield UPLOAD_HEADER.pack(index, total) + file.read(chunk_size)
