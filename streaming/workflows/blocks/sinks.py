"""Events out of a workflow: ``roboflow_core/webhook_sink@v1``.

A delivery never holds up the frame: the request goes through ``sinks.WebhookSink`` (a bounded
queue on a thread of its own, retries with backoff, a timeout per attempt), whatever
``fire_and_forget`` says. ``cooldown_seconds`` spaces deliveries (the reference's throttle);
put the sink behind ``delta_filter`` or ``continue_if`` to send one event per crossing. The URL
is a literal or a parameter, checked against ``STREAMING_ALLOWED_NETWORKS`` before the stream
starts (``workflow_urls``); the queue's thread starts with the first delivery and ends with
the stream.
"""

from __future__ import annotations

import threading
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

from sinks.webhook import WebhookSink

from ...errors import WorkflowCompilationError
from ..serialization import serialize_value
from .base import Block, BuildContext, FieldSpec, FrameState
from .checks import integer

__all__ = ["WebhookSinkBlock"]

# JPEG quality of images put in a payload (a thumbnail's worth, not the video's).
_PAYLOAD_JPEG_QUALITY = 75


class WebhookSinkBlock(Block):
    """Sends ``json_payload`` (values as the result JSON has them) to ``url``."""

    type_ids = ("roboflow_core/webhook_sink@v1",)
    url_fields = ("url",)
    fields = {
        "url": FieldSpec(),
        "method": FieldSpec(default="POST"),
        "query_parameters": FieldSpec(default=None),
        "headers": FieldSpec(default=None),
        "json_payload": FieldSpec(default=None, entries=True),
        "request_timeout": FieldSpec(default=2),
        "fire_and_forget": FieldSpec(default=True),
        "disable_sink": FieldSpec(default=False),
        "cooldown_seconds": FieldSpec(default=5),
    }
    outputs = {"error_status": "boolean", "throttling_status": "boolean", "message": "string"}

    def __init__(self, name: str, config: dict[str, Any], context: BuildContext) -> None:
        super().__init__(name, config, context)
        url = config["url"]
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            raise WorkflowCompilationError(f"step '{name}': url must be an http(s) URL")
        if config["method"] != "POST":
            raise WorkflowCompilationError(
                f"step '{name}': method {config['method']!r} is not supported here (POST)"
            )
        query = config["query_parameters"] or {}
        headers = config["headers"] or {}
        for field, value in (("query_parameters", query), ("headers", headers)):
            if not isinstance(value, dict):
                raise WorkflowCompilationError(f"step '{name}': {field} must be an object")
        self._url = f"{url}{'&' if '?' in url else '?'}{urlencode(query)}" if query else url
        self._headers = {str(k): str(v) for k, v in headers.items()}
        self._timeout = integer(name, "request_timeout", config["request_timeout"], 1)
        self._cooldown = integer(name, "cooldown_seconds", config["cooldown_seconds"], 0)
        self._disabled = bool(config["disable_sink"])
        self._sink: WebhookSink | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._last_sent: float | None = None

    def _sink_now(self) -> WebhookSink | None:
        with self._lock:
            if self._sink is None and not self._closed:
                self._sink = WebhookSink(
                    self._url, timeout_s=self._timeout, headers=self._headers, queue_size=64
                )
            return self._sink

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        if self._disabled:
            return self._result(False, False, "Sink was disabled by parameter `disable_sink`")
        now = time.monotonic()
        if self._last_sent is not None and now - self._last_sent < self._cooldown:
            return self._result(False, True, "Sink cooldown applies")
        sink = self._sink_now()
        if sink is None:  # the stream is over
            return self._result(True, False, "Sink is closed")
        payload = {
            key: serialize_value(value, _PAYLOAD_JPEG_QUALITY, None)
            for key, value in inputs["json_payload"].items()
        }
        sink.write(payload)
        self._last_sent = now
        return self._result(False, False, "Notification sent in the background")

    @staticmethod
    def _result(error: bool, throttled: bool, message: str) -> dict[str, Any]:
        return {"error_status": error, "throttling_status": throttled, "message": message}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sink, self._sink = self._sink, None
        if sink is not None:
            sink.close()
