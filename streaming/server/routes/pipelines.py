"""``/inference_pipelines/*``: the reference's routes and response shapes (pipelines-api.md §1)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from sinks.base import SinkSettings
from sources.kinds import FILE, kind_of, scheme_of

from ...errors import InvalidRequest
from ...pipelines import InitialisePipelinePayload
from ...pipelines.models import AddSourcePayload, ConsumePayload, path_number
from ...pipelines.pipeline import SourceNotFound
from ...workflows.blocks.base import BuildContext
from ...workflows.runner import require_roles
from ..docs import ERROR_RESPONSES, json_body
from ..http import authenticated_body, current_principal
from ..state import ServerState, get_state
from .restream import listed_urls

__all__ = ["restore_pipelines", "router"]

log = logging.getLogger(__name__)

router = APIRouter(prefix="/inference_pipelines", responses=ERROR_RESPONSES, tags=["pipelines"])


class _KeyOnly(BaseModel):
    api_key: str | None = None


def _context(pipeline_id: str | None) -> dict[str, Any]:
    return {"request_id": str(uuid.uuid4()), "pipeline_id": pipeline_id}


def _success(pipeline_id: str | None, **fields: Any) -> dict[str, Any]:
    return {"status": "success", "context": _context(pipeline_id), **fields}


_BODY = authenticated_body(lambda settings: settings.max_request_bytes)


def _payload(model: type[BaseModel]) -> Any:
    """A route parameter: the JSON body (the SDK sends one even on GET) validated by
    ``model``, once the API key is checked. ``ValidationError`` propagates: a 422."""

    async def parse(raw: bytes = _BODY) -> BaseModel:
        return model.model_validate_json(raw or b"{}")

    return Depends(parse)


_KEYED = _payload(_KeyOnly)


async def _check_egress(state: ServerState, payload: InitialisePipelinePayload) -> None:
    """Cameras and every sink's destinations: hosts this server may connect to for a
    caller."""
    references = payload.video_configuration.video_reference
    subs = list((payload.video_configuration.sub_streams or {}).values())
    for reference in [*(references if isinstance(references, list) else [references]), *subs]:
        await _check_reference(state, reference)
    for _, sink in payload.sink_configuration or ():
        if isinstance(sink, SinkSettings):
            for url, field in sink.destinations():
                await state.egress.check_url(url, field)
    for field in ("webhook_url", "mqtt_url"):
        described = getattr(payload.describe, field, None)
        if described is not None:
            await state.egress.check_url(described, f"describe.{field}")
    count = len(references) if isinstance(references, list) else 1
    for index, push in enumerate(payload.restream.push if payload.restream else ()):
        await state.egress.check_url(push.url, f"restream.push[{index}].url")
        if push.source_id >= count:
            raise InvalidRequest(
                f"restream.push[{index}].source_id: the pipeline has {count} source(s)"
            )
    # The workflow's own URLs are checked where every workflow is compiled (compile_config).


async def _check_reference(state: ServerState, reference: str | int) -> None:
    # Any URL but a local file's is somewhere the server would connect (refused later or not).
    if isinstance(reference, str) and scheme_of(reference) and kind_of(reference) is not FILE:
        await state.egress.check_url(reference, "video_reference")


async def restore_pipelines(state: ServerState) -> None:
    """Pipelines a previous server on this data directory left running, started again;
    each request passes the same checks as a new one."""
    await state.pipelines.restore(
        lambda payload: _check_egress(state, payload),
        lambda: state.draining,
        state.restreams.push,
    )


@router.post("/initialise", openapi_extra=json_body(InitialisePipelinePayload))
async def initialise(
    payload: InitialisePipelinePayload = _payload(InitialisePipelinePayload),
    state: ServerState = Depends(get_state),
) -> JSONResponse:
    """Starts a monitoring pipeline: cameras or files through a workflow, results to sinks and
    events."""
    await state.check_accepting()
    await _check_egress(state, payload)
    # Its workflow compiles in a worker (or a Ray actor): the caller's role is checked here.
    context = BuildContext(
        state.models,
        settings=state.settings,
        workflows=state.workflows.stored,
        language=state.language,
    )
    specification = state.workflows.specification(payload.processing_configuration)
    await require_roles(specification, current_principal().role, context)
    pipeline_id = await state.pipelines.initialise(payload)
    await state.restreams.push(pipeline_id, payload)
    return JSONResponse(_success(pipeline_id))


@router.get("/list", openapi_extra=json_body(_KeyOnly), dependencies=[_KEYED])
async def list_pipelines(state: ServerState = Depends(get_state)) -> dict:
    """The running pipelines' ids."""
    listing = await state.pipelines.listing()
    # The reference's list of ids, and ours: where each runs (a Ray cluster's node).
    return _success(None, pipelines=[p["pipeline_id"] for p in listing], placements=listing)


@router.get("/{pipeline_id}/status", openapi_extra=json_body(_KeyOnly), dependencies=[_KEYED])
async def status(
    request: Request, pipeline_id: str, state: ServerState = Depends(get_state)
) -> dict:
    """A pipeline's state and, per source, its camera, rates, drops and motion gating; and
    (ours) where players may watch each source's annotated picture (``restream``)."""
    report = await state.pipelines.status(pipeline_id)
    ids = [int(s["source_id"]) for s in report.get("sources_metadata", []) if "source_id" in s]
    return _success(
        pipeline_id, report=report, restream=listed_urls(request, state, pipeline_id, ids)
    )


@router.post("/{pipeline_id}/pause", openapi_extra=json_body(_KeyOnly), dependencies=[_KEYED])
async def pause(pipeline_id: str, state: ServerState = Depends(get_state)) -> dict:
    """Pauses a pipeline: its sources stay connected, no frame is processed."""
    await state.pipelines.pause(pipeline_id)
    return _success(pipeline_id)


class DescribingPayload(_KeyOnly):
    enabled: bool
    """Describe the pipeline's events from now (true) or not (false)."""


@router.post("/{pipeline_id}/describe", openapi_extra=json_body(DescribingPayload))
async def set_describing(
    pipeline_id: str,
    payload: DescribingPayload = _payload(DescribingPayload),
    state: ServerState = Depends(get_state),
) -> dict:
    """Ours: switches a pipeline's event descriptions (started with ``describe``) on or
    off at run time; the answer's ``descriptions`` counts what was described so far."""
    stats = await state.pipelines.set_describing(pipeline_id, payload.enabled)
    return _success(pipeline_id, descriptions=stats)


@router.post("/{pipeline_id}/resume", openapi_extra=json_body(_KeyOnly), dependencies=[_KEYED])
async def resume(pipeline_id: str, state: ServerState = Depends(get_state)) -> dict:
    """Resumes a paused pipeline."""
    await state.pipelines.resume(pipeline_id)
    return _success(pipeline_id)


@router.post("/{pipeline_id}/terminate", openapi_extra=json_body(_KeyOnly), dependencies=[_KEYED])
async def terminate(pipeline_id: str, state: ServerState = Depends(get_state)) -> dict:
    """Ends a pipeline and frees its cameras, recordings and sinks."""
    await state.pipelines.terminate(pipeline_id)
    return _success(pipeline_id)


@router.post("/{pipeline_id}/sources", openapi_extra=json_body(AddSourcePayload))
async def add_source(
    pipeline_id: str,
    payload: AddSourcePayload = _payload(AddSourcePayload),
    state: ServerState = Depends(get_state),
) -> dict:
    """Ours: one more source on a running pipeline (checked as ``initialise`` checks them);
    the answer's ``source_id`` tags its results and names it for removal."""
    await state.check_accepting()
    await _check_reference(state, payload.video_reference)
    if payload.sub_stream is not None:
        await _check_reference(state, payload.sub_stream)
    source_id = await state.pipelines.add_source(
        pipeline_id, payload.video_reference, sub_stream=payload.sub_stream
    )
    return _success(pipeline_id, source_id=source_id)


@router.delete(
    "/{pipeline_id}/sources/{source_id}", openapi_extra=json_body(_KeyOnly), dependencies=[_KEYED]
)
async def remove_source(
    pipeline_id: str, source_id: str, state: ServerState = Depends(get_state)
) -> dict:
    """Ours: stops one source of a running pipeline; the others go on."""
    # A text path parameter, read after the key check (a dependency): a typed one would
    # answer a caller without the key (422) before it was asked for the key.
    if (source := path_number(source_id)) is None:
        raise SourceNotFound(f"pipeline {pipeline_id} has no source {source_id!r}")
    await state.pipelines.remove_source(pipeline_id, source)
    return _success(pipeline_id, source_id=source)


@router.get("/{pipeline_id}/consume", openapi_extra=json_body(ConsumePayload))
async def consume(
    pipeline_id: str,
    payload: ConsumePayload = _payload(ConsumePayload),
    state: ServerState = Depends(get_state),
) -> JSONResponse:
    """Takes the results a pipeline has buffered since the last call (the reference's
    `consume`)."""
    results = await state.pipelines.consume(pipeline_id, payload)
    return JSONResponse(_success(pipeline_id, **results))
