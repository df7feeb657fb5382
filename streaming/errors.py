"""Error hierarchy: each error has one HTTP status and one stable ``code``; every error answer
of the server, whatever raised it, has the one shape ``error_body`` builds."""

from __future__ import annotations

from typing import Any, ClassVar

from .protocol.notices import Notice

__all__ = [
    "Conflict",
    "InvalidOffer",
    "InvalidRequest",
    "ModelError",
    "NotFound",
    "NotReady",
    "NotSupportedHere",
    "Notice",
    "RelayUnavailable",
    "RequestTooLarge",
    "ShuttingDown",
    "SourceUnavailable",
    "StoreUnavailable",
    "StreamingError",
    "TooManyAttempts",
    "TooManyPlayers",
    "TooManySessions",
    "Unauthorized",
    "UnsupportedMediaType",
    "UpstreamTimeout",
    "WorkflowCompilationError",
    "WorkflowRunError",
    "error_body",
]


def error_body(message: str, code: str, error_type: str, detail: Any = None) -> dict[str, Any]:
    """``{"message", "code", "error_type"}`` (+ ``detail`` for validation errors): ``code`` is
    stable for programs to branch on, ``message`` is for people and may change."""
    body: dict[str, Any] = {"message": message, "code": code, "error_type": error_type}
    if detail is not None:
        body["detail"] = detail
    return body


class StreamingError(Exception):
    """Base class; ``status`` is the HTTP status the server answers with, ``code`` the
    stable name of the error."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def error_type(self) -> str:
        return type(self).__name__

    @property
    def headers(self) -> dict[str, str] | None:
        """Extra response headers (``Retry-After``, say)."""
        return None

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.code, self.error_type)


class InvalidRequest(StreamingError):
    """The request is well-formed JSON but asks for something that cannot be done."""

    status = 400
    code = "invalid_request"


class InvalidOffer(InvalidRequest):
    """The SDP offer could not be parsed or applied."""

    code = "invalid_offer"


class WorkflowCompilationError(InvalidRequest):
    """The workflow specification names an unknown block, model, selector or output."""

    code = "invalid_workflow"


class WorkflowRunError(StreamingError):
    """A workflow run over HTTP failed on one of its images (a step raised)."""

    code = "workflow_error"


class ModelError(StreamingError):
    """A model could not be prepared, loaded or run."""

    code = "model_error"


class Unauthorized(StreamingError):
    """The API key is missing or wrong."""

    status = 401
    code = "unauthorized"


class NotFound(StreamingError):
    """No such pipeline, workflow, model or route."""

    status = 404
    code = "not_found"


class Conflict(StreamingError):
    """The request contradicts what is running (say, removing a pipeline's only source)."""

    status = 409
    code = "conflict"


class UnsupportedMediaType(StreamingError):
    """A body of a type this route does not take (WHIP and WHEP take ``application/sdp``)."""

    status = 415
    code = "unsupported_media_type"


class NotSupportedHere(StreamingError):
    """A route this deployment cannot serve (WHIP ingest into Ray-hosted pipelines)."""

    status = 501
    code = "not_supported"


class RequestTooLarge(StreamingError):
    """The request body is over its limit."""

    status = 413
    code = "request_too_large"


class TooManySessions(StreamingError):
    """The server (or this address) already has as many sessions or pipelines as allowed."""

    status = 429
    code = "too_many_sessions"


class TooManyAttempts(StreamingError):
    """Too many wrong API keys from one address; ``retry_after`` seconds until it may retry."""

    status = 429
    code = "too_many_attempts"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class NotReady(StreamingError):
    """The server is not ready yet (models still loading)."""

    status = 503
    code = "not_ready"


class ShuttingDown(NotReady):
    """The server is draining before it exits: no new sessions or pipelines."""

    code = "shutting_down"


class TooManyPlayers(StreamingError):
    """A restreamed source has as many players as it may (``VISIONSTREAM_RESTREAM_MAX_VIEWERS``)."""

    status = 503
    code = "too_many_players"


class StoreUnavailable(StreamingError):
    """A database the server keeps (the event store) cannot be reached now."""

    status = 503
    code = "store_unavailable"


class SourceUnavailable(StreamingError):
    """A camera the server was asked to pull cannot be opened (its URL masked in the message)."""

    status = 502
    code = "source_unavailable"


class RelayUnavailable(StreamingError):
    """A relay-only peer got no relay candidate: no TURN server, or one that refused it."""

    status = 502
    code = "turn_unavailable"


class ModelProviderFailed(StreamingError):
    """A model provider (``VISIONSTREAM_VLM_PROVIDERS``) refused or did not answer a request the
    answer depends on (a search's embedding)."""

    status = 502
    code = "provider_failed"


class UpstreamTimeout(StreamingError):
    """Something the answer depends on (ICE gathering) did not finish in time."""

    status = 504
    code = "upstream_timeout"
