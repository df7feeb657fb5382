"""``/workflows``: what a request (or the browser page) may name instead of a specification."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from ...errors import NotFound
from ...workflows.blocks import BLOCKS
from ...workflows.blocks.base import Block
from ...workflows.library import WorkflowNotFound
from ...workflows.query import BINARY, OPERATIONS, UNARY
from ..docs import ERROR_RESPONSES
from ..http import AUTHENTICATED
from ..state import ServerState, get_state

__all__ = ["router"]

router = APIRouter(
    prefix="/workflows", responses=ERROR_RESPONSES, dependencies=[AUTHENTICATED], tags=["workflows"]
)


@router.get("")
async def list_workflows(state: ServerState = Depends(get_state)) -> dict:
    """This server's workflows: the built-in ones and those of the workflows directory."""
    workflows, unreadable = state.workflows.list()
    return {
        "workflows": [w.summary() for w in workflows],
        "default": "local/object-detection",
        "unreadable": unreadable,
    }


def _block(type_id: str, cls: type[Block]) -> dict[str, Any]:
    """One block type as its declaration says it: fields (type, kinds, default, range,
    choices, what it takes) and outputs."""
    return {
        "type": type_id,
        "fields": {name: spec.describe() for name, spec in cls.fields.items()},
        "outputs": cls.outputs,
    }


@router.get("/blocks")
async def list_blocks() -> dict:
    """The block types a workflow may use, with their fields."""
    return {"blocks": [_block(type_id, cls) for type_id, cls in sorted(BLOCKS.items())]}


# One route with both methods: two routes of one path would answer OPTIONS and a wrong
# method with an Allow header naming only one of them.
@router.api_route("/blocks/describe", methods=["GET", "POST"])
async def describe_blocks() -> dict:
    """The reference's description of the blocks, from the same declarations: each block
    under ``manifest_type_identifier`` with its fields and ``outputs_manifest``; the kinds
    they use; the query language's operations and operators. (The reference's dynamic
    blocks, in a POST body, are not taken here: its body is ignored.)"""
    blocks = []
    kinds: set[str] = set()
    for type_id, cls in sorted(BLOCKS.items()):
        described = _block(type_id, cls)
        kinds.update(k for spec in cls.fields.values() for k in spec.kinds)
        kinds.update(cls.outputs.values())
        blocks.append(
            {
                "manifest_type_identifier": type_id,
                "fields": described["fields"],
                "outputs_manifest": [{"name": n, "kind": [k]} for n, k in cls.outputs.items()],
                # As the reference describes batch dimensions: a crop step raises one (+1).
                "output_dimensionality_offset": cls.output_dimension,
                "input_dimensionality_offsets": dict(cls.input_offsets),
                "dimensionality_reference_property": cls.dimension_reference,
            }
        )
    return {
        "blocks": blocks,
        "declared_kinds": [{"name": kind} for kind in sorted(kinds)],
        "universal_query_language_description": {
            "operations_description": [{"operation_type": op} for op in sorted(OPERATIONS)],
            "operators_descriptions": [{"operator_type": op, "operands_number": 2} for op in BINARY]
            + [{"operator_type": op, "operands_number": 1} for op in UNARY],
        },
    }


@router.get("/{workspace_name}/{workflow_id}")
async def get_workflow(
    workspace_name: str, workflow_id: str, state: ServerState = Depends(get_state)
) -> dict:
    """One of this server's workflows, its specification included."""
    try:
        workflow = state.workflows.get(workspace_name, workflow_id)
    except WorkflowNotFound as exc:
        raise NotFound(exc.message) from None
    return {**workflow.summary(), "specification": workflow.specification}
