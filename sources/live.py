"""A network camera or stream that keeps reading through reboots and cuts: RTSP, HTTP(S)
(MJPEG or HLS), RTMP(S), MPEG-TS over UDP and SRT; anything FFmpeg opens through PyAV.

PyAV reads it: RTSP over TCP with a 0.1 s probe and slice threading (frame threading would add
about three frames of latency); over HTTP, an ``.m3u8`` playlist (or a ``mpegurl`` content
type) is HLS, ``multipart/x-mixed-replace`` is MJPEG through FFmpeg's multipart demuxer, and
anything else is left to FFmpeg's probing; RTMP as FLV, live; UDP as MPEG-TS, listening on the
URL's address; SRT through ``srt-live-transmit`` to a loopback UDP port (``sources.srt``:
PyAV's FFmpeg has no libsrt). A camera that stops
sending is noticed within ``read_timeout``; FFmpeg ending the stream (what a killed camera
looks like) is a disconnect too, never an end: the source reconnects forever, waiting
``initial_backoff`` doubled per failed attempt up to ``max_backoff``, reset once a connection
has stayed up for ``healthy_after`` seconds. ``stats()`` says how it is doing, with the URL's
credentials masked, as in every message it produces.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import av

from sinks.masking import mask_url
from sinks.pinning import Pin, pinned_url

from .announcer import Announcer
from .base import RTP_CLOCK, Converter, FrameSource, SourceError, SourceFrame
from .demuxing import (
    Redirected,
    by_url,
    hardware_in_use,
    http_demuxer,
    http_options,
    not_opened,
    open_container,
    reason_of,
)
from .packets import PacketSink, PacketTap
from .schemes import scheme_for
from .srt import SRTRelay, relay_missing

__all__ = ["LiveSource", "LiveState", "LiveStats"]

log = logging.getLogger(__name__)


class LiveState(Enum):
    """Where a live source is in its life: connecting, streaming, reconnecting, closed."""

    CONNECTING = "connecting"
    STREAMING = "streaming"
    RECONNECTING = "reconnecting"
    CLOSED = "closed"


@dataclass(frozen=True)
class LiveStats:
    """A live source's counters and state, credentials masked."""

    url: str
    """Credentials masked."""
    state: str
    frames: int
    fps_in: float | None
    disconnects: int
    """Connections lost (the camera ended the stream or stopped sending)."""
    reconnects: int
    """Connections made again after one was lost or an attempt failed."""
    failed_attempts: int
    last_error: str | None
    last_frame_age_s: float | None
    decoder: str = "software"
    """``software``, a hardware device type (``cuda``...), or ``none``: packets only."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _stall_or(reason: str, quiet_since: float, read_timeout: float) -> str:
    """Why a read failed. PyAV's read timeout interrupts FFmpeg wherever it waits, and some
    of FFmpeg's RTSP code reports that interrupt as its own error ("Invalid data found", seen
    on a loaded machine) rather than ExitError: a failure after a read timeout's worth of
    silence (since ``quiet_since``) is the stall, whatever FFmpeg calls it."""
    if time.monotonic() - quiet_since >= read_timeout / 2:
        return f"no data for {read_timeout:g} s"
    return reason


def _target(url: str, pin: Pin | None) -> tuple[str, str | None]:
    """Where a connection goes (the pinned address in ``url``) and the name it stands for."""
    return pinned_url(url, pin) if pin is not None else (url, None)


@dataclass
class Backoff:
    """The wait before a camera's next connection attempt: ``initial`` doubled per failure up
    to ``maximum``; none again once a connection has stayed up ``healthy_after`` seconds."""

    initial: float
    maximum: float
    healthy_after: float
    wait: float = 0.0

    def failed(self) -> None:
        self.wait = min(self.maximum, max(self.initial, self.wait * 2))

    def lost(self, connected_for: float) -> None:
        """A connection ended after ``connected_for`` seconds."""
        if connected_for >= self.healthy_after:
            self.wait = 0.0  # after a good period, retries start from the shortest wait
        self.failed()


class LiveSource(FrameSource):
    """A camera or stream read through PyAV on a thread of its own, reconnecting with backoff
    whenever it fails; listeners hear every state change."""

    def __init__(
        self,
        url: str,
        *,
        read_timeout: float = 5.0,
        max_backoff: float = 10.0,
        initial_backoff: float = 0.25,
        healthy_after: float = 10.0,
        decode: bool = True,
        hwaccel: str | None = None,
        threads: int = 1,
        pin: Pin | None = None,
    ) -> None:
        """Not ``decode``: the packets only, for the packet sinks (a main stream recorded
        while its sub-stream is decoded); ``read`` returns None once closed, and ``frames``
        counts packets. ``hwaccel``: FFmpeg's device type to decode on (``cuda``...); where
        it cannot be opened, said once, then software. ``threads``: 0 is FFmpeg's choice.
        ``pin``: each connection goes to the address checked as it connects (``pinned_url``)."""
        scheme = scheme_for(url)  # how its scheme is read (``sources/schemes.py``)
        if scheme.relayed and (missing := relay_missing()):
            raise SourceError(missing)
        self.url = url
        self._pin = None if scheme.relayed else pin  # a relay connects, by name
        self.masked_url = mask_url(url)
        self._relay = SRTRelay(url, read_timeout) if scheme.relayed else None
        self._format, options = scheme.demuxer or by_url(url)
        self._options = dict(options)  # this camera's own: the table's is shared
        # An HTTP URL that does not say what it is: its answer's content type tells, once.
        self._http = scheme.http
        self._sniff = self._http and self._format is None
        self.read_timeout = read_timeout
        self._backoff = Backoff(initial_backoff, max_backoff, healthy_after)
        self._container: av.container.InputContainer | None = None
        self._frames: Iterator[av.VideoFrame | None] | None = None
        self.decode = decode
        self._hwaccel = hwaccel if decode else None
        self._threads = threads
        self._unchecked: Any = None  # a decoder that may not have taken the hardware asked
        self.size: tuple[int, int] | None = None
        """The current connection's picture (width, height), once connected."""
        self._connected_at = 0.0
        self._closed = threading.Event()
        self._reading = threading.Lock()  # held by the thread inside read()
        self._stats_lock = threading.Lock()
        self._changed = threading.Condition(self._stats_lock)
        self._state = LiveState.CONNECTING
        self._frames_read = 0
        self._disconnects = 0
        self._reconnects = 0
        self._failed_attempts = 0
        self._last_error: str | None = None
        self._arrivals: deque[float] = deque(maxlen=30)
        self._origin: float | None = None
        self._packets = PacketTap()
        self._converter = Converter()  # one swscale context for all this camera's frames
        # State changes wait there, made under the lock, until it is released: a listener
        # may then call ``stats()`` (or anything else that takes the lock) without deadlock.
        self._announcer = Announcer(self._stats_lock)

    # ----------------------------------------------------------------- reading

    def read(self) -> SourceFrame | None:
        """The next frame; blocks through disconnects and reconnects. None once closed."""
        with self._reading:
            while not self._closed.is_set():
                if self._frames is None and not self._connect():
                    continue
                assert self._frames is not None
                try:
                    decoded = next(self._frames)
                except StopIteration:
                    self._lost("the camera ended the stream")
                    continue
                except av.error.ExitError:  # PyAV's read timeout interrupts FFmpeg this way
                    self._lost(f"no data for {self.read_timeout:g} s")
                    continue
                except av.error.FFmpegError as exc:
                    quiet = max(self._connected_at, self._arrivals[-1] if self._arrivals else 0)
                    self._lost(
                        _stall_or(reason_of(exc, "stopped sending"), quiet, self.read_timeout)
                    )
                    continue
                if decoded is None:  # a packet, not decoded: counted, and on to the next
                    self._arrived()
                    continue
                if self._hwaccel is not None and self._unchecked is not None:  # the first frame
                    context, self._unchecked = self._unchecked, None
                    self._hwaccel = hardware_in_use(context, self._hwaccel, self.masked_url)
                return self._frame(decoded)
            self._disconnect()
            return None

    def _connect(self) -> bool:
        if self._backoff.wait and self._closed.wait(self._backoff.wait):
            return False  # closed while waiting
        opening = time.monotonic()
        try:  # OSError: the pin refuses the address now; retried as any failed attempt
            url, host = _target(self.url, self._pin)
            kind = http_demuxer(url, self.read_timeout, host) if self._sniff else None
        except (Redirected, OSError) as exc:
            self._failed(f"cannot connect to {self.masked_url}: {exc}")
            return False
        if kind is not None:
            # Once known, kept: a camera does not change what it serves.
            (self._format, self._options), self._sniff = kind, False
        if self._relay is not None:  # SRT: FFmpeg reads the relay's UDP side once connected
            try:
                relayed = self._relay.connect(self.read_timeout)
            except SourceError as exc:
                self._failed(f"cannot connect to {self.masked_url}: {exc}")
                return False
            except OSError as exc:
                self._failed(f"cannot start the SRT relay for {self.masked_url}: {exc}")
                return False
            if relayed is None:
                return False  # closed
            url = relayed
        try:
            container = self._open(url, host)
        except (av.error.FFmpegError, OSError) as exc:
            relay = self._relay.state() if self._relay is not None else None
            why = not_opened(exc, self.read_timeout, relay, url if self._http else None, host)
            self._failed(f"cannot connect to {self.masked_url}: {why}")
            return False
        if not container.streams.video:
            container.close()
            self._failed(f"{self.masked_url} has no video stream")
            return False
        stream = container.streams.video[0]
        stream.thread_type = "SLICE"
        stream.codec_context.thread_count = self._threads
        frames = self._packets.decoded if self.decode else self._packets.passed
        self._container, self._frames = container, frames(container, stream)
        self._unchecked = stream.codec_context
        context = stream.codec_context
        self.size = (context.width, context.height) if context.width else None
        self._connected_at = time.monotonic()
        log.info("connected to %s in %.2f s", self.masked_url, self._connected_at - opening)
        with self._changing():
            if self._disconnects or self._failed_attempts:
                self._reconnects += 1
            self._set_state(LiveState.STREAMING)
            self._changed.notify_all()
        return True

    def _open(self, url: str, host: str | None) -> av.container.InputContainer:
        options = http_options(self._options, host) if self._http else self._options
        container, self._hwaccel = open_container(
            url, self._format, options, self.read_timeout, self._hwaccel, self.masked_url
        )
        return container

    @property
    def decoder(self) -> str:
        """How frames are decoded: ``software``, FFmpeg's hardware device type, or
        ``none`` (packets only)."""
        return "none" if not self.decode else self._hwaccel or "software"

    def _failed(self, error: str) -> None:
        with self._changing():
            self._failed_attempts += 1
            self._record_error(error)
        self._backoff.failed()

    def _lost(self, why: str) -> None:
        self._backoff.lost(time.monotonic() - self._connected_at)
        self._disconnect()
        if self._relay is not None:
            why = f"{why} ({self._relay.state()})"
        with self._changing():
            self._disconnects += 1
            self._record_error(f"lost {self.masked_url}: {why}")

    def _record_error(self, error: str) -> None:
        """Call with ``_changed`` held."""
        self._last_error = error
        if self._state is not LiveState.CLOSED:
            self._set_state(LiveState.RECONNECTING)
        self._changed.notify_all()

    def _set_state(self, state: LiveState) -> None:
        """Call inside ``_changing()``; listeners hear about every change (and every failed
        attempt, which repeats the reconnecting state with a new error) once it is left."""
        previous, self._state = self._state, state
        self._announcer.queue(previous.value, state.value, self._stats())

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """Holds the lock for a change of state; the listeners hear of it after the lock
        is released, in the order the changes were made."""
        with self._changed:
            yield
        self._announcer.tell()

    def add_listener(self, listener: Callable[[str, str, LiveStats], None]) -> None:
        """``listener(previous_state, new_state, stats)`` on the reader thread; keep it short."""
        self._announcer.add(listener)

    def remove_listener(self, listener: Callable[[str, str, LiveStats], None]) -> None:
        self._announcer.remove(listener)

    def add_packet_sink(self, sink: PacketSink) -> None:
        """``sink`` gets every video packet read from now on (on the reader thread), from the
        current or next connection's parameters (``opened``) on."""
        self._packets.add(sink)

    def remove_packet_sink(self, sink: PacketSink) -> None:
        self._packets.remove(sink)

    def _disconnect(self) -> None:
        if self._container is not None:
            self._container.close()
            self._packets.lost()
        self._container, self._frames = None, None

    def _arrived(self) -> tuple[int, float]:
        """A frame (or, not decoding, a packet) came: counted; its index and arrival."""
        now = time.monotonic()
        self._origin = now if self._origin is None else self._origin
        with self._changed:
            index = self._frames_read
            self._frames_read += 1
            self._arrivals.append(now)
            self._changed.notify_all()
        return index, now

    def _frame(self, decoded: av.VideoFrame) -> SourceFrame:
        if self.size is None:  # the probe did not say: the first picture does
            self.size = (decoded.width, decoded.height)
        index, now = self._arrived()
        assert self._origin is not None
        # Stamped on arrival: pts stay monotonic across reconnects, whatever the camera sends.
        pts = round((now - self._origin) * RTP_CLOCK.denominator)
        return SourceFrame(None, pts, RTP_CLOCK, index, decoded=decoded, converter=self._converter)

    # ------------------------------------------------------------------ control

    def live(self) -> LiveSource:
        return self

    @property
    def reconnects(self) -> int:
        """How often the source has reconnected (cheap: read per frame by pipelines)."""
        return self._reconnects

    def stats(self) -> LiveStats:
        with self._stats_lock:
            return self._stats()

    def wait_for(self, predicate: Callable[[LiveStats], bool], timeout: float) -> LiveStats:
        """Block until ``predicate(stats)`` holds (checked at every frame and state change);
        ``TimeoutError`` after ``timeout`` seconds."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self._stats()), timeout):
                raise TimeoutError(f"{self.masked_url}: not within {timeout:g} s: {self._stats()}")
            return self._stats()

    def _stats(self) -> LiveStats:
        now = time.monotonic()
        arrivals = list(self._arrivals)
        fps = None
        if len(arrivals) >= 2 and now - arrivals[-1] < 2.0:
            fps = round((len(arrivals) - 1) / (arrivals[-1] - arrivals[0]), 2)
        return LiveStats(
            url=self.masked_url,
            state=self._state.value,
            frames=self._frames_read,
            fps_in=fps,
            disconnects=self._disconnects,
            reconnects=self._reconnects,
            failed_attempts=self._failed_attempts,
            last_error=self._last_error,
            last_frame_age_s=round(now - arrivals[-1], 3) if arrivals else None,
            decoder=self.decoder,
        )

    def close(self) -> None:
        """Idempotent. A ``read`` in progress returns None within ``read_timeout`` at worst
        and releases the connection itself; otherwise it is released here."""
        self._closed.set()
        if self._relay is not None:  # now, not when a read in progress gives up
            self._relay.close()
        with self._changing():
            if self._state is not LiveState.CLOSED:
                self._set_state(LiveState.CLOSED)
            self._changed.notify_all()
        if self._reading.acquire(blocking=False):
            try:
                self._disconnect()
            finally:
                self._reading.release()
