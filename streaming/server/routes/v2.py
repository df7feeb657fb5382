"""KServe V2 / Open Inference Protocol for the loaded models (``/v2/...``).

Other visionstream workers (``VISIONSTREAM_INFERENCE_BACKEND=remote``), Triton's and KServe's
clients can run this server's models: raw tensors in, raw tensors out, through the same shared
session and dynamic batcher the WebRTC sessions use. Errors are ``{"error": ...}`` as the
protocol has them (plus our ``message``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from ... import __version__
from ...errors import ModelError, StreamingError, error_body
from ...inference.model import DetectionModel
from ...inference.registry import UnknownModel
from ...protocol.v2 import HEADER_LENGTH, V2Error, encode_response, parse_request
from ..docs import ERROR_RESPONSES, json_body
from ..http import AUTHENTICATED, authorize, read_limited_body
from ..state import ServerState, get_state

__all__ = ["V2Failure", "failure_response", "router"]

router = APIRouter(prefix="/v2", responses=ERROR_RESPONSES, tags=["KServe V2"])


class V2Tensor(BaseModel):
    """One input tensor (JSON data, or ``parameters.binary_data_size`` bytes after the JSON)."""

    name: str
    shape: list[int]
    datatype: str
    data: list[Any] | None = None
    parameters: dict[str, Any] | None = None


class V2InferRequest(BaseModel):
    """The protocol's inference request, as documented (``protocol/v2.py`` parses it)."""

    id: str | None = None
    inputs: list[V2Tensor]
    outputs: list[dict[str, Any]] | None = None
    parameters: dict[str, Any] | None = None


def _error(status: int, message: str) -> JSONResponse:
    # The V2 protocol's ``error``, beside our own shape.
    body = {"error": message, **error_body(message, "v2_error", "V2Error")}
    return JSONResponse(body, status_code=status)


class V2Failure(Exception):
    """Ends a V2 request with ``{"error": ...}`` (the app installs ``failure_response``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def failure_response(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, V2Failure)
    return _error(exc.status, exc.message)


@router.get("", dependencies=[AUTHENTICATED])
async def server_metadata() -> dict:
    """KServe V2 server metadata."""
    return {"name": "visionstream", "version": __version__, "extensions": ["binary_tensor_data"]}


@router.get("/health/live")
async def live() -> dict:
    """KServe V2 liveness."""
    return {"live": True}


@router.get("/health/ready")
async def ready(state: ServerState = Depends(get_state)) -> JSONResponse:
    """KServe V2 readiness: the default model is loaded."""
    is_ready = state.ready.is_set()
    return JSONResponse({"ready": is_ready}, status_code=200 if is_ready else 503)


async def _model(
    state: ServerState, request: Request, name: str, model_version: str | None
) -> DetectionModel:
    """The named model, loaded if need be (``V2Failure`` otherwise)."""
    try:
        authorize(request, state)
        model = await asyncio.to_thread(state.models.get, name)
    except UnknownModel:
        raise V2Failure(404, f"model '{name}' is not in this server's models directory") from None
    except StreamingError as exc:
        raise V2Failure(exc.status, exc.message) from None
    if model_version and model_version != model.manifest.version:
        raise V2Failure(404, f"model '{name}' has version '{model.manifest.version}' only")
    return model


def _metadata(model: DetectionModel) -> dict:
    session = model.session
    return {
        "name": model.name,
        "versions": [model.manifest.version],
        "platform": {"onnxruntime": "onnxruntime_onnx", "openvino": "openvino"}.get(
            session.backend, session.backend
        ),
        "inputs": [t.to_v2() for t in session.inputs],
        "outputs": [t.to_v2() for t in session.outputs],
    }


@router.get("/models/{name}")
@router.get("/models/{name}/versions/{model_version}")
async def model_metadata(
    name: str,
    request: Request,
    model_version: str | None = None,
    state: ServerState = Depends(get_state),
) -> JSONResponse:
    """KServe V2 model metadata: inputs and outputs with their shapes."""
    return JSONResponse(_metadata(await _model(state, request, name, model_version)))


@router.get("/models/{name}/ready")
@router.get("/models/{name}/versions/{model_version}/ready")
async def model_ready(
    name: str,
    request: Request,
    model_version: str | None = None,
    state: ServerState = Depends(get_state),
) -> JSONResponse:
    """KServe V2 model readiness (loads the model if need be)."""
    await _model(state, request, name, model_version)
    return JSONResponse({"name": name, "ready": True})


@router.post("/models/{name}/infer", openapi_extra=json_body(V2InferRequest))
@router.post(
    "/models/{name}/versions/{model_version}/infer", openapi_extra=json_body(V2InferRequest)
)
async def infer(
    name: str,
    request: Request,
    model_version: str | None = None,
    state: ServerState = Depends(get_state),
) -> Response:
    """KServe V2 inference on a model's raw tensors."""
    model = await _model(state, request, name, model_version)
    try:
        body = await read_limited_body(request, state.settings.max_infer_request_bytes)
        parsed = parse_request(body, request.headers.get(HEADER_LENGTH))
    except V2Error as exc:
        return _error(400, str(exc))
    except StreamingError as exc:
        return _error(exc.status, exc.message)
    spec = model.session.inputs[0]
    batch = parsed.inputs.get(spec.name)
    if batch is None or len(parsed.inputs) != 1:
        return _error(400, f"model '{name}' takes one input, '{spec.name}'")
    expected = spec.shape[1:]
    if batch.ndim != len(spec.shape) or any(
        e not in (-1, g) for e, g in zip(expected, batch.shape[1:], strict=True)
    ):
        return _error(
            400, f"input '{spec.name}' must be shaped {list(spec.shape)}, got {list(batch.shape)}"
        )
    names = [o.name for o in model.session.outputs]
    wanted = parsed.outputs if parsed.outputs is not None else names
    unknown = [o for o in wanted if o not in names]
    if unknown:
        return _error(400, f"model '{name}' has no output {unknown[0]!r} (it has {names})")
    try:
        loop = asyncio.get_running_loop()
        values, _ = await loop.run_in_executor(
            state.executor, model.batcher.infer, np.ascontiguousarray(batch, np.float32)
        )
    except ModelError as exc:
        return _error(exc.status, exc.message)
    outputs = {n: v for n, v in zip(names, values, strict=True) if n in wanted}
    content, headers = encode_response(name, model.manifest.version, parsed, outputs)
    return Response(content, headers=headers)
