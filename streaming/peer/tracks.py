"""The outbound video track: hands aiortc's sender the frames the session loop publishes."""

from __future__ import annotations

import contextlib

import av
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

from sources.track import tail_flush_frame

from ..buffering import BufferClosed, FrameBuffer, Strategy

__all__ = ["OutboundVideoTrack"]


class OutboundVideoTrack(MediaStreamTrack):
    """Pull-driven by aiortc; ``recv`` blocks until the next processed frame exists.

    Frames keep the pts and time_base of their input frame, so clients pair them with the
    data-channel results by pts. There is no placeholder frame: the first frame a client sees
    is the first processed one, which keeps pts on both paths counting from the same origin.
    """

    kind = "video"

    def __init__(self, strategy: Strategy, capacity: int) -> None:
        super().__init__()
        self._frames: FrameBuffer[av.VideoFrame] = FrameBuffer(strategy, capacity)
        self._last: av.VideoFrame | None = None

    async def publish(self, frame: av.VideoFrame) -> None:
        with contextlib.suppress(BufferClosed):  # the session ended while this frame was made
            await self._frames.put(frame)

    async def finish(self) -> None:
        """No more frames: ``recv`` raises once the queued ones are sent. Idempotent."""
        await self._frames.close()

    async def recv(self) -> av.VideoFrame:
        frame = await self._frames.get()
        if frame is None:
            last, self._last = self._last, None
            if last is not None:
                # Lets the client's receiver release the real final frame (see the helper).
                return tail_flush_frame(last)
            self.stop()
            raise MediaStreamError
        self._last = frame
        return frame
