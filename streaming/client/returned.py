"""Returned: what comes back from the server, as the program reads it: frames (from the video
track or inside messages), and each frame paired with its own result message."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from datetime import datetime
from typing import Any

import av
import numpy as np

from ..buffering import FrameBuffer
from ..protocol.messages import VideoMetadata
from .pairing import PtsPairer, rtp_ticks

__all__ = ["Frame", "Result", "Returned"]

Frame = tuple[np.ndarray, VideoMetadata]
Result = tuple[np.ndarray | None, Any, VideoMetadata]

_RECENT_METADATA = 64
# After the completion message, how long the video track may lag behind it: RTP and the
# data channel are separate paths, and the last frames usually arrive just after.
_TAIL_GRACE_S = 2.0


class Returned:
    """Two bounded buffers (oldest dropped): ``frames`` and ``results``. A frame takes the
    metadata of its message when that arrived first; a message is paired with its frame by
    pts. ``end`` lets readers drain what arrived, then stop."""

    def __init__(self, size: int, receives_video: bool = False) -> None:
        self.pairer = PtsPairer()
        self.frames: FrameBuffer[Frame] = FrameBuffer("drop_oldest", size)
        self.results: FrameBuffer[Result] = FrameBuffer("drop_oldest", size)
        self.receives_video = receives_video
        """Frames come on the video track (set once the offer is sent)."""
        self.ended = asyncio.Event()
        self._recent: OrderedDict[int, VideoMetadata] = OrderedDict()
        self._last_message_ticks: int | None = None
        self._last_frame_ticks: int | None = None
        self._tail_arrived = asyncio.Event()

    async def frame(self, frame: av.VideoFrame) -> bool:
        """A frame from the video track; False once the stream has ended."""
        image = frame.to_ndarray(format="bgr24")
        ticks = rtp_ticks(frame.pts, frame.time_base)
        metadata = self._recent.get(ticks) if ticks is not None else None
        if metadata is None:
            # Its message has not arrived yet: what the frame itself tells.
            metadata = VideoMetadata(
                frame_id=frame.pts or 0,
                received_at=datetime.now(),
                pts=frame.pts,
                time_base=float(frame.time_base) if frame.time_base is not None else None,
                width=frame.width,
                height=frame.height,
            )
        if self.ended.is_set():
            return False
        await self.frames.put((image, metadata))
        if ticks is not None and (paired := self.pairer.add_frame(ticks, image)):
            await self.results.put(paired)
        if ticks is not None:
            self._last_frame_ticks = ticks
            if self._tail_seen():
                self._tail_arrived.set()
        return True

    async def message(self, image: np.ndarray | None, data: Any, metadata: VideoMetadata) -> None:
        """A result message (``image``: a frame that came inside it)."""
        ticks = rtp_ticks(metadata.pts, metadata.time_base)
        if ticks is not None:
            self._last_message_ticks = ticks
            self._recent[ticks] = metadata
            if len(self._recent) > _RECENT_METADATA:
                self._recent.popitem(last=False)
        if image is not None:
            await self.frames.put((image, metadata))
        if self.receives_video and ticks is not None:
            paired = self.pairer.add_data(ticks, data, metadata)
            if paired is not None:
                await self.results.put(paired)
        else:
            await self.results.put((image, data, metadata))

    async def end_after_tail(self) -> None:
        """The server said the stream is over: wait (briefly) for the frames still on their
        way, then end."""
        # The event is set whenever a frame catches up with the messages, which happens all
        # through the stream: only a catch-up from now on is the tail's.
        self._tail_arrived.clear()
        if self.receives_video and not self._tail_seen():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._tail_arrived.wait(), _TAIL_GRACE_S)
        await self.end()

    async def end(self) -> None:
        self.ended.set()
        await self.frames.close()
        await self.results.close()

    def _tail_seen(self) -> bool:
        last, seen = self._last_message_ticks, self._last_frame_ticks
        return last is None or (seen is not None and seen >= last - self.pairer.tolerance)
