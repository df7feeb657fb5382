"""The app's error handlers: every error, ours or the framework's, in one JSON shape."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from ..errors import StreamingError, error_body
from .http import validation_response

__all__ = ["install_error_handlers"]

log = logging.getLogger("visionstream")

# Stable codes for the statuses Starlette answers by itself.
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 400: "invalid_request"}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StreamingError)
    async def _streaming_error(_: Request, exc: StreamingError) -> JSONResponse:
        return JSONResponse(status_code=exc.status, content=exc.body(), headers=exc.headers)

    @app.exception_handler(ValidationError)
    async def _body_error(_: Request, exc: ValidationError) -> JSONResponse:
        return validation_response(exc.errors(include_url=False, include_context=False))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_response(exc.errors())

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Starlette's own answers (no such route, wrong method) in our one shape.
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        body = error_body(str(exc.detail), code, "HTTPException")
        return JSONResponse(status_code=exc.status_code, content=body, headers=exc.headers)

    @app.exception_handler(ClientDisconnect)
    async def _client_gone(_: Request, exc: ClientDisconnect) -> JSONResponse:
        # Nobody reads this answer: the client left (or its body stalled: BodyTimeout).
        body = error_body("the client disconnected", "client_disconnected", "ClientDisconnect")
        return JSONResponse(status_code=400, content=body)

    @app.exception_handler(RecursionError)
    async def _nested_too_deeply(request: Request, _: RecursionError) -> JSONResponse:
        # A body nested past what a parser will walk (json.loads recurses): the caller's
        # doing, told in one line rather than a page of traceback.
        log.warning(
            "refused %s %s: its JSON is nested too deeply", request.method, request.url.path
        )
        body = error_body(
            "the request's JSON is nested too deeply", "invalid_body", "RecursionError"
        )
        return JSONResponse(status_code=400, content=body)

    @app.exception_handler(Exception)
    async def _internal_error(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        body = error_body("Internal error.", "internal_error", "InternalError")
        return JSONResponse(status_code=500, content=body)
