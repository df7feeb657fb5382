"""ACK flow control for non-realtime sessions (reference §2.5), with a window wider than 1."""

from __future__ import annotations

import asyncio

__all__ = ["AckGate"]


class AckGate:
    """Holds back frame ``n`` until ``n <= last_ack + window``.

    Pacing starts only with the first ACK, so clients that never ACK run unpaced (the
    reference's backward-compatible rule). Disabled entirely in realtime sessions.
    """

    def __init__(self, window: int, enabled: bool) -> None:
        self.window = window
        self.enabled = enabled
        self.last_ack = 0
        self._changed = asyncio.Condition()
        self._closed = False

    async def ack(self, frame_id: int) -> None:
        async with self._changed:
            if frame_id > self.last_ack:
                self.last_ack = frame_id
                self._changed.notify_all()

    def _may_proceed(self, frame_id: int) -> bool:
        return (
            self._closed
            or not self.enabled
            or self.last_ack == 0
            or frame_id <= self.last_ack + self.window
        )

    async def wait_turn(self, frame_id: int) -> bool:
        """Wait until frame ``frame_id`` may be produced; False once the gate is closed."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._may_proceed(frame_id))
            return not self._closed

    async def close(self) -> None:
        async with self._changed:
            self._closed = True
            self._changed.notify_all()
