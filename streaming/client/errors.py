"""Client-side errors."""

from __future__ import annotations

__all__ = ["InvalidParameterError", "SessionStartError"]


class InvalidParameterError(ValueError):
    """An argument the server would reject anyway, caught before any connection is made."""


class SessionStartError(RuntimeError):
    """The session could not start: server down, an HTTP error, or no WebRTC connection.

    Raised once; by then everything the attempt created (peer connection, threads, the
    source) is closed again.
    """

    def __init__(
        self,
        message: str,
        *,
        url: str,
        status: int | None = None,
        server_message: str | None = None,
    ) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.server_message = server_message
