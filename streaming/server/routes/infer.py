"""inference-sdk's model inference: ``POST /infer/{object_detection | instance_segmentation
| keypoints_detection | classification}`` (its v1 client mode).

Each request runs the model's own block (the one a workflow names) through the one run path,
with the request's thresholds as the block's fields: an image gives the same detections here
as through a workflow or a WebRTC session. Answers in the reference's shape: ``image`` size,
``predictions`` (``x``, ``y``, ``width``, ``height`` centre-based, ``class``, ``class_id``,
``confidence``, ``detection_id``; ``points`` for masks, ``keypoints``; a classifier's
``top`` and ranked ``predictions``), ``time`` in seconds, and ``visualization`` (a base64
JPEG of the boxes and labels) when asked. One image answers an object; a list, a list.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import AsyncGenerator
from typing import Any

import cv2
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from ...errors import InvalidRequest, NotFound, NotReady
from ...inference.aliases import suggested_name
from ...inference.registry import UnknownModel
from ...protocol.messages import WorkflowConfiguration
from ...request_images import ImageLimits, load_images
from ...workflows.blocks.base import WorkflowImage
from ...workflows.serialization import serialize_detections
from ..docs import ERROR_RESPONSES, json_body
from ..http import guarded_body
from ..image_runs import compiled, run_images
from ..state import ServerState, get_state
from .models import unknown_model

__all__ = ["InferenceRequest", "image_limits", "legacy_router", "router"]

router = APIRouter(responses=ERROR_RESPONSES, tags=["inference"])
legacy_router = APIRouter(responses=ERROR_RESPONSES, tags=["inference"])
"""The v0 route, ``/{dataset}/{version}``: the app includes it after every other route."""

_BLOCKS: dict[str, str] = {
    "object-detection": "roboflow_core/roboflow_object_detection_model@v2",
    "instance-segmentation": "roboflow_core/roboflow_instance_segmentation_model@v2",
    "keypoint-detection": "roboflow_core/roboflow_keypoint_detection_model@v2",
    "classification": "roboflow_core/roboflow_classification_model@v2",
    "multi-label-classification": "roboflow_core/roboflow_multi_label_classification_model@v2",
}
"""The block that runs a model of each task (our manifests' task names)."""

_ROUTE_TASKS: dict[str, tuple[str, ...]] = {
    "object_detection": ("object-detection", "instance-segmentation", "keypoint-detection"),
    "instance_segmentation": ("instance-segmentation",),
    "keypoints_detection": ("keypoint-detection",),
    "classification": ("classification", "multi-label-classification"),
}
"""Which models each route runs (a segmentation model's boxes are boxes too)."""

_DETECTION_FIELDS = (
    "confidence",
    "iou_threshold",
    "class_filter",
    "max_detections",
    "class_agnostic_nms",
    "max_candidates",
)
_VISUALISED = "visualization"


class InferenceRequest(BaseModel):
    """What inference-sdk's ``infer`` sends (``InferenceConfiguration`` to the fields); the
    reference's other options (preprocessing switches, active learning, usage tags) are
    accepted and have no effect here."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())
    model_id: str = Field(min_length=1)
    image: Any
    """``{"type": "base64" | "url" | "numpy", "value": ...}``, or a list of them."""
    api_key: str | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    iou_threshold: float | None = Field(default=None, ge=0, le=1)
    class_filter: list[str] | None = None
    max_detections: int | None = Field(default=None, ge=1)
    class_agnostic_nms: bool | None = None
    max_candidates: int | None = Field(default=None, ge=1)
    keypoint_confidence: float | None = Field(default=None, ge=0, le=1)
    visualize_predictions: bool = False
    visualization_labels: bool = True
    visualization_stroke_width: int = Field(default=2, ge=1, le=50)


def image_limits(state: ServerState) -> ImageLimits:
    return ImageLimits.of(state.settings)


def _specification(task: str, body: InferenceRequest) -> dict[str, Any]:
    step: dict[str, Any] = {
        "type": _BLOCKS[task],
        "name": "model",
        "images": "$inputs.image",
        "model_id": body.model_id,
    }
    fields = _DETECTION_FIELDS if task in _ROUTE_TASKS["object_detection"] else ("confidence",)
    for name in fields:
        if (value := getattr(body, name)) is not None:
            step[name] = value
    if task == "keypoint-detection" and body.keypoint_confidence is not None:
        step["keypoint_confidence"] = body.keypoint_confidence
    steps = [step]
    outputs = [{"type": "JsonField", "name": "predictions", "selector": "$steps.model.predictions"}]
    if body.visualize_predictions and task in _ROUTE_TASKS["object_detection"]:
        steps.append(
            {
                "type": "roboflow_core/bounding_box_visualization@v1",
                "name": "boxes",
                "image": "$inputs.image",
                "predictions": "$steps.model.predictions",
                "thickness": body.visualization_stroke_width,
            }
        )
        drawn = "$steps.boxes.image"
        if body.visualization_labels:
            steps.append(
                {
                    "type": "roboflow_core/label_visualization@v1",
                    "name": "labels",
                    "image": drawn,
                    "predictions": "$steps.model.predictions",
                }
            )
            drawn = "$steps.labels.image"
        outputs.append({"type": "JsonField", "name": _VISUALISED, "selector": drawn})
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": steps,
        "outputs": outputs,
    }


def _answer(task: str, outputs: dict[str, Any], seconds: float, quality: int) -> dict[str, Any]:
    predictions = outputs["predictions"]
    if task in _ROUTE_TASKS["classification"]:
        answer = dict(predictions)
    else:
        answer = {"inference_id": str(uuid.uuid4()), **serialize_detections(predictions)}
    answer["time"] = seconds
    drawn = outputs.get(_VISUALISED)
    if isinstance(drawn, WorkflowImage):
        ok, encoded = cv2.imencode(".jpg", drawn.numpy, [cv2.IMWRITE_JPEG_QUALITY, quality])
        if ok:
            answer[_VISUALISED] = base64.b64encode(encoded.tobytes()).decode("ascii")
    return answer


async def _infer(
    state: ServerState, body: InferenceRequest, tasks: tuple[str, ...]
) -> tuple[list[dict[str, Any]], list[WorkflowImage | None]]:
    """Each of ``body.image``'s answers, and its drawing when asked; the model must do one
    of ``tasks`` (empty: whatever it does). The model is found before images are read."""
    try:
        # Held for the request: /model/remove cannot close it between here and the run.
        model = await asyncio.to_thread(state.models.acquire, body.model_id)
    except UnknownModel:
        if state.startup_error and suggested_name(body.model_id) == state.settings.default_model:
            # Not a model to add: the one the server fetches itself, which it could not.
            raise NotReady(state.startup_error) from None
        raise unknown_model(body.model_id, state.models.available()) from None
    try:
        if tasks and model.task not in tasks:
            route = next((r for r, done in _ROUTE_TASKS.items() if model.task in done), None)
            raise InvalidRequest(
                f"model '{body.model_id}' does {model.task}; "
                + (f"call /infer/{route} for it" if route else "run it in a workflow step")
            )
        images = await load_images(body.image, "image", image_limits(state), state.egress)
        config = WorkflowConfiguration()
        async with compiled(state, config, _specification(model.task, body)) as workflow:
            started = time.perf_counter()
            runs = await run_images(state, workflow, images)
            seconds = (time.perf_counter() - started) / len(images)
    finally:
        state.models.release(model.name)
    quality = state.settings.jpeg_quality
    answers = [_answer(model.task, run.outputs, seconds, quality) for run, _ in runs]
    return answers, [run.outputs.get(_VISUALISED) for run, _ in runs]


@router.post("/infer/{task}", openapi_extra=json_body(InferenceRequest))
async def infer(task: str, request: Request, state: ServerState = Depends(get_state)) -> Any:
    """Runs one model on one or more images (inference-sdk's `infer`): detections, classes or
    text."""
    raw = await guarded_body(request, state, state.settings.max_infer_request_bytes)
    if task not in _ROUTE_TASKS:
        raise NotFound(f"no /infer/{task} here; there are /infer/{', /infer/'.join(_ROUTE_TASKS)}")
    body = InferenceRequest.model_validate_json(raw)  # a ValidationError is the app's 422
    answers, _ = await _infer(state, body, _ROUTE_TASKS[task])
    return answers if isinstance(body.image, list) else answers[0]


def _fraction(value: float | None) -> float | None:
    """The v0 API's thresholds: a fraction, or a percentage (40 is 0.4)."""
    return value / 100 if value is not None and value >= 1 else value


@legacy_router.post("/{dataset_id}/{version_id}")
async def infer_v0(
    dataset_id: str,
    version_id: str,
    request: Request,
    state: ServerState = Depends(get_state),
    api_key: str | None = None,
    image: str | None = None,
    image_type: str | None = None,
    confidence: float | None = Query(default=None, ge=0, le=100),
    overlap: float | None = Query(default=None, ge=0, le=100),
    max_detections: int | None = Query(default=None, ge=1),
    class_filter: str | None = None,
    format: str = "json",
    labels: bool = True,
    stroke: int = Query(default=2, ge=1, le=50),
) -> Any:
    """The reference's v0 form (inference-sdk's ``HTTPClientMode.V0``): the model id in the
    path (``coco/3``), the image as the body's base64, a multipart ``file``, or an
    ``image`` URL in the query; answers JSON, or with ``format=image`` the drawn JPEG."""
    raw = await guarded_body(
        request, state, state.settings.max_infer_request_bytes, key_in_body=False
    )
    if format not in ("json", "image"):
        raise InvalidRequest(f"format: 'json' or 'image', not {format!r}")
    given = await _v0_image(request, raw, image, image_type)
    body = InferenceRequest(
        model_id=f"{dataset_id}/{version_id}",
        image=given,
        confidence=_fraction(confidence),
        iou_threshold=_fraction(overlap),
        max_detections=max_detections,
        class_filter=[c for c in class_filter.split(",") if c] if class_filter else None,
        visualize_predictions=format == "image",
        visualization_labels=labels,
        visualization_stroke_width=stroke,
    )
    answers, drawings = await _infer(state, body, ())
    drawn = drawings[0]
    if format == "image" and isinstance(drawn, WorkflowImage):
        quality = [cv2.IMWRITE_JPEG_QUALITY, state.settings.jpeg_quality]
        return Response(
            cv2.imencode(".jpg", drawn.numpy, quality)[1].tobytes(), media_type="image/jpeg"
        )
    answers[0].pop(_VISUALISED, None)
    return answers[0]


async def _v0_image(
    request: Request, raw: bytes, url: str | None, image_type: str | None
) -> dict[str, Any]:
    if url is not None:
        return {"type": image_type or "url", "value": url}
    if request.headers.get("content-type", "").startswith("multipart/form-data"):

        async def chunks() -> AsyncGenerator[bytes, None]:
            yield raw

        try:
            form = await MultiPartParser(request.headers, chunks()).parse()
        except MultiPartException as exc:
            raise InvalidRequest(f"multipart body: {exc.message}") from None
        file = form.get("file")
        if not isinstance(file, UploadFile):
            raise InvalidRequest("multipart body: the image goes in a file field named 'file'")
        data = await file.read()
        await file.close()
        return {"type": "base64", "value": base64.b64encode(data).decode("ascii")}
    if not raw:
        raise InvalidRequest(
            "no image: send its base64 as the body, a multipart 'file', or ?image=URL"
        )
    return {"type": image_type or "base64", "value": raw.decode("ascii", errors="replace")}
