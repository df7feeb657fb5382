"""Pipelines' recordings: ``GET /recordings`` (what is recorded), ``GET /recordings/{pipeline}/
{source}/index`` (its segments, gaps and the source's events in a range), and ``GET
/recordings/{pipeline}/{source}?start=&end=``: the range as one MP4, cut at the keyframe at or
before ``start``, without re-encoding (served with range requests, then removed).

Any replica serves any recording: the segments are in the shared ``VISIONSTREAM_SINK_DIR``."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import FileResponse

from sinks.recording.segments import Segment, segments

from ...errors import InvalidRequest, NotFound
from ...events.store import EventFilter
from ...pipelines.recording import recording_directory
from ..docs import ERROR_RESPONSES
from ..exports import export_file
from ..http import AUTHENTICATED
from ..state import ServerState, get_state
from .events import event_body, milliseconds, read_store

__all__ = ["router"]

router = APIRouter(
    prefix="/recordings", responses=ERROR_RESPONSES, dependencies=[AUTHENTICATED], tags=["events"]
)

_TIME = Annotated[
    str,
    Query(max_length=64, description="ISO 8601 (UTC unless it says) or seconds since the epoch"),
]
_OPTIONAL_TIME = Annotated[str | None, Query(max_length=64)]


def _directory(state: ServerState, pipeline: str, source: str) -> Path:
    directory = recording_directory(state.settings.sink_dir, pipeline, source)
    if directory is None or not directory.is_dir():
        raise NotFound(f"no recording of pipeline {pipeline[:64]!r} source {source[:16]!r}")
    return directory


def _span(start: str | None, end: str | None) -> tuple[float | None, float | None]:
    low, high = milliseconds("start", start), milliseconds("end", end)
    if low is not None and high is not None and high <= low:
        raise InvalidRequest("end must be after start")
    return (low / 1000 if low is not None else None, high / 1000 if high is not None else None)


def _segment(segment: Segment) -> dict[str, Any]:
    return {"start": segment.start, "end": segment.end, "bytes": segment.size}


@router.get("")
async def list_recordings(state: Annotated[ServerState, Depends(get_state)]) -> dict:
    """Every recorded pipeline source: its first and last recorded moments and its size."""
    root = state.settings.sink_dir / "recordings"

    def scan() -> list[dict[str, Any]]:
        found = []
        for pipeline in sorted(p for p in _children(root) if p.is_dir()):
            for source in sorted(s for s in _children(pipeline) if s.is_dir()):
                kept = segments(source)
                if kept:
                    found.append(
                        {
                            "pipeline": pipeline.name,
                            "source": source.name,
                            "start": kept[0].start,
                            "end": kept[-1].end,
                            "segments": len(kept),
                            "bytes": sum(s.size for s in kept),
                        }
                    )
        return found

    return {"recordings": await asyncio.to_thread(scan)}


def _children(path: Path) -> list[Path]:
    try:
        return list(path.iterdir())
    except FileNotFoundError:
        return []


@router.get("/{pipeline}/{source}/index")
async def recording_index(
    pipeline: str,
    source: str,
    state: Annotated[ServerState, Depends(get_state)],
    start: _OPTIONAL_TIME = None,
    end: _OPTIONAL_TIME = None,
) -> dict:
    """The segments in ``[start, end]`` (all without them), the gaps between them (a camera
    lost, a server stopped, a pause between events), and the source's stored events in the
    same range (at most 1000, oldest first)."""
    directory = _directory(state, pipeline, source)
    low, high = _span(start, end)
    found = [
        s
        for s in await asyncio.to_thread(segments, directory)
        if (low is None or s.end >= low) and (high is None or s.start <= high)
    ]
    gaps = [
        {"start": a.end, "end": b.start} for a, b in itertools.pairwise(found) if not b.continues
    ]
    listed: list[dict[str, Any]] = []
    if state.events is not None and found:
        store = state.events.store
        where = EventFilter(
            pipeline=pipeline,
            source=source,
            since_ms=round(found[0].start * 1000),
            until_ms=round(found[-1].end * 1000) + 1,
        )
        page = await read_store(store, lambda: store.page(where, limit=1000, order="asc"))
        listed = [event_body(row, state.settings.sink_dir) for row in page.rows]
    return {"segments": [_segment(s) for s in found], "gaps": gaps, "events": listed}


@router.get(
    "/{pipeline}/{source}",
    response_class=FileResponse,
    responses={200: {"content": {"video/mp4": {}}, "description": "the range as one MP4"}},
)
async def export_recording(
    pipeline: str,
    source: str,
    start: _TIME,
    end: _TIME,
    state: Annotated[ServerState, Depends(get_state)],
):
    """A source's recording between two times, as one MP4 (the camera's own encoding)."""
    directory = _directory(state, pipeline, source)
    low, high = _span(start, end)
    assert low is not None and high is not None
    if high - low > state.settings.max_export_seconds:
        raise InvalidRequest(
            f"a range of at most {state.settings.max_export_seconds:g} s is exported at once "
            "(VISIONSTREAM_MAX_EXPORT_SECONDS)"
        )
    return await export_file(directory, low, high, f"{pipeline}-{source}")
