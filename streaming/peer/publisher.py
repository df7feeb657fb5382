"""WHIP publishers (RFC 9725): peers that only send video in, each one a pipeline source.

A publisher's first video track is read on the loop and its frames queued, newest kept, in
``PublishedFrames``: a ``FrameSource`` the hub reads as it reads a camera, under the URL
``whip://<resource id>`` (``Publishers.open`` opens it), converting to BGR on the hub's
thread. So a published stream reaches a pipeline exactly as a camera does, and the pipeline
is what runs the workflow, feeds its sinks and shows it to WHEP players.

A publisher ends when it is deleted, when its peer fails or closes, when its track ends, or
when it sends no frame for ``idle_timeout_s`` (a publisher killed without a goodbye leaves
its peer "connected" until ICE consent expires, much later). ``ended`` is then set, and the
route that started it stops its pipeline source (``Publishers.run``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from fractions import Fraction
from typing import Any

import av
from aiortc import MediaStreamTrack, RTCConfiguration, RTCPeerConnection
from aiortc.mediastreams import MediaStreamError

from sources import FrameSource, SourceError, SourceFrame
from sources.kinds import PUBLISHED_SCHEME

from ..errors import InvalidOffer, TooManySessions
from ..rtc.candidates import CandidateScreen
from ..rtc.offer import answer_offer, check_offer_sdp, track_peer_connection
from ..tasks import TaskOwner

__all__ = ["PublishedFrames", "Publisher", "Publishers"]

log = logging.getLogger(__name__)

_QUEUE_FRAMES = 2  # a live stream: the newest frames; older ones are dropped, counted


class PublishedFrames(FrameSource):
    """Frames a publisher's track delivers, read by the hub's thread; ``close`` wakes it."""

    def __init__(self) -> None:
        self._frames: deque[av.VideoFrame] = deque()
        self._changed = threading.Condition()
        self._closed = False
        self._index = 0
        self.dropped = 0

    def put(self, frame: av.VideoFrame) -> bool:
        """On the loop; False once closed (the pipeline let the source go)."""
        with self._changed:
            if self._closed:
                return False
            if len(self._frames) >= _QUEUE_FRAMES:
                self._frames.popleft()
                self.dropped += 1
            self._frames.append(frame)
            self._changed.notify_all()
            return True

    def read(self) -> SourceFrame | None:
        with self._changed:
            self._changed.wait_for(lambda: self._frames or self._closed)
            if self._closed:
                return None
            frame = self._frames.popleft()
        image = frame.to_ndarray(format="bgr24")
        index, self._index = self._index, self._index + 1
        time_base = frame.time_base or Fraction(1, 90000)
        return SourceFrame(image, frame.pts or 0, time_base, index)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class Publisher:
    """One WHIP resource: its peer connection, its frames, and where they go."""

    def __init__(self, idle_timeout_s: float) -> None:
        self.resource_id = uuid.uuid4().hex
        self.url = PUBLISHED_SCHEME + self.resource_id
        self.frames = PublishedFrames()
        self.pipeline_id: str | None = None
        self.source_id: int | None = None
        self.owns_pipeline = False
        """The pipeline was started for this publisher (a workflow resource): it ends with it."""
        self.stream_output: str | None = None
        """What WHEP players of this resource see unless they ask (None: the first image)."""
        self.viewers: weakref.WeakSet[Any] = weakref.WeakSet()
        """Its WHEP players' sessions (ended with it)."""
        self.ended = asyncio.Event()
        self.finished = asyncio.Event()
        """Set once its pipeline source is stopped and it is closed and unlisted."""
        self.reason = "deleted"
        self._idle_timeout_s = idle_timeout_s
        self._pc: RTCPeerConnection | None = None
        self._video = False
        self._tasks = TaskOwner(f"whip-{self.resource_id[:8]}", self._on_task_failure)

    async def answer(
        self,
        offer_sdp: str,
        ice: RTCConfiguration,
        gathering_timeout_s: float,
        connect_timeout_s: float,
        candidates: CandidateScreen,
        caller: str,
    ) -> str:
        """Apply the publisher's offer and return the complete answer (ICE gathered); its
        candidates screened for ``caller`` (the publisher's address)."""
        check_offer_sdp(offer_sdp)
        offer_sdp = candidates.screen(offer_sdp, caller, "the WHIP offer")
        if not any(line.startswith("m=video") for line in offer_sdp.splitlines()):
            raise InvalidOffer("the WHIP offer has no video section: nothing to process")
        pc = RTCPeerConnection(ice)
        self._pc = pc
        track_peer_connection(pc)
        pc.on("track", self._on_track)
        pc.on("connectionstatechange", self._on_connection_state)
        answer = await answer_offer(pc, offer_sdp, ice, gathering_timeout_s, "the WHIP offer")
        self._tasks.spawn(self._expire_unless_connected(connect_timeout_s))
        return answer

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "video" and not self._video:
            self._video = True
            self._tasks.spawn(self._read(track))
        else:
            self._tasks.spawn(self._discard(track))

    async def _read(self, track: MediaStreamTrack) -> None:
        while True:
            try:
                frame = await asyncio.wait_for(track.recv(), self._idle_timeout_s)
            except TimeoutError:
                self._end(f"no video for {self._idle_timeout_s:g} s")
                return
            except MediaStreamError:
                self._end("the publisher's track ended")
                return
            if isinstance(frame, av.VideoFrame) and not self.frames.put(frame):
                self._end("its pipeline source stopped")
                return

    async def _discard(self, track: MediaStreamTrack) -> None:
        # Audio (OBS sends it) and any second video are not used; read so aiortc's queue
        # stays empty.
        try:
            while True:
                await track.recv()
        except MediaStreamError:
            return

    async def _on_connection_state(self) -> None:
        assert self._pc is not None
        state = self._pc.connectionState
        log.info("whip %s connection %s", self.resource_id[:8], state)
        if state in ("failed", "closed"):
            self._end(f"its connection {state}")

    async def _expire_unless_connected(self, timeout: float) -> None:
        await asyncio.sleep(timeout)  # a timer: the deadline itself is what we wait for
        if self._pc is not None and self._pc.connectionState != "connected":
            self._end(f"it did not connect within {timeout:g} s")
        elif not self._video:
            self._end(f"it sent no video track within {timeout:g} s")

    def _on_task_failure(self, name: str, exc: BaseException) -> None:
        self._end(f"internal error in {name} ({type(exc).__name__})")

    def _end(self, reason: str) -> None:
        if not self.ended.is_set():
            self.reason = reason
            self.ended.set()

    def end(self) -> None:
        """Deleted by its publisher (or the server closing)."""
        self._end("deleted")

    async def close(self) -> None:
        """Idempotent: its frames end (the hub's reader stops), its tasks and peer close."""
        self._end("closed")
        self.frames.close()
        await self._tasks.close()
        if self._pc is not None:
            await self._pc.close()


Cleanup = Callable[[Publisher], Awaitable[None]]


class Publishers:
    """This server's WHIP resources by id, at most ``limit``; ``open`` opens their
    ``whip://`` URLs for the hub."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._by_id: dict[str, Publisher] = {}
        self._tasks = TaskOwner("whip")

    def __len__(self) -> int:
        return len(self._by_id)

    def open(self, url: str) -> FrameSource:
        """The frames of ``whip://<resource id>``, for the hub (``sources.kinds``)."""
        publisher = self._by_id.get(url.removeprefix(PUBLISHED_SCHEME))
        if publisher is None or publisher.frames.closed:
            raise SourceError(f"{url} is not a live WHIP resource")
        return publisher.frames

    def get(self, resource_id: str) -> Publisher | None:
        return self._by_id.get(resource_id)

    def of_source(self, pipeline_id: str, source_id: int) -> Publisher | None:
        """The publisher that is this pipeline source, if one is."""
        return next(
            (
                p
                for p in self._by_id.values()
                if p.pipeline_id == pipeline_id and p.source_id == source_id
            ),
            None,
        )

    def create(self, idle_timeout_s: float) -> Publisher:
        """A new publisher, listed (so the hub can open it); raises 429 past the limit."""
        if len(self._by_id) >= self._limit:
            raise TooManySessions(
                f"{self._limit} WHIP publishers are connected (VISIONSTREAM_MAX_SESSIONS)"
            )
        publisher = Publisher(idle_timeout_s)
        self._by_id[publisher.resource_id] = publisher
        return publisher

    def run(self, publisher: Publisher, cleanup: Cleanup) -> None:
        """Once ``publisher`` ends: ``cleanup`` (its pipeline source stopped), then closed."""
        self._tasks.spawn(
            self._until_ended(publisher, cleanup), f"whip-{publisher.resource_id[:8]}"
        )

    async def _until_ended(self, publisher: Publisher, cleanup: Cleanup) -> None:
        try:
            await publisher.ended.wait()
            log.info("whip %s ended: %s", publisher.resource_id[:8], publisher.reason)
            await cleanup(publisher)
        finally:
            await self.discard(publisher)

    async def discard(self, publisher: Publisher) -> None:
        """Closed and unlisted (idempotent)."""
        await publisher.close()
        self._by_id.pop(publisher.resource_id, None)
        publisher.finished.set()

    async def delete(self, publisher: Publisher) -> None:
        """Ends it and waits until its pipeline source is stopped and it is closed."""
        publisher.end()
        await publisher.finished.wait()

    async def close_all(self) -> None:
        for publisher in list(self._by_id.values()):
            publisher.end()
        await self._tasks.close()
        for publisher in list(self._by_id.values()):
            await self.discard(publisher)
