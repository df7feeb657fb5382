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

import numpy as np
from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, TypeAdapter

from ...errors import InvalidRequest, NotFound, WorkflowRunError
from ...protocol.messages import WorkflowConfiguration
from ...request_images import load_images
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
from ...workflows.spec import IMAGE_INPUT_TYPES, VIDEO_METADATA_INPUT_TYPES
from ..docs import ERROR_RESPONSES, json_body
from ..http import authenticated_body
from ..image_runs import compiled, run_images
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


_NO_IMAGE = np.zeros((1, 1, 3), np.uint8)
"""The frame of a workflow that declares no image input: it runs once, reading none."""


def _image_input(specification: dict[str, Any]) -> str | None:
    declared = specification.get("inputs")
    names = [
        str(i.get("name"))
        for i in (declared if isinstance(declared, list) else [])
        if isinstance(i, dict) and i.get("type") in IMAGE_INPUT_TYPES
    ]
    if not names:
        return None
    # Several: the images run over go to 'image' (else the first declared); each other one
    # is a still image for every run (a template to find).
    return "image" if "image" in names else names[0]


async def _run(
    state: ServerState, body: WorkflowRunRequest, specification: dict[str, Any]
) -> dict[str, Any]:
    image_input = _image_input(specification)
    if image_input is None:
        images = [_NO_IMAGE]
    elif image_input not in body.inputs:
        raise InvalidRequest(f"inputs: the workflow's image input '{image_input}' is missing")
    else:
        images = await load_images(
            body.inputs[image_input], f"inputs.{image_input}", image_limits(state), state.egress
        )
    parameters = {k: v for k, v in body.inputs.items() if k != image_input}
    config = WorkflowConfiguration(
        image_input_name=image_input or "image",
        workflows_parameters=parameters,
        disable_sinks=body.disable_sinks,
    )
    excluded = set(body.excluded_fields or ())
    quality = state.settings.jpeg_quality
    async with compiled(state, config, specification) as workflow:
        runs = await run_images(state, workflow, images)
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
    for declared in specification.get("inputs") or []:
        if not isinstance(declared, dict) or not isinstance(declared.get("name"), str):
            continue
        kind = declared.get("type")
        if kind in IMAGE_INPUT_TYPES:
            kinds[declared["name"]] = [IMAGE]
        elif kind in VIDEO_METADATA_INPUT_TYPES:
            kinds[declared["name"]] = [VIDEO_METADATA]
        else:  # a parameter: the kinds it declares, else anything
            named = declared.get("kind")
            kinds[declared["name"]] = [str(k) for k in named] if isinstance(named, list) else [ANY]
    return kinds


@router.post("/workflows/validate")
async def validate(
    raw: bytes = authenticated_body(lambda settings: settings.max_request_bytes, key_in_body=False),
    state: ServerState = Depends(get_state),
) -> dict:
    """Compiles a workflow without running it: 200, or 400 naming the first mistake."""
    specification = _SPECIFICATION.validate_json(raw)  # a ValidationError is the app's 422
    async with compiled(state, WorkflowConfiguration(), specification):
        pass  # compiled (its models found and loaded), then closed
    return {"status": "ok"}


@router.post("/workflows/describe_interface", openapi_extra=json_body(DescribeInterfaceRequest))
async def describe_interface(
    raw: bytes = _SMALL_BODY, state: ServerState = Depends(get_state)
) -> dict:
    """A workflow's inputs and outputs, with their kinds."""
    specification = DescribeInterfaceRequest.model_validate_json(raw).specification
    async with compiled(state, WorkflowConfiguration(), specification) as workflow:
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
