"""WHIP ingest (RFC 9725) and WHEP playback: standard publishers and players, no SDK.

- ``POST /whip/workflows/{workspace}/{workflow_id}``: a new pipeline running that workflow on
  the published video (results to the workflow's sinks); query parameters are the
  workflow's parameters, but ``stream_output`` (what WHEP players of it see).
- ``POST /whip/pipelines/{pipeline_id}``: the publisher joins that pipeline as a new source.
- Both answer ``201 Created``: the SDP answer, ``Location: /whip/resources/{id}`` (``DELETE``
  there ends it) and the server's ICE servers in ``Link`` headers.
- ``POST /whep/resources/{id}`` plays a WHIP resource's annotated output,
  ``POST /whep/pipelines/{pipeline_id}/{source_id}`` a pipeline source's:
  ``Location: /whep/sessions/{id}``, ``DELETE`` there ends playback.

The API key is the bearer token (``Authorization: Bearer <key>``), as WHIP and WHEP have it.
ICE is gathered before answering, so publishers need no trickle: ``PATCH`` has no route and
is answered 405 (``Allow: DELETE``), which RFC 9725 has publishers accept.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from ...errors import (
    InvalidOffer,
    NotFound,
    NotSupportedHere,
    UnsupportedMediaType,
)
from ...peer.publisher import Publisher
from ...pipelines import PipelineManager
from ...pipelines.manager import PipelineNotFound
from ...pipelines.models import InitialisePipelinePayload, VideoConfiguration, path_number
from ...pipelines.pipeline import LastSource, SourceNotFound
from ...protocol.messages import WebRTCOffer, WebRTCWorkerRequest, WorkflowConfiguration
from ...rtc.candidates import CandidateScreen
from ...rtc.ice import build_configuration
from ...workflows.blocks.base import BuildContext
from ...workflows.runner import require_roles
from ..auth import client_address
from ..docs import ERROR_RESPONSES
from ..http import AUTHENTICATED, authenticated_body, current_principal
from ..state import ServerState, get_state
from .webrtc import open_session

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(responses=ERROR_RESPONSES, tags=["WHIP and WHEP"])

SDP = "application/sdp"
_SDP_BODY = {
    "requestBody": {
        "required": True,
        "content": {SDP: {"schema": {"type": "string", "example": "v=0\r\n..."}}},
    },
    "responses": {"201": {"description": "the SDP answer", "content": {SDP: {}}}},
}


class ResourceNotFound(NotFound):
    """No WHIP resource or WHEP session by that id (ended, or never there)."""


async def _offer(
    request: Request,
    body: bytes = authenticated_body(
        lambda settings: settings.max_request_bytes, key_in_body=False
    ),
    state: ServerState = Depends(get_state),
) -> str:
    """The request's SDP offer, once the caller is allowed and the server takes one."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != SDP:
        raise UnsupportedMediaType(
            f"the body must be an SDP offer with Content-Type {SDP}, not {media_type or 'none'}"
        )
    try:
        offer = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidOffer("the SDP offer is not UTF-8 text") from None
    await state.check_accepting()
    return offer


_OFFER = Depends(_offer)


def _local_pipelines(state: ServerState) -> PipelineManager:
    if not isinstance(state.pipelines, PipelineManager):
        raise NotSupportedHere(
            "WHIP ingest needs the pipelines in the server's own process; this deployment "
            "runs them on Ray actors"
        )
    return state.pipelines


def _ice_links(state: ServerState) -> list[str]:
    """The server's ICE servers as RFC 9725 ``Link`` values (a publisher may need the
    relay to reach us; only callers holding the API key see its credentials)."""
    settings = state.settings
    links = []
    for url in settings.ice_servers:
        link = f'<{url}>; rel="ice-server"'
        if url.startswith("turn") and settings.ice_username and settings.ice_credential:
            secret = settings.ice_credential.get_secret_value()
            link += (
                f'; username="{settings.ice_username}"; credential="{secret}"'
                '; credential-type="password"'
            )
        links.append(link)
    return links


def _created(answer: str, location: str, links: list[str]) -> Response:
    headers = {"Location": location}
    if links:
        headers["Link"] = ", ".join(links)
    return Response(answer, status_code=201, media_type=SDP, headers=headers)


def _parameter(value: str) -> Any:
    """A query value as JSON where it is (numbers, lists, objects), else the text."""
    try:
        return json.loads(value)
    except ValueError:
        return value


async def _publish(
    state: ServerState,
    request: Request,
    offer: str,
    stream_output: str | None,
    attach: Callable[[Publisher], Awaitable[None]],
) -> Response:
    """A publisher answered and ``attach``-ed to its pipeline; it is cleaned up when it ends."""
    settings = state.settings
    ice = build_configuration(
        settings.ice_servers,
        [],
        username=settings.ice_username,
        credential=(
            settings.ice_credential.get_secret_value() if settings.ice_credential else None
        ),
        policy=settings.ice_transport_policy,
    )
    publisher = state.publishers.create(settings.whip_idle_timeout_s)
    publisher.stream_output = stream_output
    try:
        answer = await publisher.answer(
            offer,
            ice,
            settings.ice_gathering_timeout_s,
            settings.connect_timeout_s,
            CandidateScreen.of(settings),
            client_address(request),
        )
        await attach(publisher)
    except BaseException:
        await state.publishers.discard(publisher)
        raise
    state.publishers.run(publisher, lambda ended: _stop_source(state, ended))
    log.info(
        "whip %s publishes into pipeline %s as source %s",
        publisher.resource_id[:8],
        publisher.pipeline_id,
        publisher.source_id,
    )
    return _created(answer, f"/whip/resources/{publisher.resource_id}", _ice_links(state))


async def _stop_source(state: ServerState, publisher: Publisher) -> None:
    """The publisher ended: its players end, then its pipeline (a workflow resource's) or
    its source in the pipeline it joined."""
    for viewer in list(publisher.viewers):
        if not viewer.closed.is_set():
            await viewer.source_ended(f"WHIP resource {publisher.resource_id} ended")
    pipeline_id, manager = publisher.pipeline_id, _local_pipelines(state)
    if pipeline_id is None or publisher.source_id is None:
        return
    try:
        if publisher.owns_pipeline:
            await manager.terminate(pipeline_id)
        else:
            await manager.remove_source(pipeline_id, publisher.source_id)
    except (PipelineNotFound, SourceNotFound):
        pass  # terminated or removed through the pipelines API already
    except LastSource:  # the pipeline's other sources were removed meanwhile: it stays
        log.info(
            "whip %s was pipeline %s's last source; the pipeline stays",
            publisher.resource_id[:8],
            pipeline_id[:8],
        )


@router.post("/whip/workflows/{workspace}/{workflow_id}", status_code=201, openapi_extra=_SDP_BODY)
async def whip_workflow(
    workspace: str,
    workflow_id: str,
    request: Request,
    offer: str = _OFFER,
    state: ServerState = Depends(get_state),
) -> Response:
    """Publish video to be processed by a stored workflow, like a session running it."""
    manager = _local_pipelines(state)
    query = dict(request.query_params)
    stream_output = query.pop("stream_output", None)
    config = WorkflowConfiguration(
        workspace_name=workspace,
        workflow_id=workflow_id,
        workflows_parameters={k: _parameter(v) for k, v in query.items()} or None,
    )
    specification = state.workflows.specification(config)  # unknown: refused before ICE
    context = BuildContext(
        state.models,
        settings=state.settings,
        workflows=state.workflows.stored,
        language=state.language,
        live=True,
    )
    await require_roles(specification, current_principal().role, context)

    async def start_pipeline(publisher: Publisher) -> None:
        # Built unvalidated: a publisher's URL is no reference a caller may give.
        video = VideoConfiguration.model_construct(
            type="VideoConfiguration", video_reference=publisher.url
        )
        payload = InitialisePipelinePayload(
            video_configuration=video, processing_configuration=config
        )
        publisher.pipeline_id = await manager.initialise(
            payload, published={publisher.url}, keep=False
        )
        publisher.source_id, publisher.owns_pipeline = 0, True

    return await _publish(state, request, offer, stream_output, start_pipeline)


@router.post("/whip/pipelines/{pipeline_id}", status_code=201, openapi_extra=_SDP_BODY)
async def whip_pipeline(
    pipeline_id: str,
    request: Request,
    offer: str = _OFFER,
    state: ServerState = Depends(get_state),
) -> Response:
    """Publish video as one more source of a running pipeline."""
    manager = _local_pipelines(state)
    manager.get(pipeline_id)  # a 404 before any ICE work

    async def join(publisher: Publisher) -> None:
        url = publisher.url
        publisher.source_id = await manager.add_source(pipeline_id, url, published={url})
        publisher.pipeline_id = pipeline_id

    stream_output = request.query_params.get("stream_output")
    return await _publish(state, request, offer, stream_output, join)


def _publisher(state: ServerState, resource_id: str) -> Publisher:
    publisher = state.publishers.get(resource_id)
    if publisher is None:
        raise ResourceNotFound(f"no WHIP resource {resource_id} (it ended, or never existed)")
    return publisher


@router.delete("/whip/resources/{resource_id}", dependencies=[AUTHENTICATED])
async def whip_delete(resource_id: str, state: ServerState = Depends(get_state)) -> Response:
    """End a publication: its peer closes and its pipeline source stops."""
    await state.publishers.delete(_publisher(state, resource_id))
    return Response(status_code=200)


async def _play(
    request: Request,
    state: ServerState,
    offer: str,
    pipeline_id: str,
    source_id: int,
    stream_output: str | None,
) -> tuple[Response, Any]:
    payload = WebRTCWorkerRequest(
        webrtc_offer=WebRTCOffer(type="offer", sdp=offer),
        pipeline_id=pipeline_id,
        pipeline_source_id=source_id,
        stream_output=[stream_output] if stream_output else None,
        data_output=[],
        webrtc_realtime_processing=True,
    )
    watched = await state.pipelines.watched(pipeline_id)
    worker, answer = await open_session(
        state,
        payload,
        client_address(request),
        request.headers.get("user-agent", ""),
        watched=watched,
    )
    location = f"/whep/sessions/{worker.session_id}"
    return _created(answer.sdp, location, _ice_links(state)), worker


@router.post("/whep/resources/{resource_id}", status_code=201, openapi_extra=_SDP_BODY)
async def whep_resource(
    resource_id: str,
    request: Request,
    offer: str = _OFFER,
    state: ServerState = Depends(get_state),
) -> Response:
    """Play the annotated output of a WHIP resource (ends when its publisher does)."""
    publisher = _publisher(state, resource_id)
    if publisher.pipeline_id is None or publisher.source_id is None:
        raise ResourceNotFound(f"WHIP resource {resource_id} is not publishing yet")
    stream_output = request.query_params.get("stream_output") or publisher.stream_output
    response, worker = await _play(
        request, state, offer, publisher.pipeline_id, publisher.source_id, stream_output
    )
    publisher.viewers.add(worker)
    return response


@router.post("/whep/pipelines/{pipeline_id}/{source_id}", status_code=201, openapi_extra=_SDP_BODY)
async def whep_pipeline(
    pipeline_id: str,
    source_id: str,
    request: Request,
    offer: str = _OFFER,
    state: ServerState = Depends(get_state),
) -> Response:
    """Play the annotated output of one source of a running pipeline (a publisher's source:
    playback ends with it)."""
    # A text path parameter, read after the key check: a typed one would answer a caller
    # without the key (422) before it was asked for the key.
    if (source := path_number(source_id)) is None:
        raise SourceNotFound(f"pipeline {pipeline_id} has no source {source_id!r}")
    stream_output = request.query_params.get("stream_output")
    response, worker = await _play(request, state, offer, pipeline_id, source, stream_output)
    if (publisher := state.publishers.of_source(pipeline_id, source)) is not None:
        publisher.viewers.add(worker)
    return response


@router.delete("/whep/sessions/{session_id}", dependencies=[AUTHENTICATED])
async def whep_delete(session_id: str, state: ServerState = Depends(get_state)) -> Response:
    """End playback."""
    worker = next((w for w in state.sessions.workers() if w.session_id == session_id), None)
    if worker is None:
        raise ResourceNotFound(f"no WHEP session {session_id} (it ended, or never existed)")
    await worker.close()
    return Response(status_code=200)
