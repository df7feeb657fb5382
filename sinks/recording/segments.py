"""A recording directory's index: its finished segments (named ``<start_ms>-<end_ms>.mp4``,
read from their names), what a crash left open (recovered up to its last whole fragment),
and retention over them."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

import av

from ..retention import Kept, Limits, remove_oldest

__all__ = ["NoRecording", "Segment", "enforce_retention", "partial_name", "recover", "segments"]

log = logging.getLogger(__name__)

_FINISHED = re.compile(r"^(\d+)-(\d+)(c?)\.mp4$")
"""``<start_ms>-<end_ms>.mp4``; a ``c`` before ``.mp4``: it continues the segment before it
(cut for length), so nothing is missing between the two."""
_PARTIAL = re.compile(r"^\.(\d+)\.partial\.mp4$")


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


def partial_name(start: float) -> str:
    """The hidden name a segment is written under until it is finished."""
    return f".{round(start * 1000)}.partial.mp4"


def finished_name(start: float, end: float, continues: bool) -> str:
    return f"{round(start * 1000)}-{round(end * 1000)}{'c' if continues else ''}.mp4"


def recover(directory: Path) -> None:
    """Hidden segments a crash left: what can still be read of each (up to its last
    whole fragment) is written again as a finished segment; the rest is removed."""
    for path in list(directory.glob(".*.partial.mp4")):
        match = _PARTIAL.match(path.name)
        if match is None:
            continue
        salvaged = directory / f".{match[1]}.salvage.mp4"
        start = int(match[1]) / 1000
        size = path.stat().st_size
        end = _salvage(path, salvaged, start)
        path.unlink(missing_ok=True)
        if end is None:
            salvaged.unlink(missing_ok=True)
            log.warning(
                "recording %s: a segment a stop left open had nothing readable (%d bytes): removed",
                directory,
                size,
            )
            continue
        os.replace(salvaged, directory / f"{match[1]}-{round(end * 1000)}.mp4")
        log.info(
            "recording %s: recovered %.1f s of a segment a stop left open (%d bytes)",
            directory,
            end - start,
            size,
        )


def enforce_retention(directory: Path, limits: Limits) -> None:
    """Removes finished segments, oldest first, while ``limits`` are exceeded (a segment's
    age counts from its end)."""
    found = [Kept(s.end, s.size, (s.path,)) for s in segments(directory)]
    remove_oldest(found, limits)


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
