"""One source's restream: the pictures it is offered, one encoder shared by every player and
protocol, and the players' subscriptions.

The encoder runs only while someone subscribes: the first subscription starts its task, the
last one leaving ends it. Pictures are taken at most ``fps`` a second, the newest winning;
each is encoded once (H.264 for RTSP and HLS, JPEG for MJPEG) on a worker thread, and handed
to every subscription on the loop. A subscription that falls ``stall_s`` behind is closed
("dropped") so that nobody else ever waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import cv2
import numpy as np

from .encoding import RTP_CLOCK, EncodedFrame, H264Encoding, fitted_size, jpeg

__all__ = [
    "Restream",
    "RestreamConfig",
    "RestreamFull",
    "Subscription",
    "cancelled",
    "idle_stats",
]

Kind = Literal["h264", "jpeg"]


async def cancelled(task: asyncio.Task[None] | None) -> None:
    """``task`` cancelled and finished (None: nothing to do)."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class RestreamFull(Exception):
    """The source has as many players as it may have."""


@dataclass(frozen=True)
class RestreamConfig:
    """What every restream of a server is made with (the server's restream settings)."""

    fps: float = 10.0
    max_width: int = 1280
    max_height: int = 720
    encoder: str = "libx264"
    kbps: int = 2000
    keyframe_s: float = 1.0
    jpeg_quality: int = 75
    stall_s: float = 10.0
    max_viewers: int = 32


class Subscription:
    """One player's (or one output's) share of a restream: H.264 access units from a
    keyframe on, or the newest JPEG. ``next`` returns None once it is closed (``reason``)."""

    def __init__(self, restream: Restream, kind: Kind, capacity: int) -> None:
        self.kind: Kind = kind
        self.reason: str | None = None
        self._restream = restream
        self._items: deque[Any] = deque()
        self._capacity = capacity
        self._ready = asyncio.Event()
        self._started = kind == "jpeg"
        self._taken_at = time.monotonic()

    @property
    def closed(self) -> bool:
        return self.reason is not None

    def put(self, item: EncodedFrame | bytes, now: float) -> None:
        """On the loop, from the restream: H.264 in order, JPEG newest-only."""
        if self.closed:
            return
        if isinstance(item, EncodedFrame):
            if not self._started and not item.keyframe:
                return  # a decoder starts on a keyframe: the restream forces one soon
            self._started = True
            if len(self._items) >= self._capacity:
                self.close("dropped: the player stopped reading")
                return
            self._items.append(item)
        else:
            if self._items and now - self._taken_at > self._restream.config.stall_s:
                self.close("dropped: the player stopped reading")
                return
            self._items.clear()
            self._items.append(item)
        self._ready.set()

    async def next(self) -> Any:
        """The next access unit (``EncodedFrame``) or JPEG (``bytes``); None once closed."""
        while not self._items:
            if self.closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        self._taken_at = time.monotonic()
        return self._items.popleft()

    def close(self, reason: str = "closed") -> None:
        """Idempotent: the restream forgets it (its encoder stops with the last one)."""
        if self.closed:
            return
        self.reason = reason
        self._ready.set()
        self._restream.unsubscribe(self)


@dataclass
class _Counts:
    frames_in: int = 0
    encoded: int = 0
    jpegs: int = 0
    dropped_players: int = 0
    encoders_started: int = 0


def idle_stats() -> dict[str, Any]:
    """The figures of a restream nobody has played yet: every one at zero."""
    return {
        "encoding": False,
        "encoder": None,
        "size": None,
        "subscriptions": {},
        **vars(_Counts()),
    }


@dataclass
class _Picture:
    make: Callable[[], np.ndarray]
    """The BGR picture, made on the restream's thread (a frame's pixels may not exist yet)."""
    at: float
    """``time.monotonic()`` when it was offered."""


@dataclass
class Restream:
    """One source's restream. ``on_active(True)`` when it needs pictures (its first
    subscription), ``on_active(False)`` when it no longer does (its last one left)."""

    name: str
    config: RestreamConfig
    on_active: Callable[[bool], None] = lambda _active: None
    _subscriptions: list[Subscription] = field(default_factory=list)
    _picture: _Picture | None = None
    _offered: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _keyframe_wanted: bool = False
    _counts: _Counts = field(default_factory=_Counts)
    encoder_name: str | None = None
    size: tuple[int, int] | None = None
    _closed: bool = False

    def offer(self, picture: Callable[[], np.ndarray]) -> None:
        """A new picture (on the loop; the newest wins). Cheap: nothing is made or encoded
        here; ``picture`` is called on the restream's thread when it is taken."""
        if self._task is None:
            return  # nobody plays: not even kept
        self._picture = _Picture(picture, time.monotonic())
        self._counts.frames_in += 1
        self._offered.set()

    def subscribe(self, kind: Kind) -> Subscription:
        if self._closed:
            raise RestreamFull(f"{self.name} has ended")
        if len(self._subscriptions) >= self.config.max_viewers:
            raise RestreamFull(
                f"{self.name} has {len(self._subscriptions)} players, the most it may have "
                "(VISIONSTREAM_RESTREAM_MAX_VIEWERS)"
            )
        capacity = max(2, round(self.config.stall_s * self.config.fps))
        subscription = Subscription(self, kind, capacity)
        self._subscriptions.append(subscription)
        if kind == "h264":
            self._keyframe_wanted = True
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"restream {self.name}"
            )
            self.on_active(True)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)
            if subscription.reason and subscription.reason.startswith("dropped"):
                self._counts.dropped_players += 1
        if not self._subscriptions and self._task is not None:
            self._task.cancel()
            self._task = None
            self._picture = None
            self.on_active(False)

    async def _run(self) -> None:
        """Encodes the newest picture at most ``fps`` a second while anyone subscribes."""
        encoder: H264Encoding | None = None
        worker = ThreadPoolExecutor(1, thread_name_prefix=f"restream-{self.name}")
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        interval = 1.0 / self.config.fps
        due = 0.0
        try:
            while True:
                await self._offered.wait()
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)  # the restream's rate, not a wait for an event
                self._offered.clear()
                picture = self._picture
                if picture is None:
                    continue
                due = max(due + interval, time.monotonic())
                kinds = {s.kind for s in self._subscriptions}
                keyframe, self._keyframe_wanted = self._keyframe_wanted, False
                pts = round((picture.at - started) * RTP_CLOCK)
                encoder, encoded, still = await loop.run_in_executor(
                    worker, self._work, encoder, picture.make, pts, keyframe, kinds
                )
                now = time.monotonic()
                for subscription in list(self._subscriptions):
                    if subscription.kind == "h264":
                        for item in encoded:
                            subscription.put(item, now)
                    elif still is not None:
                        subscription.put(still, now)
        finally:
            if encoder is not None:  # after any encode still running on the thread
                worker.submit(encoder.close)
            worker.shutdown(wait=False)

    def _work(
        self,
        encoder: H264Encoding | None,
        make: Callable[[], np.ndarray],
        pts: int,
        keyframe: bool,
        kinds: set[Kind],
    ) -> tuple[H264Encoding | None, list[EncodedFrame], bytes | None]:
        """On the restream's thread: the picture made, as H.264 (the encoder opened on the
        first one, at its size) and as JPEG, each only if someone takes it."""
        image = make()
        encoded: list[EncodedFrame] = []
        if "h264" in kinds:
            if encoder is None:
                encoder = self._encoder(image)
            encoded = encoder.encode(image, pts, keyframe)
            self._counts.encoded += len(encoded)
        still = None
        if "jpeg" in kinds:
            still = jpeg(self.scaled(image), self.config.jpeg_quality)
            self._counts.jpegs += 1
        return encoder, encoded, still

    def _encoder(self, image: np.ndarray) -> H264Encoding:
        height, width = image.shape[:2]
        size = fitted_size(width, height, self.config.max_width, self.config.max_height)
        config = self.config
        encoder = H264Encoding(config.encoder, *size, config.fps, config.kbps, config.keyframe_s)
        self.encoder_name, self.size = encoder.name, size
        self._counts.encoders_started += 1
        return encoder

    def scaled(self, image: np.ndarray) -> np.ndarray:
        """``image`` within the restream's size bounds (a snapshot's, an MJPEG frame's)."""
        height, width = image.shape[:2]
        size = fitted_size(width, height, self.config.max_width, self.config.max_height)
        if size == (width, height):
            return image
        return cv2.resize(image, size, interpolation=cv2.INTER_AREA)

    @property
    def ended(self) -> bool:
        return self._closed

    @property
    def encoding(self) -> bool:
        return self._task is not None

    def stats(self) -> dict[str, Any]:
        players: dict[str, int] = {}
        for subscription in self._subscriptions:
            players[subscription.kind] = players.get(subscription.kind, 0) + 1
        return {
            "encoding": self.encoding,
            "encoder": self.encoder_name,
            "size": list(self.size) if self.size else None,
            "subscriptions": players,
            **vars(self._counts),
        }

    def end(self, reason: str) -> None:
        """Idempotent: every subscription is told ``reason``; the encoder stops; no new one."""
        self._closed = True
        for subscription in list(self._subscriptions):
            subscription.close(reason)
