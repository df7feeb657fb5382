"""A camera's encoded packets for whoever records them: ``PacketSink`` is what a recorder
implements, ``PacketTap`` what a reader hands each packet to (one or many sinks, added and
removed from any thread, each told of every connection's parameters before its packets)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, Protocol

import av

__all__ = ["PacketSink", "PacketTap"]


class PacketSink(Protocol):
    """What a camera reader hands its packets to, on its own thread; keep each call short."""

    def opened(self, stream: Any) -> None:
        """A connection's video stream (its codec and parameters); packets follow."""

    def packet(self, packet: av.Packet) -> None: ...

    def lost(self) -> None:
        """The connection ended; the next ``opened`` starts a new one."""


class PacketTap:
    """The sinks of one reader, and whether each has the current connection's ``opened``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sinks: dict[PacketSink, bool] = {}

    def add(self, sink: PacketSink) -> None:
        """``sink`` gets every packet from now on, from the current or next connection's
        parameters (``opened``) on."""
        with self._lock:
            self._sinks[sink] = False

    def remove(self, sink: PacketSink) -> None:
        with self._lock:
            self._sinks.pop(sink, None)

    def decoded(self, container: Any, stream: Any) -> Iterator[av.VideoFrame]:
        """``container.decode(stream)``, with each packet shown to the sinks first (the
        camera's own encoding, written without decoding)."""
        for packet in container.demux(stream):
            self._show(stream, packet)
            yield from packet.decode()

    def passed(self, container: Any, stream: Any) -> Iterator[None]:
        """Each packet shown to the sinks, never decoded: None for each."""
        for packet in container.demux(stream):
            if packet.size:  # not the demuxer's empty flush packet at the end
                self._show(stream, packet)
                yield None

    def _show(self, stream: Any, packet: av.Packet) -> None:
        with self._lock:
            sinks = list(self._sinks.items())
        for sink, opened in sinks:
            if not opened:  # new, or after a reconnect: this connection's parameters
                sink.opened(stream)
                with self._lock:
                    if sink in self._sinks:
                        self._sinks[sink] = True
            sink.packet(packet)

    def lost(self) -> None:
        """The connection ended: the sinks that had it hear so; all wait for the next one."""
        with self._lock:
            told = [sink for sink, opened in self._sinks.items() if opened]
            self._sinks = dict.fromkeys(self._sinks, False)
        for sink in told:
            sink.lost()
