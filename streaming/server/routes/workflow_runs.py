"""inference-sdk's ``run_workflow`` (and ``infer_from_workflow``): a workflow run on the images
of one request.

- ``POST /workflows/run`` and ``/infer/workflows``: an inline ``specification``;
- ``POST /{workspace}/workflows/{workflow_id}`` and ``/infer/workflows/{workspace}/{id}``:
  a workflow of the server's library, by the names ``GET /workflows`` lists.

``inputs`` holds the image input's image (one, or a list: each runs as the next frame of
one stream, so a tracker follows objects across them) and every parameter. Answers
``{"outputs": [one object per image], "profiler_trace": []}``, each output serialised as
over WebRTC (images as ``{"type": "base64", "value", "video_metadata"}``), less any name in
``excluded_fields``.

Beside them, the reference's checks of a specification without running it:
``POST /workflows/validate`` (the specification is the body; ``{"status": "ok"}`` or the
compiler's 400 naming the step and field) and ``POST /workflows/describe_interface``
(``{"specification": ...}``: each input's and output's kinds).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, TypeAdapter

from ...errors import InvalidRequest, NotFound, WorkflowRunError
from ...protocol.messages import WorkflowConfiguration
from ...workflows.blocks.fields import (
    ANY,
    CLASSIFICATION,
    DETECTIONS,
    IMAGE,
    KEYPOINTS,
    SEGMENTATION,
    VIDEO_METADATA,
)
from ...workflows.library import WorkflowNotFound
from ...workflows.serialization import SerializationError, serialize_value
from ...workflows.spec import VIDEO_METADATA_INPUT_TYPES, parse_spec
from ..docs import ERROR_RESPONSES, json_body
from ..http import authenticated_body
from ..image_runs import compiled, run_images
from ..run_inputs import frames_input, run_inputs
from ..state import ServerState, get_state
from .infer import image_limits

__all__ = ["DescribeInterfaceRequest", "WorkflowRunRequest", "router"]

router = APIRouter(responses=ERROR_RESPONSES, tags=["workflows"])


class WorkflowRunRequest(BaseModel):
    """What inference-sdk's ``run_workflow`` sends; ``use_cache``, ``enable_profiling``
    and the reference's other switches are accepted and have no effect here."""

    model_config = ConfigDict(extra="ignore")
    api_key: str | None = None
    inputs: dict[str, Any] = {}
    excluded_fields: list[str] | None = None
    specification: dict[str, Any] | None = None
    workflow_version_id: str | None = None
    disable_sinks: bool = False


async def _run_request(
    raw: bytes = authenticated_body(lambda settings: settings.max_infer_request_bytes),
) -> WorkflowRunRequest:
    return WorkflowRunRequest.model_validate_json(raw)  # a ValidationError is the app's 422


_RUN_REQUEST = Depends(_run_request)
_SMALL_BODY = authenticated_body(lambda settings: settings.max_request_bytes)


async def _run(
    state: ServerState, body: WorkflowRunRequest, specification: dict[str, Any]
) -> dict[str, Any]:
    declared = parse_spec(specification).inputs
    given = await run_inputs(declared, body.inputs, image_limits(state), state.egress)
    config = WorkflowConfiguration(
        image_input_name=frames_input(declared) or "image",
        workflows_parameters=given.parameters,
        disable_sinks=body.disable_sinks,
    )
    excluded = set(body.excluded_fields or ())
    quality = state.settings.jpeg_quality
    async with compiled(state, config, specification, batched=given.batched) as workflow:
        runs = await run_images(state, workflow, given.images, given.per_image)
    outputs: list[dict[str, Any]] = []
    for run, facts in runs:
        metadata = facts.video_metadata()
        answer: dict[str, Any] = {}
        for name, value in run.outputs.items():
            if name in excluded:
                continue
            try:
                answer[name] = serialize_value(value, quality, metadata)
            except (SerializationError, ValueError, TypeError) as exc:
                raise WorkflowRunError(f"output '{name}' could not be serialised: {exc}") from None
        outputs.append(answer)
    return {"outputs": outputs, "profiler_trace": []}


@router.post("/workflows/run", openapi_extra=json_body(WorkflowRunRequest))
@router.post("/infer/workflows", openapi_extra=json_body(WorkflowRunRequest))
async def run_specification(
    body: WorkflowRunRequest = _RUN_REQUEST, state: ServerState = Depends(get_state)
) -> dict:
    """Runs a workflow given inline on the request's images."""
    if body.specification is None:
        raise InvalidRequest("specification: required (or POST /{workspace}/workflows/{id})")
    return await _run(state, body, body.specification)


@router.post(
    "/{workspace_name}/workflows/{workflow_id}", openapi_extra=json_body(WorkflowRunRequest)
)
@router.post(
    "/infer/workflows/{workspace_name}/{workflow_id}", openapi_extra=json_body(WorkflowRunRequest)
)
async def run_named(
    workspace_name: str,
    workflow_id: str,
    body: WorkflowRunRequest = _RUN_REQUEST,
    state: ServerState = Depends(get_state),
) -> dict:
    """Runs one of this server's workflows, named by workspace and id (the reference's route)."""
    try:
        workflow = state.workflows.get(workspace_name, workflow_id)
    except WorkflowNotFound as exc:
        raise NotFound(exc.message) from None
    return await _run(state, body, workflow.specification)


_SPECIFICATION = TypeAdapter(dict[str, Any])


class DescribeInterfaceRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    api_key: str | None = None
    specification: dict[str, Any]


def _input_kinds(specification: dict[str, Any]) -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = {}
    for declared in parse_spec(specification).inputs:
        if declared.is_image:
            kinds[declared.name] = [IMAGE]
        elif declared.type in VIDEO_METADATA_INPUT_TYPES:
            kinds[declared.name] = [VIDEO_METADATA]
        else:  # a parameter or a batch: the kinds it declares, else anything
            kinds[declared.name] = declared.kind_names() or [ANY]
    return kinds


@router.post("/workflows/validate")
async def validate(
    raw: bytes = authenticated_body(lambda settings: settings.max_request_bytes, key_in_body=False),
    state: ServerState = Depends(get_state),
) -> dict:
    """Compiles a workflow without running it: 200, or 400 naming the first mistake."""
    specification = _SPECIFICATION.validate_json(raw)  # a ValidationError is the app's 422
    async with compiled(state, _checked(specification), specification, validating=True):
        pass  # compiled (the models of its steps that have their values loaded), then closed
    return {"status": "ok"}


def _checked(specification: dict[str, Any]) -> WorkflowConfiguration:
    """How a definition is checked without a run: its frames' input as a run would name it,
    and no values (each input left to the run, as the reference validates)."""
    frames = frames_input(parse_spec(specification).inputs)
    return WorkflowConfiguration(image_input_name=frames or "image")


@router.post("/workflows/describe_interface", openapi_extra=json_body(DescribeInterfaceRequest))
async def describe_interface(
    raw: bytes = _SMALL_BODY, state: ServerState = Depends(get_state)
) -> dict:
    """A workflow's inputs and outputs, with their kinds."""
    specification = DescribeInterfaceRequest.model_validate_json(raw).specification
    async with compiled(state, _checked(specification), specification, validating=True) as workflow:
        outputs = {name: [kind] for name, kind in workflow.output_kinds.items()}
    inputs = _input_kinds(specification)
    used = sorted({k for kinds in [*inputs.values(), *outputs.values()] for k in kinds})
    return {
        "inputs": inputs,
        "outputs": outputs,
        "typing_hints": {kind: _TYPING_HINTS.get(kind, "Any") for kind in used},
        "kinds_schemas": {},
    }


_TYPING_HINTS = {
    IMAGE: "dict",
    VIDEO_METADATA: "dict",
    DETECTIONS: "dict",
    SEGMENTATION: "dict",
    KEYPOINTS: "dict",
    CLASSIFICATION: "dict",
}
"""What each kind is once serialised, as the reference hints it (a JSON object)."""
