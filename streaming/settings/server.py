"""The HTTP server: where it listens, what a request may carry and how long it may take, how many
sessions it holds, how it ends."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

__all__ = ["ServerSettings"]


class ServerSettings(BaseSettings):
    """The HTTP server: where it listens, what a request may carry and how long it may take, how
    many sessions it holds, how it ends. A part of ``Settings`` (``VISIONSTREAM_<NAME>``)."""

    host: str = "127.0.0.1"
    """Address the HTTP server binds to."""
    port: int = 9001
    """Port the HTTP server binds to."""
    ready_wait_s: float = Field(default=60.0, ge=0)
    """An offer or pipeline arriving before the models are ready waits this long, then 503."""
    max_sessions: int = Field(default=16, ge=1)
    """Concurrent WebRTC sessions; one more is answered 429."""
    max_sessions_per_address: int = Field(default=8, ge=0)
    """Concurrent WebRTC sessions one client address may hold (0: up to max_sessions)."""
    http_header_timeout_s: float = Field(default=10.0, gt=0)
    """A connection whose next request head has not fully arrived by then is closed (idle
    and slowloris connections)."""
    http_body_timeout_s: float = Field(default=15.0, gt=0)
    """A request body whose next part takes longer is answered 408."""
    http_body_deadline_s: float = Field(default=60.0, gt=0)
    """A request body not complete this long after the request began is answered 408,
    however steadily it trickles in."""
    max_connections: int = Field(default=512, ge=1)
    """Concurrent HTTP connections (and requests in progress); past it new requests are
    answered 503 at once (uvicorn's ``limit_concurrency``)."""
    max_request_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest accepted signaling request body; larger is answered 413."""
    max_infer_request_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    """Largest inference request (``/infer/...``, ``/workflows/run``, V2 ``/v2/.../infer``)
    and largest image fetched from a URL; larger is answered 413."""
    max_images_per_request: int = Field(default=16, ge=1)
    """Images one ``/infer/...`` or workflow run request may carry; more is answered 413."""
    shutdown_drain_s: float = Field(default=10.0, ge=0)
    """On SIGTERM, how long live sessions and pipelines get to end (completion message sent,
    sinks flushed) before the server closes what is left and exits."""
    session_timeout_s: float = Field(default=3600.0, gt=0)
    """Session lifetime when the request gives no ``processing_timeout``."""
    max_session_timeout_s: float = Field(default=24 * 3600.0, gt=0)
    """Upper bound on any session's lifetime, whatever the request asks."""
    access_log: bool = False
    """Log every HTTP request (uvicorn's access log, keys in queries masked)."""
    malloc_trim: bool = True
    """After sessions end, return freed heap to the system (glibc's ``malloc_trim``): without
    it RSS creeps up with session churn (``benchmarks churn``)."""
    workflow_threads: int = Field(default=4, ge=1)
    """Threads that run workflows (preprocess, inference, annotate, serialize) for all sessions."""
