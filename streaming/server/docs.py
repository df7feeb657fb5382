"""``/docs`` and ``/openapi.json``, served without the internet.

FastAPI's own docs page loads Swagger UI from a CDN, which leaves it blank on a machine with
no internet. Here its script, stylesheet and icon come from the ``fastapi-offline``
distribution, served under ``/docs/assets``. The document and the page need the API key
when one is set; the assets are static files like the page's.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.staticfiles import StaticFiles

from .auth import require_api_key

__all__ = ["add_docs"]

_ASSETS = "/docs/assets"


def _assets_dir() -> Path:
    return Path(str(files("fastapi_offline") / "static"))


def add_docs(app: FastAPI) -> None:
    """Call on an app made with ``docs_url=None, redoc_url=None, openapi_url=None``."""
    router = APIRouter(dependencies=[Depends(require_api_key)], include_in_schema=False)

    @router.get("/openapi.json")
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

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
