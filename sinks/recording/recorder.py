"""Recording a camera as it sends: its demuxed packets written into segment files (one MP4
per ``segment_s``, cut at keyframes), so an H.264/H.265 camera costs no encoding; a camera
whose codec MP4 cannot carry as it is (MJPEG, raw) is re-encoded to H.264.

The camera's reader thread hands packets over (``PacketSink``); a thread of the recorder's
own writes them, so a slow disk never holds up a frame (a full queue drops packets up to the
next keyframe: a gap, never a corrupt file). Segments are written as fragmented MP4 under a
hidden name and renamed ``<start_ms>-<end_ms>.mp4`` when finished: a crash leaves a hidden
file that the next recorder on the directory recovers (everything up to its last fragment).
A reconnect ends the segment; the next starts at the new connection's first keyframe.

``mode="events"`` keeps only ``pre_s`` before each ``trigger`` to ``post_s`` after it: the
packets of the last GOPs wait in memory for a trigger.

Retention: finished segments beyond ``max_age_s``, beyond ``max_bytes`` (this source's), or
while the disk has less than ``min_free_bytes`` free are removed, oldest first; with too
little free space and nothing left to remove, no new segment starts.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import av

from ..retention import Limits
from ..worker import QueueWorker
from .segments import enforce_retention, finished_name, partial_name, recover

__all__ = ["RecordingPolicy", "SegmentRecorder"]

log = logging.getLogger(__name__)

_REMUXED = {"h264", "hevc"}
"""Codecs an MP4 carries as the camera sends them (everything else is re-encoded)."""
# A fragment at each keyframe and at least every second, each written through to the file as
# it is made (flush_packets: the muxer's 256 KiB buffer held seconds of a low-rate camera, and
# a kill -9 lost them all): what a crash leaves is playable up to its last whole fragment.
_FRAGMENTED = {
    "movflags": "frag_keyframe+empty_moov+default_base_moof",
    "frag_duration": "1000000",
    "flush_packets": "1",
}
_ENCODE_TIME_BASE = Fraction(1, 1000)


@dataclass(frozen=True)
class RecordingPolicy:
    mode: Literal["continuous", "events"] = "continuous"
    segment_s: float = 60.0
    pre_s: float = 10.0
    """``events``: kept before each trigger (from the keyframe at or before it)."""
    post_s: float = 10.0
    """``events``: recorded after each trigger."""
    max_age_s: float | None = 7 * 86400.0
    max_bytes: int | None = 20 << 30
    min_free_bytes: int = 1 << 30
    queue_packets: int = 3000
    """Packets waiting for the disk at most (about 100 s at 30 fps)."""


@dataclass
class _Copy:
    """A packet of the camera's, copied on the reader thread: the recorder's own."""

    data: bytes
    pts: int | None
    dts: int | None
    key: bool
    wall: float


@dataclass
class _Connection:
    """One connection's stream parameters, kept in a container of their own (in memory) so
    segments made after the camera's container closed still copy them."""

    holder: Any
    stream: Any
    time_base: Fraction
    remux: bool
    codec: str
    rate: Fraction | None

    def close(self) -> None:
        self.holder.close()


@dataclass
class _Open:
    """The segment being written."""

    container: Any
    stream: Any
    hidden: Path
    start: float
    continues: bool = False
    origin: int | None = None
    """The first packet's dts: the segment's timestamps start at 0."""
    last_dts: int = -1
    last_wall: float = 0.0
    decoder: Any = None
    encoder_pts: int = -1


class SegmentRecorder:
    """A ``PacketSink`` that writes one camera's packets into ``directory``; ``trigger`` (any
    thread) marks an event for ``mode="events"``; ``close`` finishes the open segment and
    waits for the writer. Idempotent."""

    def __init__(
        self,
        directory: Path,
        policy: RecordingPolicy = RecordingPolicy(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock``: each packet's arrival time (the wall clock; tests give their own)."""
        self.directory = directory
        self._clock = clock
        self.policy = policy
        directory.mkdir(parents=True, exist_ok=True)
        self._skip_to_keyframe = True
        self._closed = False
        self.dropped = 0
        """Packets the queue could not hold (each drop skips to the next keyframe)."""
        self.written = 0
        """Segments finished."""
        self.low_space = False
        self._connection: _Connection | None = None
        self._open: _Open | None = None
        self._ring: deque[_Copy] = deque()
        self._until = 0.0
        self._next_retention = 0.0
        self._worker: QueueWorker[tuple[str, Any]] = QueueWorker(
            f"recorder {directory.name}",
            self._handle,
            capacity=policy.queue_packets,
            on_start=self._prepare,
            on_stop=self._finish,
        )

    @property
    def thread_id(self) -> int | None:
        """The writer thread's native id (for measuring its CPU)."""
        return self._worker.thread_id

    # ------------------------------------------------------------- reader thread

    def opened(self, stream: Any) -> None:
        holder = av.open(_Discard(), "w", format="mp4")
        codec = stream.codec_context.name
        remux = codec in _REMUXED
        template = holder.add_stream_from_template(stream) if remux else None
        rate = stream.average_rate or stream.guessed_rate
        self._put(
            "opened",
            _Connection(
                holder, template, stream.time_base or Fraction(1, 90000), remux, codec, rate
            ),
        )
        self._skip_to_keyframe = True

    def packet(self, packet: av.Packet) -> None:
        if packet.size == 0:
            return  # the demuxer's flush packet
        if self._skip_to_keyframe:
            if not packet.is_keyframe:
                return
            self._skip_to_keyframe = False
        copy = _Copy(bytes(packet), packet.pts, packet.dts, packet.is_keyframe, self._clock())
        if not self._put("packet", copy):
            self._skip_to_keyframe = True  # a gap: what follows must start at a keyframe
            self._put("gap", None)

    def lost(self) -> None:
        self._put("lost", None)

    def trigger(self, at: float | None = None) -> None:
        """An event at ``at`` (now): ``mode="events"`` records around it."""
        self._put("trigger", self._clock() if at is None else at)

    def _put(self, kind: str, item: Any) -> bool:
        if self._closed:
            return False
        if not self._worker.put((kind, item)):
            if kind == "packet":
                self.dropped += 1
            return False
        return True

    # ------------------------------------------------------------- writer thread

    def _prepare(self) -> None:
        recover(self.directory)
        self._enforce_retention()
        self._next_retention = time.monotonic() + 60.0

    def _handle(self, work: tuple[str, Any]) -> None:
        kind, item = work
        try:
            if kind == "opened":
                self._finish()
                if self._connection is not None:
                    self._connection.close()
                self._connection = item
                self._ring.clear()
            elif kind in ("lost", "gap"):
                self._finish()
                self._ring.clear()
            elif kind == "trigger":
                self._until = max(self._until, item + self.policy.post_s)
                self._start_from_ring()
            elif kind == "packet" and self._connection is not None:
                self._take(item)
        except Exception:  # a bad packet or a full disk: this segment ends, recording goes on
            log.exception("recording in %s: segment abandoned", self.directory)
            self._abandon()
        if time.monotonic() >= self._next_retention:
            self._next_retention = time.monotonic() + 60.0
            self._enforce_retention()

    def _take(self, copy: _Copy) -> None:
        policy = self.policy
        current = self._open
        if policy.mode == "events" and current is None:
            if copy.key:
                self._ring.append(copy)
                self._trim_ring(copy.wall)
            elif self._ring:
                self._ring.append(copy)
            self._start_from_ring()
            return
        if current is None:
            if copy.key:
                self._start(copy.wall)
                self._write(copy)
            return
        if copy.key:
            if policy.mode == "events" and copy.wall > self._until:
                self._finish()
                self._ring.append(copy)
                return
            if copy.wall - current.start >= policy.segment_s:
                self._finish()
                self._start(copy.wall, continues=True)
        self._write(copy)

    def _trim_ring(self, now: float) -> None:
        """Keeps the packets from the newest keyframe at or before ``now - pre_s``."""
        keep_from = now - self.policy.pre_s
        keys = [i for i, c in enumerate(self._ring) if c.key and c.wall <= keep_from]
        if keys:
            for _ in range(keys[-1]):
                self._ring.popleft()

    def _start_from_ring(self) -> None:
        if self._open is not None or not self._ring or self._ring[-1].wall > self._until:
            return
        if self._ring[-1].wall < self._until - self.policy.post_s - self.policy.pre_s:
            return  # the trigger is older than anything kept
        self._start(self._ring[0].wall)
        while self._ring:
            self._write(self._ring.popleft())

    def _start(self, wall: float, continues: bool = False) -> None:
        connection = self._connection
        assert connection is not None
        if self._enforce_retention():
            return  # no room: no segment
        hidden = self.directory / partial_name(wall)
        container = av.open(str(hidden), "w", format="mp4", options=_FRAGMENTED)
        opened = _Open(container, None, hidden, wall, continues=continues)
        if connection.remux:
            opened.stream = container.add_stream_from_template(connection.stream)
        else:
            opened.decoder = av.CodecContext.create(connection.codec, "r")
            opened.stream = container.add_stream("libx264", rate=connection.rate or 30)
            opened.stream.pix_fmt = "yuv420p"
            opened.stream.options = {"preset": "veryfast", "tune": "zerolatency", "crf": "20"}
            opened.stream.codec_context.time_base = _ENCODE_TIME_BASE
        self._open = opened

    def _write(self, copy: _Copy) -> None:
        opened, connection = self._open, self._connection
        assert opened is not None and connection is not None
        opened.last_wall = copy.wall
        if not connection.remux:
            self._encode(opened, copy)
            return
        dts = copy.dts if copy.dts is not None else copy.pts
        pts = copy.pts if copy.pts is not None else copy.dts
        if dts is None or pts is None:  # no timestamps: the arrival clock stands in
            dts = pts = round((copy.wall - opened.start) / connection.time_base)
            origin = 0
        else:
            origin = opened.origin = dts if opened.origin is None else opened.origin
        dts -= origin
        pts -= origin
        if dts <= opened.last_dts:  # the MP4 muxer refuses dts that do not increase
            dts = opened.last_dts + 1
        pts = max(pts, dts)
        opened.last_dts = dts
        packet = av.Packet(copy.data)
        packet.pts, packet.dts = pts, dts
        packet.time_base = connection.time_base
        packet.is_keyframe = copy.key
        packet.stream = opened.stream
        opened.container.mux(packet)

    def _encode(self, opened: _Open, copy: _Copy) -> None:
        packet = av.Packet(copy.data)
        for frame in opened.decoder.decode(packet):
            stream = opened.stream
            if stream.codec_context.width == 0 or not stream.width:
                stream.width, stream.height = frame.width, frame.height
            pts = max(round((copy.wall - opened.start) * 1000), opened.encoder_pts + 1)
            opened.encoder_pts = pts
            # MJPEG decodes to full-range YUV ("yuvj"): said so, or swscale takes it for
            # video range and the picture's levels shift.
            full = frame.format.name.startswith("yuvj")
            image = frame.reformat(
                format="yuv420p",
                src_color_range="JPEG" if full else None,
                dst_color_range="MPEG" if full else None,
            )
            image.pts, image.time_base = pts, _ENCODE_TIME_BASE
            opened.container.mux(stream.encode(image))

    def _finish(self) -> None:
        opened, self._open = self._open, None
        if opened is None:
            return
        try:
            if opened.decoder is not None and opened.encoder_pts >= 0:
                opened.container.mux(opened.stream.encode())
            opened.container.close()
        except Exception:
            log.exception("recording in %s: segment not finished", self.directory)
            opened.hidden.unlink(missing_ok=True)
            return
        if opened.last_wall <= opened.start and opened.hidden.stat().st_size == 0:
            opened.hidden.unlink(missing_ok=True)
            return
        end = max(opened.last_wall, opened.start + 0.001)
        final = self.directory / finished_name(opened.start, end, opened.continues)
        os.replace(opened.hidden, final)
        self.written += 1

    def _abandon(self) -> None:
        opened, self._open = self._open, None
        if opened is not None:
            try:
                opened.container.close()
            except Exception:  # already broken: the file goes either way
                log.debug("closing an abandoned segment failed", exc_info=True)
            opened.hidden.unlink(missing_ok=True)

    def _enforce_retention(self) -> bool:
        """Removes old segments as the policy says; True when the disk is still too full."""
        policy = self.policy

        def too_full() -> bool:
            return shutil.disk_usage(self.directory).free < policy.min_free_bytes

        enforce_retention(
            self.directory, Limits(None, policy.max_age_s, policy.max_bytes, too_full)
        )
        low = too_full()
        if low and not self.low_space:
            log.warning(
                "recording %s: paused, less than %d MB free",
                self.directory,
                policy.min_free_bytes >> 20,
            )
        self.low_space = low
        return low

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._worker.close(timeout_s=30)  # what waits is written first, then the segment finished
        if self._connection is not None:
            self._connection.close()


class _Discard:
    """A file object that keeps nothing: the holder containers are never written."""

    def write(self, data: bytes) -> int:
        return len(data)

    def seek(self, *args: Any) -> int:
        return 0

    def tell(self) -> int:
        return 0
