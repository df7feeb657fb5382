"""A stretch of a recording as one MP4, cut from its segments without re-encoding."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

from .segments import NoRecording, segments

__all__ = ["Exported", "export"]


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
