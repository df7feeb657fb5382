"""The result channel: chunked result messages to the client with event-driven backpressure."""

from __future__ import annotations

import asyncio
import logging

from aiortc import RTCDataChannel

from ..protocol.chunking import iter_chunks

__all__ = ["ResultChannel"]

log = logging.getLogger(__name__)


class ResultChannel:
    """Sends whole messages as ``<III``-framed chunks on the client's ``inference`` channel.

    When more than ``high_water`` bytes are queued, sending waits for aiortc's
    ``bufferedamountlow`` event (threshold ``low_water``) instead of polling.
    """

    def __init__(self, high_water: int, low_water: int, drain_timeout: float) -> None:
        self._high = high_water
        self._low = min(low_water, high_water)
        self._drain_timeout = drain_timeout
        self._channel: RTCDataChannel | None = None
        self._attached = asyncio.Event()
        self._drained = asyncio.Event()
        self.abandoned = 0

    @property
    def channel(self) -> RTCDataChannel | None:
        return self._channel

    def attach(self, channel: RTCDataChannel) -> None:
        """The last announced non-upload channel wins, as in the reference server."""
        self._channel = channel
        channel.bufferedAmountLowThreshold = self._low
        channel.on("bufferedamountlow", self._drained.set)
        channel.on("close", self._drained.set)
        self._attached.set()

    async def wait_attached(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._attached.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def _open(self) -> RTCDataChannel | None:
        channel = self._channel
        return channel if channel is not None and channel.readyState == "open" else None

    async def send(self, message_id: int, payload: bytes) -> bool:
        """Send one message; False if it was dropped (no open channel, or congestion timeout)."""
        for chunk in iter_chunks(message_id, payload):
            channel = self._open()
            if channel is None:
                return False
            if channel.bufferedAmount > self._high:
                self._drained.clear()
                try:
                    await asyncio.wait_for(self._drained.wait(), self._drain_timeout)
                except TimeoutError:
                    self.abandoned += 1
                    log.warning(
                        "result channel congested for %.0fs: message %d abandoned",
                        self._drain_timeout,
                        message_id,
                    )
                    return False
                channel = self._open()
                if channel is None:
                    return False
            channel.send(chunk)
        return True

    async def flush(self, timeout: float) -> None:
        """Wait (bounded) until everything queued has left, e.g. before closing the peer."""
        channel = self._open()
        if channel is None or channel.bufferedAmount == 0:
            return
        channel.bufferedAmountLowThreshold = 0
        self._drained.clear()
        try:
            await asyncio.wait_for(self._drained.wait(), timeout)
        except TimeoutError:
            log.debug("result channel still had %d bytes queued", channel.bufferedAmount)
        finally:
            channel.bufferedAmountLowThreshold = self._low
