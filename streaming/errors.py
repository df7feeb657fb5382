"""Error hierarchy: each error maps to one HTTP status and one data-channel message."""

from __future__ import annotations

__all__ = [
    "InvalidOffer",
    "InvalidRequest",
    "ModelError",
    "NotFound",
    "NotReady",
    "RequestTooLarge",
    "ShuttingDown",
    "SourceUnavailable",
    "StreamingError",
    "TooManyAttempts",
    "TooManySessions",
    "Unauthorized",
    "UpstreamTimeout",
    "WorkflowCompilationError",
]


class StreamingError(Exception):
    """Base class; ``status`` is the HTTP status the server answers with."""

    status: int = 500

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


class InvalidRequest(StreamingError):
    """The request is well-formed JSON but asks for something that cannot be done."""

    status = 400


class InvalidOffer(InvalidRequest):
    """The SDP offer could not be parsed or applied."""


class WorkflowCompilationError(InvalidRequest):
    """The workflow specification names an unknown block, model, selector or output."""


class ModelError(StreamingError):
    """A model could not be prepared, loaded or run."""


class Unauthorized(StreamingError):
    status = 401


class NotFound(StreamingError):
    status = 404


class RequestTooLarge(StreamingError):
    status = 413


class TooManySessions(StreamingError):
    status = 429


class TooManyAttempts(StreamingError):
    """Too many wrong API keys from one address; ``retry_after`` seconds until it may retry."""

    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class NotReady(StreamingError):
    status = 503


class ShuttingDown(NotReady):
    """The server is draining before it exits: no new sessions or pipelines."""


class SourceUnavailable(StreamingError):
    """A camera the server was asked to pull cannot be opened (its URL masked in the message)."""

    status = 502


class UpstreamTimeout(StreamingError):
    """Something the answer depends on (ICE gathering) did not finish in time."""

    status = 504
