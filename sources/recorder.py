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
import queue
import re
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, Protocol

import av

__all__ = [
    "NoRecording",
    "PacketSink",
    "RecordingPolicy",
    "Segment",
    "SegmentRecorder",
    "export",
    "segments",
]

log = logging.getLogger(__name__)

_REMUXED = {"h264", "hevc"}
"""Codecs an MP4 carries as the camera sends them (everything else is re-encoded)."""
_FINISHED = re.compile(r"^(\d+)-(\d+)(c?)\.mp4$")
"""``<start_ms>-<end_ms>.mp4``; a ``c`` before ``.mp4``: it continues the segment before it
(cut for length), so nothing is missing between the two."""
_PARTIAL = re.compile(r"^\.(\d+)\.partial\.mp4$")
# A fragment at each keyframe and at least every second, each written through to the file as
# it is made (flush_packets: the muxer's 256 KiB buffer held seconds of a low-rate camera, and
# a kill -9 lost them all): what a crash leaves is playable up to its last whole fragment.
_FRAGMENTED = {
    "movflags": "frag_keyframe+empty_moov+default_base_moof",
    "frag_duration": "1000000",
    "flush_packets": "1",
}
_ENCODE_TIME_BASE = Fraction(1, 1000)


class PacketSink(Protocol):
    """What a camera reader hands its packets to, on its own thread; keep each call short."""

    def opened(self, stream: Any) -> None:
        """A connection's video stream (its codec and parameters); packets follow."""

    def packet(self, packet: av.Packet) -> None: ...

    def lost(self) -> None:
        """The connection ended; the next ``opened`` starts a new one."""


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


@dataclass(frozen=True)
class Segment:
    path: Path
    start: float
    """Seconds since the epoch of its first packet."""
    end: float
    size: int
    continues: bool = False
    """It follows the segment before it with nothing missing (a cut for length); False: a
    new stretch (after a start, a reconnect, a gap or a pause between events)."""


class NoRecording(LookupError):
    """Nothing recorded in the range asked for."""


def segments(directory: Path) -> list[Segment]:
    """The finished segments in ``directory``, oldest first (read from their names)."""
    found = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return []
    for entry in entries:
        if (match := _FINISHED.match(entry.name)) is not None:
            try:
                size = entry.stat().st_size
            except FileNotFoundError:  # removed meanwhile (retention)
                continue
            start, end = int(match[1]) / 1000, int(match[2]) / 1000
            found.append(Segment(Path(entry.path), start, end, size, bool(match[3])))
    return sorted(found, key=lambda s: s.start)


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
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(policy.queue_packets)
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
        self._thread = threading.Thread(
            target=self._run, name=f"recorder {directory.name}", daemon=True
        )
        self._thread.start()

    @property
    def thread_id(self) -> int | None:
        """The writer thread's native id (for measuring its CPU)."""
        return self._thread.native_id

    # ------------------------------------------------------------- reader thread

    def opened(self, stream: Any) -> None:
        holder = av.open(_Discard(), "w", format="mp4")
        codec = stream.codec_context.name
        remux = codec in _REMUXED
        template = holder.add_stream_from_template(stream) if remux else None
        rate = stream.average_rate or stream.guessed_rate
        self._put("opened", _Connection(holder, template, stream.time_base or Fraction(1, 90000),
                                        remux, codec, rate))  # fmt: skip
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
        try:
            self._queue.put_nowait((kind, item))
        except queue.Full:
            if kind == "packet":
                self.dropped += 1
            return False
        return True

    # ------------------------------------------------------------- writer thread

    def _run(self) -> None:
        self._recover()
        self._enforce_retention()
        next_retention = time.monotonic() + 60.0
        while True:
            kind, item = self._queue.get()
            try:
                if kind == "stop":
                    self._finish()
                    return
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
            if time.monotonic() >= next_retention:
                next_retention = time.monotonic() + 60.0
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
        hidden = self.directory / f".{round(wall * 1000)}.partial.mp4"
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
        mark = "c" if opened.continues else ""
        final = self.directory / f"{round(opened.start * 1000)}-{round(end * 1000)}{mark}.mp4"
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

    def _recover(self) -> None:
        """Hidden segments a crash left: what can still be read of each (up to its last
        whole fragment) is written again as a finished segment; the rest is removed."""
        for path in list(self.directory.glob(".*.partial.mp4")):
            match = _PARTIAL.match(path.name)
            if match is None:
                continue
            salvaged = self.directory / f".{match[1]}.salvage.mp4"
            start = int(match[1]) / 1000
            size = path.stat().st_size
            end = _salvage(path, salvaged, start)
            path.unlink(missing_ok=True)
            if end is None:
                salvaged.unlink(missing_ok=True)
                log.warning("recording %s: a segment a stop left open had nothing readable "
                            "(%d bytes): removed", self.directory, size)  # fmt: skip
                continue
            os.replace(salvaged, self.directory / f"{match[1]}-{round(end * 1000)}.mp4")
            log.info("recording %s: recovered %.1f s of a segment a stop left open (%d bytes)",
                     self.directory, end - start, size)  # fmt: skip

    def _enforce_retention(self) -> bool:
        """Removes old segments as the policy says; True when the disk is still too full."""
        policy = self.policy
        found = segments(self.directory)
        total = sum(s.size for s in found)
        now = time.time()
        while found:
            oldest = found[0]
            too_old = policy.max_age_s is not None and now - oldest.end > policy.max_age_s
            too_big = policy.max_bytes is not None and total > policy.max_bytes
            if not (too_old or too_big or self._free() < policy.min_free_bytes):
                break
            oldest.path.unlink(missing_ok=True)
            total -= oldest.size
            found.pop(0)
        low = self._free() < policy.min_free_bytes
        if low and not self.low_space:
            log.warning("recording %s: paused, less than %d MB free", self.directory,
                        policy.min_free_bytes >> 20)  # fmt: skip
        self.low_space = low
        return low

    def _free(self) -> int:
        return shutil.disk_usage(self.directory).free

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        while True:  # the stop must get in: a full queue is written first
            try:
                self._queue.put(("stop", None), timeout=1)
                break
            except queue.Full:
                if not self._thread.is_alive():
                    break
        self._thread.join(30)
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


def _salvage(path: Path, output: Path, start: float) -> float | None:
    """The packets of ``path`` up to the first that cannot be read, into ``output``;
    returns when the last of them was recorded (None: none could be read)."""
    first = last = None
    length = path.stat().st_size
    try:
        with av.open(str(path)) as source, av.open(str(output), "w", format="mp4") as out:
            stream = source.streams.video[0]
            base = stream.time_base
            target = out.add_stream_from_template(stream)
            try:
                for packet in source.demux(stream):
                    if packet.dts is None or packet.size == 0:
                        continue
                    cut = packet.pos is not None and packet.pos + packet.size > length
                    if cut or packet.is_corrupt:
                        break  # cut off by the crash: its bytes are not all there
                    first = packet.dts if first is None else first
                    last = packet.dts
                    packet.stream = target
                    out.mux(packet)
            except av.error.FFmpegError:  # the cut-off tail: everything before it is kept
                pass
            if first is None or last is None or base is None:
                return None
            return start + float((last - first) * base)
    except (av.error.FFmpegError, IndexError, OSError):
        return None


@dataclass(frozen=True)
class Exported:
    start: float
    """Where the file starts: the keyframe at or before the start asked for."""
    end: float
    segments: int
    truncated: bool
    """A later segment's picture size differed (the camera changed it): the file ends there."""


def export(directory: Path, start: float, end: float, output: Path) -> Exported:
    """``[start, end]`` of the recording in ``directory`` as one MP4 (no re-encoding), from
    the keyframe at or before ``start``; a gap stays a gap in its timestamps."""
    chosen = [s for s in segments(directory) if s.end >= start and s.start <= end]
    if not chosen:
        raise NoRecording(f"nothing recorded between {start:.3f} and {end:.3f}")
    truncated = False
    first_wall: float | None = None
    last_wall = start
    used = 0
    with av.open(str(output), "w", format="mp4", options={"movflags": "+faststart"}) as out:
        target: Any = None
        size: tuple[int, int] | None = None
        last_dts = -1
        for segment in chosen:
            with av.open(str(segment.path)) as source:
                stream = source.streams.video[0]
                shape = (stream.codec_context.width, stream.codec_context.height)
                if target is None:
                    target, size = out.add_stream_from_template(stream), shape
                elif shape != size:
                    truncated = True
                    break
                base = stream.time_base
                assert base is not None
                used += 1
                for packet in _range(source.demux(stream), segment.start, start, end, base):
                    assert packet.dts is not None  # _range passes only timed packets
                    wall = segment.start + float(packet.dts * base)
                    first_wall = wall if first_wall is None else first_wall
                    last_wall = wall
                    shift = round((segment.start - first_wall) / base)
                    dts = max(packet.dts + shift, last_dts + 1)
                    packet.pts = max((packet.pts if packet.pts is not None else dts) + shift, dts)
                    packet.dts = last_dts = dts
                    packet.stream = target
                    out.mux(packet)
        if first_wall is None:
            raise NoRecording(f"nothing recorded between {start:.3f} and {end:.3f}")
    return Exported(first_wall, last_wall, used, truncated)


def _range(
    packets: Iterator[av.Packet], segment_start: float, start: float, end: float, base: Fraction
) -> Iterator[av.Packet]:
    """The packets from the last keyframe at or before ``start`` up to ``end``."""
    waiting: list[av.Packet] = []
    for packet in packets:
        if packet.dts is None or packet.size == 0:
            continue
        wall = segment_start + float(packet.dts * base)
        if wall > end:
            return
        if wall < start:
            if packet.is_keyframe:
                waiting = [packet]
            elif waiting:
                waiting.append(packet)
            continue
        yield from waiting
        waiting = []
        yield packet
