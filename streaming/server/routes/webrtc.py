"""``POST /initialise_webrtc_worker``: validate, compile the workflow, start a PeerWorker."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from aiortc import RTCSessionDescription
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from sinks.masking import mask_url
from sources.kinds import MJPEG_SCHEMES, RTSP_SCHEMES, has_scheme_and_host

from ...access import OPEN, Principal, Role
from ...errors import InvalidRequest
from ...peer.processor import FrameProcessor, OutputSelection
from ...peer.session_config import SessionConfig
from ...peer.worker import PeerWorker
from ...protocol.messages import SIGNALING_PATH, InitializeWebRTCResponse, WebRTCWorkerRequest
from ...watching import WatchedPipeline
from ...workflows import CompiledWorkflow
from ...workflows.blocks.base import BuildContext
from ...workflows.runner import WorkflowOutputs, compile_config
from ..auth import client_address
from ..docs import ERROR_RESPONSES, json_body
from ..http import guarded_body, principal_of, validation_response
from ..state import ServerState, get_state

__all__ = ["open_session", "router"]

router = APIRouter(responses=ERROR_RESPONSES, tags=["webrtc"])


def camera_of(payload: WebRTCWorkerRequest) -> tuple[str, str] | None:
    """``(field, url)`` of the camera the server should pull (``rtsp_url`` wins over
    ``mjpeg_url``), checked."""
    for field, url, schemes in (
        ("rtsp_url", payload.rtsp_url, RTSP_SCHEMES),
        ("mjpeg_url", payload.mjpeg_url, MJPEG_SCHEMES),
    ):
        if url:
            if not has_scheme_and_host(url, schemes):
                raise InvalidRequest(
                    f"{field} must be a {' or '.join(s + '://' for s in schemes)} URL "
                    f"with a host: {mask_url(url)}"
                )
            return field, url
    return None


@router.post(
    SIGNALING_PATH,
    response_model=InitializeWebRTCResponse,
    openapi_extra=json_body(WebRTCWorkerRequest),
)
async def initialise_webrtc_worker(
    request: Request, state: ServerState = Depends(get_state)
) -> JSONResponse:
    """Starts a WebRTC session (inference-sdk's `webrtc.stream`): an SDP offer in, the answer
    out; video and results then flow over the peer connection."""
    settings = state.settings
    body = await guarded_body(request, state, settings.max_request_bytes)
    try:
        payload = WebRTCWorkerRequest.model_validate_json(body)
    except ValidationError as exc:
        return validation_response(exc.errors(include_url=False, include_context=False))
    await state.check_accepting()
    camera = camera_of(payload)
    principal = principal_of(request)
    if not payload.pipeline_id or camera is not None:  # a viewer may only watch a pipeline
        principal.require(Role.OPERATOR, "a WebRTC session that runs a workflow")
    camera_url = camera[1] if camera is not None else None
    if camera is not None:
        await state.egress.check_url(camera[1], camera[0])
    if settings.allow_client_ice_servers:
        for server in payload.ice_servers():
            for url in server.urls:
                await state.egress.check_ice_server(url)
    watched = await state.pipelines.watched(payload.pipeline_id) if payload.pipeline_id else None
    config = payload.workflow_configuration
    specification = None
    if watched is None:
        assert config is not None  # the request model requires one when no pipeline is named
        specification = state.workflows.specification(config)

    _, answer = await open_session(
        state,
        payload,
        client_address(request),
        request.headers.get("user-agent", ""),
        watched=watched,
        specification=specification,
        camera_url=camera_url,
        principal=principal,
    )
    response = InitializeWebRTCResponse(
        sdp=answer.sdp, type=answer.type, connect_timeout_s=state.settings.connect_timeout_s
    )
    return JSONResponse(response.model_dump())


async def open_session(
    state: ServerState,
    payload: WebRTCWorkerRequest,
    address: str,
    user_agent: str,
    *,
    watched: WatchedPipeline | None = None,
    specification: dict[str, Any] | None = None,
    camera_url: str | None = None,
    principal: Principal = OPEN,
) -> tuple[PeerWorker, RTCSessionDescription]:
    """A session, its slot reserved for ``address``, started on ``payload``'s offer: it shows
    ``watched``'s results, or runs ``specification`` on the client's video or on
    ``camera_url``. Returns it and its answer; on failure nothing of it is left."""
    settings = state.settings
    state.sessions.reserve(address)
    worker: PeerWorker | None = None
    workflow: CompiledWorkflow | None = None
    session_id = uuid.uuid4().hex  # its events' pipeline before the worker exists
    config = payload.workflow_configuration
    try:
        if watched is not None:
            outputs: WorkflowOutputs = watched.outputs  # the pipeline runs its workflow
        else:
            assert config is not None and specification is not None
            stream = {"pipeline": f"session:{session_id}", "source": "webrtc"}
            context = BuildContext(
                state.models,
                stream=stream,
                sink_dir=settings.sink_dir,
                events=state.events,
                settings=settings,
                workflows=state.workflows.stored,
                caller=principal.caller(address),
                role=principal.role,
                language=state.language,
                live=True,
            )
            workflow = outputs = await compile_config(
                config, specification, context, egress=state.egress
            )
        selection = OutputSelection.from_request(
            outputs, payload.stream_output, payload.data_output
        )
        processor = FrameProcessor(
            workflow,
            outputs,
            selection,
            jpeg_quality=settings.jpeg_quality,
            gzip_level=settings.gzip_level,
        )
        worker = PeerWorker(
            SessionConfig.of(settings, state.uploads.path),
            payload,
            processor,
            state.executor,
            state.metrics,
            state.sessions.remove,
            session_id,
        )
        state.sessions.add(worker, address)
        if watched is not None:
            worker.attach_pipeline(watched, payload.pipeline_source_id)
        elif camera_url is not None:
            await worker.attach_camera(state.hub, camera_url, settings.camera_first_frame_s)
        answer = await worker.start(payload.webrtc_offer, user_agent, address)
    except BaseException:
        if worker is None:
            state.sessions.release(address)
            if workflow is not None:
                await asyncio.to_thread(workflow.close)
        else:
            await worker.close()  # releases its slot, closes its workflow
        raise
    return worker, answer
