"""SourceHub: one reader per camera URL, shared by every consumer of that camera.

Two browser viewers and a monitoring pipeline on one camera make one connection to it. Each
URL's reader thread reads the source and hands every frame to each subscriber's ``deliver``
callback, on the reader thread, in subscription order. A callback decides what buffering
means for its consumer (drop, replace, or block: a blocking callback holds up that camera's
other consumers too, which is what a ``WAIT`` strategy on a live source implies). The reader
is closed when its last subscriber leaves, and made again by the next subscription.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sinks.masking import mask_url

from .base import FrameSource, SourceFrame

__all__ = ["SourceHub", "Subscription"]

log = logging.getLogger(__name__)

Deliver = Callable[[SourceFrame], None]
Ended = Callable[[str | None], None]
SourceFactory = Callable[[str, bool], FrameSource]
"""``factory(url, decode)``: the reader of ``url`` (not ``decode``: its packets only)."""


@dataclass(eq=False)
class Subscription:
    """One consumer of a shared source; ``close`` leaves it (the last one closes the reader)."""

    url: str
    deliver: Deliver
    _hub: SourceHub = field(repr=False)
    ended: Ended | None = None
    decode: bool = True
    """False: a reader of the camera's packets only (never decoded; ``deliver`` unused)."""
    """Called (on the reader thread, with the source's error) if the source ends by itself."""
    closed: bool = False

    @property
    def source(self) -> FrameSource | None:
        """The shared source (for its stats), while this subscription is open."""
        return None if self.closed else self._hub.source_of(self.url, self.decode)

    def close(self) -> None:
        """Idempotent; the last subscriber to leave closes the camera's reader."""
        self._hub.unsubscribe(self)


class _Reader:
    def __init__(
        self, url: str, source: FrameSource, forget: Callable[[_Reader], None], decode: bool
    ) -> None:
        self.url = url
        self.key = _key(url, decode)
        self.decode = decode
        self.source = source
        self._forget = forget
        self.subscribers: list[Subscription] = []
        self.thread = threading.Thread(target=self._run, name=f"hub {mask_url(url)}", daemon=True)

    def _run(self) -> None:
        while (frame := self.source.read()) is not None:
            for subscription in list(self.subscribers):
                if subscription.closed:
                    continue
                try:
                    subscription.deliver(frame)
                except Exception:  # one consumer's failure must not starve the others
                    log.exception("a consumer of %s failed on a frame", mask_url(self.url))
        # Closed by the hub (its last consumer left), or ended by itself: a camera LiveSource
        # never does, a local device unplugged does. Then the next subscription opens it anew.
        self._forget(self)
        for subscription in list(self.subscribers):
            if not subscription.closed and subscription.ended is not None:
                subscription.ended(self.source.error)


def _key(url: str, decode: bool) -> str:
    return url if decode else f"packets:{url}"


class SourceHub:
    """One reader per camera URL, however many sessions and pipelines watch it."""

    def __init__(self, factory: SourceFactory) -> None:
        self._factory = factory
        self._readers: dict[str, _Reader] = {}
        self._lock = threading.Lock()
        self.readers_opened = 0

    def subscribe(
        self, url: str, deliver: Deliver, ended: Ended | None = None, *, decode: bool = True
    ) -> Subscription:
        """Raises whatever the factory raises for a URL it refuses (e.g. ``SourceError``).
        Not ``decode``: the camera's packets only, for a recorder (its own reader: one that
        decodes is shared by those that want frames)."""
        key = _key(url, decode)
        with self._lock:
            reader = self._readers.get(key)
            if reader is None:
                reader = _Reader(url, self._factory(url, decode), self._forget, decode)
                self._readers[key] = reader
                self.readers_opened += 1
                reader.thread.start()
            subscription = Subscription(url, deliver, self, ended, decode)
            reader.subscribers.append(subscription)
            return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            if subscription.closed:
                return
            subscription.closed = True
            key = _key(subscription.url, subscription.decode)
            reader = self._readers.get(key)
            if reader is None:
                return
            reader.subscribers.remove(subscription)
            if reader.subscribers:
                return
            del self._readers[key]
        reader.source.close()  # the reader thread sees None and ends

    def _forget(self, reader: _Reader) -> None:
        with self._lock:
            if self._readers.get(reader.key) is reader:
                del self._readers[reader.key]

    def source_of(self, url: str, decode: bool = True) -> FrameSource | None:
        with self._lock:
            reader = self._readers.get(_key(url, decode))
            return reader.source if reader is not None else None

    def stats(self) -> list[dict[str, Any]]:
        with self._lock:
            readers = list(self._readers.values())
        out = []
        for reader in readers:
            entry: dict[str, Any] = {
                "url": mask_url(reader.url),
                "consumers": len(reader.subscribers),
                "decoded": reader.decode,
            }
            stats = getattr(reader.source, "stats", None)
            if callable(stats):
                entry.update(stats().to_dict())
            out.append(entry)
        return out

    def close(self) -> None:
        """Close every reader and wait for their threads (server shutdown)."""
        with self._lock:
            readers = list(self._readers.values())
            self._readers.clear()
        for reader in readers:
            for subscription in reader.subscribers:
                subscription.closed = True
            reader.source.close()
        for reader in readers:
            reader.thread.join(10)
