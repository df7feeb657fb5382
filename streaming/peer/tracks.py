"""The outbound video track: hands aiortc's sender the frames the session loop publishes."""

from __future__ import annotations

import asyncio
import contextlib

import av
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

from streaming.rtc.track import tail_flush_frame

from ..buffering import BufferClosed, FrameBuffer, Strategy
from ..rtc.release import hidden_frame_after

__all__ = ["OutboundVideoTrack"]


class OutboundVideoTrack(MediaStreamTrack):
    """Pull-driven by aiortc; ``recv`` blocks until the next processed frame exists.

    Frames and the data-channel results carry the same pts, counted from the first frame
    returned (see ``FrameProcessor``), and clients pair them by it. So the first frame a
    client sees must be that one: there is no placeholder frame, and the first frame is
    never replaced by a newer one before aiortc has taken it (a second ``publish`` waits).

    With ``release_held_frames`` set, each frame is followed by a hidden one, unless the next
    frame is already waiting (its packets release the previous frame anyway): a receiver that
    holds each frame until the next begins then shows it at once (see ``release.py``).
    """

    kind = "video"

    def __init__(self, strategy: Strategy, capacity: int) -> None:
        super().__init__()
        self._frames: FrameBuffer[av.VideoFrame] = FrameBuffer(strategy, capacity)
        self._last: av.VideoFrame | None = None
        self._released = True  # whether the receiver already has everything sent so far
        self._published = False
        self._first_taken = asyncio.Event()
        self.release_held_frames = False

    async def publish(self, frame: av.VideoFrame) -> None:
        if self._published:
            await self._first_taken.wait()
        self._published = True
        with contextlib.suppress(BufferClosed):  # the session ended while this frame was made
            await self._frames.put(frame)

    async def finish(self) -> None:
        """No more frames: ``recv`` raises once the queued ones are sent. Idempotent."""
        self._first_taken.set()
        await self._frames.close()

    async def recv(self) -> av.VideoFrame | av.Packet:
        if not self._released and len(self._frames) == 0 and self._last is not None:
            self._released = True
            hidden = hidden_frame_after(self._last)
            if hidden is not None:
                return hidden  # aiortc's sender packs a Packet as it is, no encoding
        frame = await self._frames.get()
        if frame is None:
            last, self._last = self._last, None
            if last is not None and not self.release_held_frames:
                # Lets the client's receiver release the real final frame (see the helper).
                return tail_flush_frame(last)
            self.stop()
            raise MediaStreamError
        self._last = frame
        self._released = not self.release_held_frames
        self._first_taken.set()
        return frame
