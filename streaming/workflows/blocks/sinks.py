"""Events out of a workflow: ``roboflow_core/webhook_sink@v1`` and our MQTT sink.

A delivery never holds up the frame: the request goes through ``sinks.WebhookSink`` (a bounded
queue on a thread of its own, retries with backoff, a timeout per attempt), whatever
``fire_and_forget`` says. ``cooldown_seconds`` spaces deliveries (the reference's throttle);
put the sink behind ``delta_filter`` or ``continue_if`` to send one event per crossing. The URL
is a literal or a parameter, checked against ``STREAMING_ALLOWED_NETWORKS`` before the stream
starts (``workflow_urls``); the queue's thread starts with the first delivery and ends with
the stream.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

from sinks.webhook import WebhookSink

from ...errors import WorkflowCompilationError
from ..serialization import serialize_value
from .base import Block, BuildContext, FieldSpec, FrameState
from .checks import integer

__all__ = ["MqttSinkBlock", "WebhookSinkBlock"]

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


class MqttSinkBlock(Block):
    """``visionstream/mqtt_sink@v1`` (ours: the reference has none): each ``payload`` entry
    published, retained, to ``<topic>/<key>`` whenever its value changes, Frigate-style: a
    dashboard subscribing to ``visionstream/#`` sees every count as it is now.

    ``topic`` may hold ``{pipeline}`` and ``{source}`` (a pipeline's id and source index;
    ``session`` and ``webrtc`` for a WebRTC session), default
    ``visionstream/{pipeline}/{source}/<step name>``. The broker is ``url``
    (``mqtt://host[:port]``, checked against ``STREAMING_ALLOWED_NETWORKS``); paho-mqtt's own
    thread connects, reconnects and sends (up to 1000 messages queued while the broker is
    away), so a frame never waits for the broker."""

    type_ids = ("visionstream/mqtt_sink@v1",)
    url_fields = ("url",)
    fields = {
        "url": FieldSpec(),
        "topic": FieldSpec(default=None),
        "payload": FieldSpec(entries=True),
        "retain": FieldSpec(default=True),
        "qos": FieldSpec(default=1),
    }
    outputs = {"error_status": "boolean", "message": "string"}

    def __init__(self, name: str, config: dict[str, Any], context: BuildContext) -> None:
        super().__init__(name, config, context)
        url = config["url"]
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme != "mqtt" or not parts.hostname:
            raise WorkflowCompilationError(f"step '{name}': url must be mqtt://host[:port]")
        self._host, self._port = parts.hostname, parts.port or 1883
        topic = config["topic"] or f"visionstream/{{pipeline}}/{{source}}/{name}"
        try:
            self._topic = str(topic).format(**context.stream)
        except (KeyError, IndexError, ValueError) as exc:
            raise WorkflowCompilationError(
                f"step '{name}': topic may use {{pipeline}} and {{source}} only ({exc})"
            ) from None
        self._retain = bool(config["retain"])
        self._qos = integer(name, "qos", config["qos"], 0)
        if self._qos > 2:
            raise WorkflowCompilationError(f"step '{name}': qos must be 0, 1 or 2")
        self._client: Any = None
        self._lock = threading.Lock()
        self._closed = False
        self._published: dict[str, str] = {}

    def _client_now(self) -> Any:
        import paho.mqtt.client as mqtt  # only streams with an MQTT sink load it

        with self._lock:
            if self._client is None and not self._closed:
                client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
                client.max_queued_messages_set(1000)
                client.reconnect_delay_set(1, 30)
                client.connect_async(self._host, self._port)
                client.loop_start()
                self._client = client
            return self._client

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        client = self._client_now()
        if client is None:
            return {"error_status": True, "message": "Sink is closed"}
        sent = 0
        for key, value in inputs["payload"].items():
            body = json.dumps(serialize_value(value, _PAYLOAD_JPEG_QUALITY, None), default=str)
            if self._published.get(key) == body:
                continue  # retained already: publish changes only
            client.publish(f"{self._topic}/{key}", body, qos=self._qos, retain=self._retain)
            self._published[key] = body
            sent += 1
        return {"error_status": False, "message": f"{sent} changed values published"}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            client.disconnect()  # after what is queued has gone, as far as paho can
            client.loop_stop()
