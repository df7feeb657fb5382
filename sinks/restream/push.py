"""A source's restream pushed to a server the operator names (MediaMTX, go2rtc, nginx-rtmp,
a streaming platform): connected, fed from the shared encoder, and connected again with
backoff whenever the target goes away, its state kept for the pipeline's status.

How each protocol connects is a ``Target`` (``push_targets.py``): opened on the first
keyframe, written an access unit at a time, closed; all blocking, on the push's own thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, Protocol

from ..masking import mask_url
from .encoding import EncodedFrame
from .restream import Restream, RestreamFull, cancelled

__all__ = ["Push", "PushStatus", "Target"]

log = logging.getLogger(__name__)

State = Literal["connecting", "pushing", "waiting", "stopped"]
_STEADY_S = 10.0
"""A connection that lasted this long was a success: the next failure starts backoff over."""


class Target(Protocol):
    """One connection to a push target (blocking calls, one thread)."""

    def write(self, frame: EncodedFrame) -> None: ...

    def close(self) -> None: ...


TargetOpener = Callable[[EncodedFrame], Target]
"""The target, connected, given the first keyframe (its SPS and PPS); raises on failure."""


@dataclass
class PushStatus:
    url: str
    """As it may be shown: credentials, stream keys and query values masked."""
    state: State = "connecting"
    error: str | None = None
    connections: int = 0
    frames: int = 0
    since: float = 0.0
    """``time.time()`` of the last change of state."""


class Push:
    """One source's restream pushed to one target while the pipeline runs."""

    def __init__(
        self, restream: Restream, url: str, opener: TargetOpener, max_backoff_s: float
    ) -> None:
        self.status = PushStatus(mask_url(url), since=time.time())
        self._restream = restream
        self._opener = opener
        self._max_backoff_s = max_backoff_s
        self._task: asyncio.Task[None] | None = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="restream-push")

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="restream push")

    def _state(self, state: State, error: str | None = None) -> None:
        self.status.state, self.status.since = state, time.time()
        if error is not None or state == "pushing":
            self.status.error = error

    async def _run(self) -> None:
        backoff = 0.5
        while True:
            self._state("connecting")
            started = time.monotonic()
            try:
                await self._push()
                reason = "the source ended"
            except RestreamFull as full:
                reason = str(full)
            except Exception as error:  # the target's failure, whatever its library raises
                reason = f"{type(error).__name__}: {error}"
            if self._restream.ended:
                self._state("stopped", reason)
                self._thread.shutdown(wait=False)
                return
            if time.monotonic() - started > _STEADY_S:
                backoff = 0.5
            self._state("waiting", reason)
            log.info("push to %s: %s; again in %.1f s", self.status.url, reason, backoff)
            await asyncio.sleep(backoff)  # backoff before reconnecting, not a wait for an event
            backoff = min(backoff * 2, self._max_backoff_s)

    async def _push(self) -> None:
        loop = asyncio.get_running_loop()
        subscription = self._restream.subscribe("h264")
        target: Target | None = None
        try:
            while (frame := await subscription.next()) is not None:
                if target is None:
                    target = await loop.run_in_executor(self._thread, self._opener, frame)
                    self.status.connections += 1
                    self._state("pushing")
                await loop.run_in_executor(self._thread, target.write, frame)
                self.status.frames += 1
            if subscription.reason and subscription.reason.startswith("dropped"):
                raise ConnectionError("the target took too long to take the video")
        finally:
            subscription.close("the push stopped")
            if target is not None:
                with contextlib.suppress(Exception):  # the target is gone already
                    await loop.run_in_executor(self._thread, target.close)

    async def close(self) -> None:
        """Idempotent: the push stops and its connection closes."""
        task, self._task = self._task, None
        await cancelled(task)
        self._state("stopped")
        self._thread.shutdown(wait=False)
