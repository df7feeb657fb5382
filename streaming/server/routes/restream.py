"""Restream routes: one pipeline source's annotated picture as HLS, MJPEG and a snapshot JPEG
(RTSP has its own port: ``streaming/restreams.py``), and the URLs of every output.

A player that can send a header sends the key (viewer role); one that cannot (VLC, an
``<img>``, a TV) opens the URLs ``GET /inference_pipelines/{id}/restream`` lists, each with
a signed token for that source alone (``?token=``), never the API key.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response, StreamingResponse

from sinks.restream import mjpeg_parts, snapshot
from sinks.restream.mjpeg import CONTENT_TYPE

from ...errors import NotFound, UpstreamTimeout
from ...pipelines.models import path_number
from ...restreams import SourceRestream
from ..docs import ERROR_RESPONSES
from ..http import authorize
from ..state import ServerState, get_state

__all__ = ["listed_urls", "restream_urls", "router"]

router = APIRouter(responses=ERROR_RESPONSES, tags=["restream"])

_BASE = "/restream/{pipeline_id}/{source_id}"
_NO_STORE = {"Cache-Control": "no-store"}
_PICTURE_WAIT_S = 10.0
"""The longest a snapshot or a first playlist waits for the source's next picture."""


async def _played(
    request: Request,
    pipeline_id: str,
    source_id: str,
    state: ServerState = Depends(get_state),
) -> SourceRestream:
    """The source a player may watch: with its token, or a key with the viewer role."""
    number = path_number(source_id)
    token = request.query_params.get("token")
    if token is None:
        authorize(request, state)
    else:  # checked before the path is judged: no key or token, no answer about it
        state.restreams.tokens.check(token, pipeline_id, -1 if number is None else number)
    if number is None:
        raise NotFound(f"pipeline {pipeline_id} has no source {source_id!r}")
    return await state.restreams.source(pipeline_id, number)


_PLAYED = Annotated[SourceRestream, Depends(_played)]


@router.get(f"{_BASE}/snapshot.jpg", response_class=Response)
async def snapshot_jpeg(played: _PLAYED) -> Response:
    """The source's next annotated picture, as JPEG."""
    picture = await snapshot(played.subscribe("jpeg"), _PICTURE_WAIT_S)
    if picture is None:
        raise UpstreamTimeout(f"no picture from the source within {_PICTURE_WAIT_S:.0f} s")
    return Response(picture, media_type="image/jpeg", headers=_NO_STORE)


@router.get(f"{_BASE}/mjpeg", response_class=StreamingResponse)
async def mjpeg(played: _PLAYED) -> StreamingResponse:
    """The source's annotated picture as MJPEG (``multipart/x-mixed-replace``), at the
    restream's rate, until the player leaves or the source ends."""
    parts = mjpeg_parts(played.subscribe("jpeg"))
    return StreamingResponse(parts, media_type=CONTENT_TYPE, headers=_NO_STORE)


@router.get(f"{_BASE}/index.m3u8", response_class=Response)
async def hls_playlist(request: Request, played: _PLAYED) -> Response:
    """The source's live HLS playlist (MPEG-TS segments, one a keyframe interval long)."""
    token = request.query_params.get("token")
    query = urlencode({"token": token}) if token else ""
    wait = _PICTURE_WAIT_S + 4 * request.app.state.server.settings.restream_keyframe_s
    if played.ended is not None:
        raise NotFound(f"pipeline {played.pipeline_id} source {played.source_id}: {played.ended}")
    playlist = await played.hls.playlist(query, wait)
    if playlist is None:
        raise UpstreamTimeout(f"no HLS segment of the source within {wait:.0f} s")
    return Response(playlist, media_type="application/vnd.apple.mpegurl", headers=_NO_STORE)


@router.get(f"{_BASE}/segment-{{sequence}}.ts", response_class=Response)
async def hls_segment(sequence: str, played: _PLAYED) -> Response:
    """One HLS segment (MPEG-TS), while the playlist lists it."""
    data = None
    if (number := path_number(sequence, max_digits=12)) is not None:
        data = played.hls.segment(number)
    if data is None:
        raise NotFound(f"segment {sequence!r} is not (or no longer) in the playlist")
    return Response(data, media_type="video/mp2t", headers=_NO_STORE)


@router.get("/inference_pipelines/{pipeline_id}/restream")
async def restream_listing(
    request: Request,
    pipeline_id: str,
    expires_in: Annotated[int | None, Query(ge=60, le=10 * 365 * 86400)] = None,
    state: ServerState = Depends(get_state),
) -> dict[str, Any]:
    """Ours: every restream URL of each source of the pipeline (RTSP, HLS, MJPEG, snapshot,
    WHEP), each with a token for that source (``expires_in`` seconds, at most
    ``VISIONSTREAM_RESTREAM_TOKEN_TTL_S``), and what each restream costs now."""
    authorize(request, state)
    sources = await restream_urls(request, state, pipeline_id, expires_in)
    return {"status": "success", "sources": sources}


async def restream_urls(
    request: Request, state: ServerState, pipeline_id: str, ttl_s: int | None = None
) -> dict[str, Any]:
    """Per source of the pipeline: its restream URLs and its restream's state."""
    watched = await state.pipelines.watched(pipeline_id)
    return listed_urls(request, state, pipeline_id, watched.source_ids, ttl_s)


def listed_urls(
    request: Request,
    state: ServerState,
    pipeline_id: str,
    source_ids: list[int],
    ttl_s: int | None = None,
) -> dict[str, Any]:
    """Each source's restream URLs and what its restream costs now, from what this server
    knows: no call to the pipeline (a status must answer while a Ray actor moves)."""
    base = str(request.base_url)
    return {
        str(source_id): {
            **state.restreams.urls(base, pipeline_id, source_id, ttl_s),
            "restream": state.restreams.stats_of(pipeline_id, source_id),
        }
        for source_id in source_ids
    }
