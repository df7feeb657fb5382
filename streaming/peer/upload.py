"""UploadReceiver: the ``video_upload`` channel's chunks written to a temporary file as they come.

The file is never held whole in memory (the reference server keeps every chunk in a dict).
SCTP delivers the channel in order, so chunks are appended; a chunk that arrives early waits
in a small bounded holding area, and duplicates are ignored. ``total_chunks`` is fixed by
the first chunk. Not wired into the session yet (issue 4).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from enum import Enum
from pathlib import Path

from ..protocol.upload import UPLOAD_CHUNK_SIZE, UPLOAD_HEADER

__all__ = ["UploadError", "UploadReceiver", "UploadStatus"]

_MAX_EARLY_CHUNKS = 16


class UploadError(ValueError):
    """A protocol violation or a limit; the message is fit for the ``errors`` list."""


class UploadStatus(Enum):
    """What one upload message did."""

    KEEPALIVE = "keepalive"
    """At most one byte: echo it back."""
    PROGRESS = "progress"
    DUPLICATE = "duplicate"
    COMPLETE = "complete"


class UploadReceiver:
    """Writes a video uploaded in chunks on ``video_upload`` to a private file, bounded in
    size; deletes it on close."""

    def __init__(
        self,
        max_bytes: int,
        directory: str | Path | None = None,
        chunk_size: int = UPLOAD_CHUNK_SIZE,
    ) -> None:
        self._max_bytes = max_bytes
        self._chunk_size = chunk_size
        fd, name = tempfile.mkstemp(prefix="visionstream-upload-", suffix=".video", dir=directory)
        self._file = os.fdopen(fd, "wb")
        self.path = Path(name)
        self.total: int | None = None
        self.next_index = 0
        self.bytes_received = 0
        self._early: dict[int, bytes] = {}
        self.failed = False
        self.complete = False

    def feed(self, message: bytes) -> UploadStatus:
        """Raises ``UploadError`` (and stops accepting) on any violation."""
        if len(message) <= 1:
            return UploadStatus.KEEPALIVE
        if self.failed or self.complete:
            raise UploadError("upload already ended: further chunks are refused")
        try:
            return self._accept(message)
        except UploadError:
            self._fail()
            raise

    def _accept(self, message: bytes) -> UploadStatus:
        if len(message) < UPLOAD_HEADER.size:
            raise UploadError(
                f"upload chunk of {len(message)} bytes is shorter than its "
                f"{UPLOAD_HEADER.size}-byte header"
            )
        index, total = UPLOAD_HEADER.unpack_from(message)
        payload = message[UPLOAD_HEADER.size :]
        if self.total is None:
            if total == 0:
                raise UploadError("upload declares 0 chunks")
            if (total - 1) * self._chunk_size >= self._max_bytes:
                raise UploadError(
                    f"upload of {total} chunks exceeds the {self._max_bytes}-byte upload limit"
                )
            self.total = total
        elif total != self.total:
            raise UploadError(f"upload changed its chunk count from {self.total} to {total}")
        if index >= total:
            raise UploadError(f"upload chunk {index} is out of range (total {total})")
        if len(payload) > self._chunk_size:
            # Also bounds the holding area: at most _MAX_EARLY_CHUNKS chunks of this size.
            raise UploadError(
                f"upload chunk of {len(payload)} bytes exceeds the {self._chunk_size}-byte chunk"
            )
        if index < self.next_index or index in self._early:
            return UploadStatus.DUPLICATE
        if index > self.next_index:
            if len(self._early) >= _MAX_EARLY_CHUNKS:
                raise UploadError(f"upload chunk {self.next_index} is missing")
            self._early[index] = payload
            return UploadStatus.PROGRESS
        self._append(payload)
        while self.next_index in self._early:
            self._append(self._early.pop(self.next_index))
        if self.next_index == total:
            self._file.close()
            self.complete = True
            return UploadStatus.COMPLETE
        return UploadStatus.PROGRESS

    def _append(self, payload: bytes) -> None:
        self.bytes_received += len(payload)
        if self.bytes_received > self._max_bytes:
            raise UploadError(f"upload exceeds the {self._max_bytes}-byte upload limit")
        self._file.write(payload)
        self.next_index += 1

    def abort(self) -> None:
        """Give up on the upload (it stalled): further chunks are refused, the file deleted."""
        self._fail()

    async def stalls(self, progress: asyncio.Event, timeout_s: float) -> bool:
        """Until the upload ends: True (and aborted) when ``progress`` (set on every chunk)
        stays unset for ``timeout_s``, a client that hangs halfway; False once it ended."""
        while not (self.complete or self.failed):
            progress.clear()
            try:
                await asyncio.wait_for(progress.wait(), timeout_s)
            except TimeoutError:
                self.abort()
                return True
        return False

    def _fail(self) -> None:
        self.failed = True
        self._early.clear()
        self.close()

    def close(self) -> None:
        """Idempotent: closes and deletes the temporary file."""
        if not self._file.closed:
            self._file.close()
        self.path.unlink(missing_ok=True)
