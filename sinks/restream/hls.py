"""A source's restream as HLS: MPEG-TS segments cut at keyframes from the shared encoder, the
newest few kept in memory, and their playlist.

HLS players hold no connection, so an HLS restream counts as one player while it is asked
for: the first request starts it, and it stops ``idle_s`` after the last one.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import time
from collections import deque
from dataclasses import dataclass

import av

from .encoding import RTP_CLOCK, EncodedFrame, add_h264_stream, muxed
from .restream import Restream, Subscription, cancelled

__all__ = ["HlsStream", "Segment", "mpegts"]


@dataclass(frozen=True)
class Segment:
    sequence: int
    duration_s: float
    data: bytes


def mpegts(frames: list[EncodedFrame]) -> bytes:
    """Access units (the first a keyframe) as one MPEG-TS file, PAT and PMT first: a segment
    a player can start on. Timestamps stay the restream's, continuous across segments."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mpegts") as container:
        stream = add_h264_stream(container, frames[0])
        for frame in frames:
            muxed(container, stream, frame, 0)
    return buffer.getvalue()


class HlsStream:
    """One source's HLS output, on the restream it shares with every other player."""

    def __init__(self, restream: Restream, segments: int, idle_s: float) -> None:
        self._restream = restream
        self._count = segments
        self._idle_s = idle_s
        self._segments: deque[Segment] = deque(maxlen=segments)
        self._sequence = 0
        self._changed = asyncio.Event()
        self._asked_at = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self.ended: str | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def touch(self) -> None:
        """A player asked for something: the stream runs (again) and stays up."""
        self._asked_at = time.monotonic()
        if not self.running:
            self.ended = None
            subscription = self._restream.subscribe("h264")
            self._task = asyncio.get_running_loop().create_task(
                self._run(subscription), name=f"hls {self._restream.name}"
            )

    async def playlist(self, query: str, wait_s: float) -> str | None:
        """The live playlist (segment URIs carrying ``query``), once it lists
        ``min(3, segments)`` segments; None if none came within ``wait_s``."""
        self.touch()
        wanted = min(3, self._count)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                while len(self._segments) < wanted and self.running:
                    self._changed.clear()
                    await self._changed.wait()
        segments = list(self._segments)
        if not segments:
            return None
        target = max(1, math.ceil(max(s.duration_s for s in segments)))
        suffix = f"?{query}" if query else ""
        lines = [
            "#EXTM3U",
            "#EXT-X-VERSION:3",
            f"#EXT-X-TARGETDURATION:{target}",
            f"#EXT-X-MEDIA-SEQUENCE:{segments[0].sequence}",
            "#EXT-X-INDEPENDENT-SEGMENTS",
        ]
        for segment in segments:
            lines.append(f"#EXTINF:{segment.duration_s:.3f},")
            lines.append(f"segment-{segment.sequence}.ts{suffix}")
        return "\n".join(lines) + "\n"

    def segment(self, sequence: int) -> bytes | None:
        self.touch()
        return next((s.data for s in self._segments if s.sequence == sequence), None)

    async def _run(self, subscription: Subscription) -> None:
        pending: list[EncodedFrame] = []
        target = self._restream.config.keyframe_s * RTP_CLOCK
        try:
            while True:
                idle = self._idle_s - (time.monotonic() - self._asked_at)
                if idle <= 0:
                    break
                try:
                    async with asyncio.timeout(idle):
                        frame = await subscription.next()
                except TimeoutError:
                    continue
                if frame is None:
                    self.ended = subscription.reason
                    break
                if frame.keyframe and pending and frame.pts - pending[0].pts >= 0.9 * target:
                    await self._cut(pending, frame.pts)
                    pending = []
                pending.append(frame)
        finally:
            subscription.close("HLS idle")
            self._segments.clear()
            self._changed.set()

    async def _cut(self, frames: list[EncodedFrame], end_pts: int) -> None:
        data = await asyncio.to_thread(mpegts, frames)
        duration = (end_pts - frames[0].pts) / RTP_CLOCK
        self._segments.append(Segment(self._sequence, duration, data))
        self._sequence += 1
        self._changed.set()

    async def close(self) -> None:
        """Idempotent."""
        task, self._task = self._task, None
        await cancelled(task)
