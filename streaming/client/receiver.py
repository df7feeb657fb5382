"""ResultReceiver: the incoming side of a client session's ``inference`` channel.

Chunks are joined into whole messages as they arrive (cheap, on the loop); whole messages
wait in a bounded inbox; the session's task reads them in order, parses each into a typed
``ResultMessage``, and hands it on: errors and data to the program's handlers, frames and
results to their pairing, and an ACK back once the handlers ran (when the session sends
them). The inbox's overflow policy: a realtime session whose handlers fall
``inbox_messages`` behind loses the oldest whole messages, counted in
``stats.messages_dropped``; the completion is always the newest, so it is never lost. A
session that sends ACKs drops none: the server's ACK window bounds what it sends ahead.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from ..protocol.chunking import Reassembler, maybe_gunzip
from ..protocol.messages import ResultMessage, VideoMetadata
from .handlers import Handlers
from .returned import Returned

if TYPE_CHECKING:
    from .session import SessionStats

__all__ = ["ResultReceiver"]

log = logging.getLogger(__name__)


class ResultReceiver:
    """Result messages from the server to the program; ``on_complete(reason)`` once the
    server says the stream is over."""

    def __init__(
        self,
        stats: SessionStats,
        handlers: Handlers,
        returned: Returned,
        stream_output: list[str],
        inbox_messages: int,
        on_complete: Callable[[str | None], None],
    ) -> None:
        self._stats = stats
        self._handlers = handlers
        self._returned = returned
        self._stream_output = stream_output
        self._on_complete = on_complete
        self.reassembler = Reassembler()
        self._inbox: asyncio.Queue[bytes | str] = asyncio.Queue()
        self._inbox_limit = inbox_messages
        self.channel: Any = None
        """Where ACKs go (the ``inference`` channel), once it exists."""
        self.send_acks = False
        """The session asked for non-realtime processing: each message is acknowledged."""
        self.video_in_messages = False
        """Frames come back as images inside the messages (no video track)."""

    def receive(self, raw: bytes | str) -> None:
        """On the loop, from aiortc: chunks are joined at once (cheap), so the bounded inbox
        holds whole messages and an overflow drops whole messages, never a chunk."""
        if isinstance(raw, bytes):
            try:
                complete = self.reassembler.add(raw)
            except ValueError as exc:
                self._malformed(exc)
                return
            if complete is None:
                return
            raw = complete[1]
        if not self.send_acks and self._inbox.qsize() >= self._inbox_limit:
            self._inbox.get_nowait()
            if not self._stats.messages_dropped:
                log.warning(
                    "the program handles results slower than they come: dropping "
                    "the oldest (stats.messages_dropped counts them)"
                )
            self._stats.messages_dropped += 1
        self._inbox.put_nowait(raw)

    async def run(self) -> None:
        """The session's task: messages to handlers, in order, until cancelled."""
        while True:
            message = self._decode(await self._inbox.get())
            if message is not None:
                await self._handle(message)

    def _decode(self, raw: bytes | str) -> ResultMessage | None:
        try:
            return ResultMessage.from_json(maybe_gunzip(raw) if isinstance(raw, bytes) else raw)
        except (ValueError, zlib.error, EOFError, OSError) as exc:
            self._malformed(exc)
            return None

    def _malformed(self, exc: Exception) -> None:
        self._stats.malformed_messages += 1
        log.warning("skipping an unreadable message from the server: %s", exc)

    async def _handle(self, message: ResultMessage) -> None:
        self._stats.messages_received += 1
        if message.processing_complete:
            self._on_complete(message.termination_reason)
            return
        errors = message.errors
        try:
            metadata = message.metadata()
        except (KeyError, TypeError, ValueError) as exc:
            self._stats.malformed_messages += 1
            log.warning("skipping a result message without valid video_metadata: %s", exc)
            return
        data = message.serialized_output_data
        if errors:
            await self._handlers.errors(errors, metadata)
        image = None
        if self.video_in_messages and isinstance(data, dict):
            image, data = self._image_from(data)
        await self._route(image, data, metadata)
        await self._handlers.data(data, metadata)
        # After the handlers ran: the server sends more only as fast as we consume.
        if self.send_acks and self.channel is not None and self.channel.readyState == "open":
            self.channel.send(json.dumps({"ack": metadata.frame_id}))
            self._stats.acks_sent += 1

    async def _route(self, image: np.ndarray | None, data: Any, metadata: VideoMetadata) -> None:
        if image is not None:
            self._stats.frames_received += 1
        await self._returned.message(image, data, metadata)

    def _image_from(self, data: dict[str, Any]) -> tuple[np.ndarray | None, dict[str, Any]]:
        """The first ``stream_output`` image in the message; those outputs leave ``data``."""
        image = None
        names = self._stream_output
        for name in names:
            value = data.get(name)
            if image is None and isinstance(value, dict) and value.get("type") == "base64":
                try:
                    encoded = np.frombuffer(base64.b64decode(value["value"]), np.uint8)
                    image = cv2.imdecode(encoded, cv2.IMREAD_COLOR)
                except (KeyError, TypeError, ValueError):
                    log.warning("output '%s' is not a readable image", name)
        rest = {k: v for k, v in data.items() if k not in names}
        return image, rest
