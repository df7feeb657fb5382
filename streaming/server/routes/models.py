"""The models routes: ``GET /models`` (the models directory, and where each loaded model
runs), and inference-sdk's model registry calls (``/model/registry``, ``/model/add``,
``/model/remove``, ``/model/clear``) over the same registry.

The registry's models are what ``visionstream models add`` and ``pull`` put in the models
directory: ``/model/add`` loads one of them and never fetches anything. ``/model/remove``
refuses (409) a model a running session, pipeline or request holds; ``/model/clear``
unloads every model nothing holds and lists the ones still held."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict

from ...errors import NotFound
from ...inference.aliases import REFERENCE_ALIASES, suggested_name
from ...inference.model import DetectionModel
from ...inference.registry import UnknownModel
from ...suggest import did_you_mean, shown
from ..docs import ERROR_RESPONSES, json_body
from ..http import AUTHENTICATED, authenticated_body
from ..state import ServerState, get_state

__all__ = ["describe_model", "router", "unknown_model"]

router = APIRouter(responses=ERROR_RESPONSES, tags=["models"])
_BODY = authenticated_body(lambda settings: settings.max_request_bytes)


class ModelRequest(BaseModel):
    """inference-sdk's ``load_model`` and ``unload_model`` body."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())
    model_id: str
    api_key: str | None = None


def unknown_model(model_id: str, available: list[str]) -> NotFound:
    """404 for a model the server does not have: the nearest it has first, then what it
    has, then how to add one."""
    name = suggested_name(model_id)
    known_as = f" ({name})" if name != model_id else ""
    close = did_you_mean(name, available)  # the reference's ids by the name they stand for
    return NotFound(
        f"model '{shown(model_id)}'{known_as} is not on this server"
        + (f"; {close}" if close else "")
        + f" (its models: {', '.join(available[:10]) or 'none'}). To serve it, add an ONNX "
        f"export: visionstream models add FILE --name {name} --decoder ... --names ..."
    )


def describe_model(model: DetectionModel, model_id: str | None = None) -> dict:
    """A loaded model as inference-sdk's ``ModelDescription`` reads it."""
    manifest = model.manifest
    return {
        "model_id": model_id or model.name,
        "task_type": model.task,
        "batch_size": model.batcher.max_batch_size,
        "input_height": manifest.input_height,
        "input_width": manifest.input_width,
    }


def _registry(state: ServerState) -> dict:
    """Each loaded model, and again under the platform id the reference's name for it has:
    inference-sdk asks for ``coco/3`` when its caller names ``yolov8n-640``."""
    models = state.models.loaded()
    entries = []
    for name in sorted(models):
        entries.append(describe_model(models[name]))
        if (platform_id := REFERENCE_ALIASES.get(name)) is not None:
            entries.append(describe_model(models[name], platform_id))
    return {"models": entries}


@router.get("/models", dependencies=[AUTHENTICATED])
async def list_models(state: ServerState = Depends(get_state)) -> dict:
    """Every model in the models directory: task, input sizes, classes, and where it runs once
    loaded."""
    return {"models": await asyncio.to_thread(state.models.describe)}


@router.get("/model/registry", dependencies=[AUTHENTICATED])
async def loaded_models(state: ServerState = Depends(get_state)) -> dict:
    """The loaded models (inference-sdk's `list_loaded_models`)."""
    return _registry(state)


def _model_request(body: bytes) -> ModelRequest:
    return ModelRequest.model_validate_json(body)  # a ValidationError is the app's 422


@router.post("/model/add", openapi_extra=json_body(ModelRequest))
async def load_model(body: bytes = _BODY, state: ServerState = Depends(get_state)) -> dict:
    """Loads a model by id (inference-sdk's `load_model`); 404 names the nearest ids."""
    model_id = _model_request(body).model_id
    try:
        await asyncio.to_thread(state.models.get, model_id)
    except UnknownModel:
        raise unknown_model(model_id, state.models.available()) from None
    return _registry(state)


@router.post("/model/remove", openapi_extra=json_body(ModelRequest))
async def unload_model(body: bytes = _BODY, state: ServerState = Depends(get_state)) -> dict:
    """Unloads a model nothing is using (409 while a workflow or request holds it)."""
    model_id = _model_request(body).model_id
    if not await asyncio.to_thread(state.models.unload, model_id):
        raise NotFound(f"model '{model_id}' is not loaded")
    return _registry(state)


@router.post("/model/clear", dependencies=[AUTHENTICATED])
async def unload_all_models(state: ServerState = Depends(get_state)) -> dict:
    """Unloads every model nothing is using."""
    await asyncio.to_thread(state.models.unload_idle)
    return _registry(state)
