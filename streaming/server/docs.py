"""``/docs`` and ``/openapi.json``, served without the internet, and the document itself.

FastAPI's own docs page loads Swagger UI from a CDN, which leaves it blank on a machine with
no internet. Here its script, stylesheet and icon come from the ``fastapi-offline``
distribution, served under ``/docs/assets``. The document and the page need the API key
when one is set; the assets are static files like the page's.

The document says exactly what the routes take and answer (schemathesis checks it in
``tests/e2e/test_openapi_fuzz.py``): routes that read their own body (to bound its size and
check the key before validating) declare it with ``json_body``; every error status is
documented with one ``ErrorBody`` schema; V2 model names are an enum of this server's models.
"""

from __future__ import annotations

import warnings
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel
from starlette.staticfiles import StaticFiles

from .. import __version__
from ..access import PUBLIC, blocks_markdown, route_role
from .http import AUTHENTICATED

__all__ = ["ERROR_RESPONSES", "ErrorBody", "add_docs", "json_body", "openapi_document"]

_ASSETS = "/docs/assets"
_COMPONENTS = "#/components/schemas/{model}"


class ErrorBody(BaseModel):
    """Every error answer: ``message`` (for people), ``code`` (stable, for programs) and
    ``error_type``; 422s add ``detail``, V2 routes ``error`` (the protocol's)."""

    message: str
    code: str | None = None
    error_type: str | None = None
    error: str | None = None
    detail: Any = None


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in {
        400: "the request asks for something that cannot be done (the message says what)",
        401: "the API key is missing, wrong or expired",
        403: "the caller's role does not allow it (the message names the role), or a local "
        "file or device on the server was named",
        404: "no such pipeline, workflow, model or pipeline source",
        408: "the request body stalled",
        409: "the request contradicts what runs (removing a pipeline's only source)",
        413: "the request body is over its limit",
        415: "the body is not of the type the route takes (WHIP and WHEP: application/sdp)",
        422: "the request body is not what the route takes",
        429: "too many sessions or pipelines, or too many wrong API keys (Retry-After)",
        501: "this deployment cannot serve the route (WHIP ingest under Ray)",
        502: "a camera cannot be opened, or a relay-only peer got no TURN relay",
        503: "not ready yet, or shutting down",
        504: "an upstream step timed out",
    }.items()
}

_BODIES: dict[str, type[BaseModel]] = {}


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` for a route that reads and validates its JSON body itself."""
    _BODIES[model.__name__] = model
    reference = {"$ref": _COMPONENTS.format(model=model.__name__)}
    return {"requestBody": {"content": {"application/json": {"schema": reference}}}}


def _say_role(operation: dict[str, Any], method: str, path: str) -> None:
    """The role the operation needs (``access.ROUTES``), on top of its description and as
    ``x-visionstream-role``."""
    if (method, path) in PUBLIC:
        role = "none (no key)"
    else:
        role = str(route_role(method, path))
        if (method, path) == ("POST", "/initialise_webrtc_worker"):
            role = "viewer to watch a pipeline, else operator"
    operation["x-visionstream-role"] = role
    operation["description"] = f"**Role:** {role}.\n\n" + operation.get("description", "")


def openapi_document(app: FastAPI) -> dict[str, Any]:
    with warnings.catch_warnings():
        # FastAPI gives one route's methods one operation id (/workflows/blocks/describe
        # answers GET and POST), and warns; each is made its own just below.
        warnings.filterwarnings("ignore", message="Duplicate Operation ID", category=UserWarning)
        document = get_openapi(
            title=app.title,
            version=__version__,
            routes=app.routes,
            description=app.description,
            tags=app.openapi_tags,
        )
    for path, operations in document["paths"].items():
        ids = [operation.get("operationId") for operation in operations.values()]
        for method, operation in operations.items():
            if ids.count(operation.get("operationId")) > 1:
                operation["operationId"] = f"{operation['operationId']}_{method}"
            _say_role(operation, method.upper(), path)
    document["info"]["description"] = f"{document['info'].get('description', '')}\n\n" + (
        blocks_markdown()
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name, model in _BODIES.items():
        schema = model.model_json_schema(ref_template=_COMPONENTS)
        schemas.update(schema.pop("$defs", {}))
        schemas[name] = schema
    state = getattr(app.state, "server", None)
    names = sorted(state.models.available()) if state is not None else []
    for path, operations in document["paths"].items():
        if not path.startswith("/v2/models/{name}") or not names:
            continue
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["name"] == "name" and parameter["in"] == "path":
                    parameter["schema"] = {"type": "string", "enum": names}
    return document


def _assets_dir() -> Path:
    return Path(str(files("fastapi_offline") / "static"))


def add_docs(app: FastAPI) -> None:
    """Call on an app made with ``docs_url=None, redoc_url=None, openapi_url=None``."""
    router = APIRouter(dependencies=[AUTHENTICATED], include_in_schema=False)

    @router.get("/openapi.json")
    async def openapi() -> JSONResponse:
        return JSONResponse(openapi_document(app))

    @router.get("/docs")
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} - API",
            swagger_js_url=f"{_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{_ASSETS}/favicon.png",
        )

    app.include_router(router)
    app.mount(_ASSETS, StaticFiles(directory=_assets_dir()), name="docs-assets")
