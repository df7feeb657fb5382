"""``/workflows``: what a request (or the browser page) may name instead of a specification."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from ..errors import NotFound
from ..workflows.blocks import BLOCKS
from ..workflows.blocks.base import REQUIRED
from ..workflows.library import WorkflowNotFound
from .docs import ERROR_RESPONSES
from .state import ServerState, get_state

__all__ = ["router"]

router = APIRouter(prefix="/workflows", responses=ERROR_RESPONSES)


@router.get("")
async def list_workflows(request: Request, state: ServerState = Depends(get_state)) -> dict:
    state.auth.check(request)
    workflows, unreadable = state.workflows.list()
    return {
        "workflows": [w.summary() for w in workflows],
        "default": "local/object-detection",
        "unreadable": unreadable,
    }


@router.get("/blocks")
async def list_blocks(request: Request, state: ServerState = Depends(get_state)) -> dict:
    state.auth.check(request)
    return {
        "blocks": [
            {
                "type": type_id,
                "fields": {
                    name: {"kinds": list(spec.kinds), "required": spec.default is REQUIRED}
                    for name, spec in cls.fields.items()
                },
                "outputs": cls.outputs,
            }
            for type_id, cls in sorted(BLOCKS.items())
        ]
    }


@router.get("/{workspace_name}/{workflow_id}")
async def get_workflow(
    workspace_name: str, workflow_id: str, request: Request, state: ServerState = Depends(get_state)
) -> dict:
    state.auth.check(request)
    try:
        workflow = state.workflows.get(workspace_name, workflow_id)
    except WorkflowNotFound as exc:
        raise NotFound(exc.message) from None
    return {**workflow.summary(), "specification": workflow.specification}
