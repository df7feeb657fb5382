"""Events out of a workflow: ``roboflow_core/webhook_sink@v1``, our MQTT sink and our local
event sink (JSON lines with snapshots and clips).

A delivery never holds up the frame: the request goes through ``sinks.WebhookSink`` (a bounded
queue on a thread of its own, retries with backoff, a timeout per attempt), whatever
``fire_and_forget`` says. ``cooldown_seconds`` spaces deliveries (the reference's throttle);
put the sink behind ``delta_filter`` or ``continue_if`` to send one event per crossing. The URL
is a literal or a parameter, checked against ``VISIONSTREAM_ALLOWED_NETWORKS`` before the stream
starts (``workflow_urls``); the queue's thread starts with the first delivery and ends with
the stream.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

from sinks.evidence import EventLog, Retention
from sinks.mqtt import MqttConnection, mqtt_address
from sinks.webhook import WebhookSink

from ...errors import WorkflowCompilationError
from ...events import EventKind
from ..query import Env, named_chains
from ..serialization import serialize_value
from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import ANY, IMAGE, SECRET, FieldSpec, Takes
from .verification import Verifiable, Verifier

__all__ = ["EventSinkBlock", "MqttSinkBlock", "NotificationBlock", "WebhookSinkBlock"]

# JPEG quality of images put in a payload (a thumbnail's worth, not the video's).
_PAYLOAD_JPEG_QUALITY = 75


def _texts(entries: dict[str, Any] | None, join: bool) -> dict[str, Any]:
    """Query or header values as text; a list stays a list of texts (a repeated query key)
    or, for a header, joins with commas."""
    out: dict[str, Any] = {}
    for key, value in (entries or {}).items():
        if value is None:
            continue
        if isinstance(value, list | tuple):
            texts = [str(v) for v in value]
            out[str(key)] = ",".join(texts) if join else texts
        else:
            out[str(key)] = str(value)
    return out


def _as_bytes(value: Any) -> bytes:
    """A multipart file's content: bytes as they are (an image through ConvertImageToJPEG),
    text as UTF-8, anything else as its result JSON."""
    if isinstance(value, bytes):
        return value
    return _as_text(value).encode()


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(serialize_value(value, _PAYLOAD_JPEG_QUALITY, None), separators=(",", ":"))


@dataclass(frozen=True, kw_only=True)
class WebhookSinkSettings(Verifiable):
    url: Any = setting(FieldSpec())
    method: Any = setting(FieldSpec(default="POST", choices=("GET", "POST", "PUT")))
    # Each entry a literal, a parameter or a step's output (as the reference's manifest).
    query_parameters: list[str] = setting(FieldSpec(default=None, takes=Takes.ENTRIES))
    headers: list[str] = setting(FieldSpec((ANY, SECRET), default=None, takes=Takes.ENTRIES))
    json_payload: list[str] = setting(FieldSpec(default=None, takes=Takes.ENTRIES))
    json_payload_operations: dict[str, Any] = setting(FieldSpec(default={}, type="object"))
    multi_part_encoded_files: list[str] = setting(FieldSpec(default=None, takes=Takes.ENTRIES))
    multi_part_encoded_files_operations: dict[str, Any] = setting(
        FieldSpec(default={}, type="object")
    )
    form_data: list[str] = setting(FieldSpec(default=None, takes=Takes.ENTRIES))
    form_data_operations: dict[str, Any] = setting(FieldSpec(default={}, type="object"))
    request_timeout: int = setting(FieldSpec(default=2, type="integer", minimum=1))
    fire_and_forget: Any = setting(FieldSpec(default=True))
    disable_sink: Any = setting(FieldSpec(default=False))
    cooldown_seconds: int = setting(FieldSpec(default=5, type="integer", minimum=0))


_DRAIN_S = 5.0
"""How long a webhook step's queued requests still get at its workflow's end (an HTTP run
answers before they are sent)."""


class NotificationBlock(Block):
    """What the reference's notification sinks share: ``disable_sink``, ``cooldown_seconds``
    between deliveries, and the three outputs saying what became of each frame's."""

    outputs = {"error_status": "boolean", "throttling_status": "boolean", "message": "string"}

    def hold(self, cooldown: float, disabled: bool) -> None:
        """Called from ``__init__`` with the step's settings."""
        self._cooldown = cooldown
        self._disabled = disabled
        self._lock = threading.Lock()
        self._closed = False
        self._last_sent: float | None = None

    def held_back(self) -> dict[str, Any] | None:
        """This frame's outputs when it sends nothing (disabled, or cooling down), else None."""
        if self._disabled:
            return self.result(False, False, "Sink was disabled by parameter `disable_sink`")
        now = time.monotonic()
        if self._last_sent is not None and now - self._last_sent < self._cooldown:
            return self.result(False, True, "Sink cooldown applies")
        return None

    def sent(self) -> dict[str, Any]:
        self._last_sent = time.monotonic()
        return self.result(False, False, "Notification sent in the background")

    verifier: Verifier | None = None
    """Sends only what a vision-language model confirms (the step's ``verify``)."""

    def verify_with(self, config: BlockSettings, context: BuildContext) -> None:
        """Called from ``__init__``: the step's ``verify`` (``Verifiable``), if it has one."""
        self.verifier = Verifier.of(self.name, getattr(config, "verify", None), context)
        # The frame a verdict is asked on; only then, so that no other step's frames are
        # made into pixels for it (the engine reads the attribute of each block).
        self.observes_frames = self.verifier is not None  # type: ignore[misc]

    def observe(self, image: Any, frame: FrameState) -> None:
        if self.verifier is not None:
            self.verifier.observe(image)

    def deliver(self, send: Callable[[], bool]) -> dict[str, Any]:
        """``send`` now, or once the model confirms the frame (``verify``); the outputs."""
        if self.verifier is None:
            return self.sent() if send() else self.result(True, False, "Sink is closed")
        if not self.verifier.submit(send):
            return self.result(True, False, "Sink is closed")
        self._last_sent = time.monotonic()
        return self.result(False, False, "Notification waits for the model's verdict")

    def close_verifier(self) -> None:
        if self.verifier is not None:
            self.verifier.close()

    @staticmethod
    def result(error: bool, throttled: bool, message: str) -> dict[str, Any]:
        return {"error_status": error, "throttling_status": throttled, "message": message}


class WebhookSinkBlock(NotificationBlock):
    """Sends a request to ``url`` with ``method`` (GET, POST or PUT): ``json_payload``
    (values as the result JSON has them) as a JSON body, or, where the step names any,
    ``multi_part_encoded_files`` as a multipart body or ``form_data`` as a form, as the
    reference's ``requests`` does; each part's values first through its ``*_operations``."""

    type_ids = ("roboflow_core/webhook_sink@v1",)
    url_fields = ("url",)
    Settings: ClassVar[type[BlockSettings]] = WebhookSinkSettings

    def __init__(self, name: str, config: WebhookSinkSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        url = config.url
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            raise WorkflowCompilationError(f"step '{name}': url must be an http(s) URL")
        self._method = config.method
        # Each part's values through their operations (the reference's *_operations).
        self._operations = {
            part: named_chains(name, part, f"{part}_operations", getattr(config, part),
                               getattr(config, f"{part}_operations"))
            for part in ("json_payload", "multi_part_encoded_files", "form_data")
        }  # fmt: skip
        self._url = url
        self._timeout = config.request_timeout
        self._pin = context.pin
        self._sink: WebhookSink | None = None
        self.hold(config.cooldown_seconds, bool(config.disable_sink))
        self.verify_with(config, context)

    def _sink_now(self) -> WebhookSink | None:
        with self._lock:
            if self._sink is None and not self._closed:
                self._sink = WebhookSink(
                    self._url, timeout_s=self._timeout, queue_size=64, pin=self._pin
                )
            return self._sink

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        if (held := self.held_back()) is not None:
            return held
        sink = self._sink_now()
        if sink is None:  # the stream is over
            return self.result(True, False, "Sink is closed")
        env = Env(facts=frame.facts)
        parts = {
            part: {key: chains[key](value, env) if key in chains else value
                   for key, value in (inputs.get(part) or {}).items()}
            for part, chains in self._operations.items()
        }  # fmt: skip
        payload = {
            key: serialize_value(value, _PAYLOAD_JPEG_QUALITY, None)
            for key, value in parts["json_payload"].items()
        }
        request = {
            "params": _texts(inputs.get("query_parameters"), join=False),
            "headers": _texts(inputs.get("headers"), join=True),
            "method": self._method,
            "files": {k: _as_bytes(v) for k, v in parts["multi_part_encoded_files"].items()},
            "form": {k: _as_text(v) for k, v in parts["form_data"].items() if v is not None},
        }

        def send() -> bool:
            sink.write(payload, **request)
            return True

        return self.deliver(send)

    def close(self) -> None:
        self.close_verifier()  # first: what it confirms still goes out
        with self._lock:
            self._closed = True
            sink, self._sink = self._sink, None
        if sink is not None:  # what a frame was told is sent gets its one try
            sink.close(drain_s=_DRAIN_S)


@dataclass(frozen=True, kw_only=True)
class MqttSinkSettings(BlockSettings):
    url: Any = setting(FieldSpec())
    topic: Any = setting(FieldSpec(default=None))
    payload: list[str] = setting(FieldSpec(takes=Takes.ENTRIES))
    retain: Any = setting(FieldSpec(default=True))
    qos: int = setting(FieldSpec(default=1, type="integer", minimum=0))


class MqttSinkBlock(Block):
    """``visionstream/mqtt_sink@v1`` (ours: the reference has none): each ``payload`` entry
    published, retained, to ``<topic>/<key>`` whenever its value changes, Frigate-style: a
    dashboard subscribing to ``visionstream/#`` sees every count as it is now.

    ``topic`` may hold ``{pipeline}`` and ``{source}`` (a pipeline's id and source index;
    ``session`` and ``webrtc`` for a WebRTC session), default
    ``visionstream/{pipeline}/{source}/<step name>``. The broker is ``url``
    (``mqtt://host[:port]``, checked against ``VISIONSTREAM_ALLOWED_NETWORKS``); paho-mqtt's own
    thread connects, reconnects and sends (up to 1000 messages queued while the broker is
    away), so a frame never waits for the broker."""

    type_ids = ("visionstream/mqtt_sink@v1",)
    url_fields = ("url",)
    Settings: ClassVar[type[BlockSettings]] = MqttSinkSettings
    outputs = {"error_status": "boolean", "message": "string"}

    def __init__(self, name: str, config: MqttSinkSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        try:
            mqtt_address(config.url)
        except ValueError:
            raise WorkflowCompilationError(
                f"step '{name}': url must be mqtt://host[:port]"
            ) from None
        topic = config.topic or f"visionstream/{{pipeline}}/{{source}}/{name}"
        self._topic = stream_name(name, "topic", topic, context)
        self._retain = bool(config.retain)
        self._qos = config.qos
        if self._qos > 2:
            raise WorkflowCompilationError(f"step '{name}': qos must be 0, 1 or 2")
        self._broker = MqttConnection(config.url, context.pin)
        self._published: dict[str, str] = {}

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        try:
            client = self._broker.client()
        except OSError as exc:  # the broker's address is refused now
            return {"error_status": True, "message": f"Not connected: {exc}"}
        if client is None:
            return {"error_status": True, "message": "Sink is closed"}
        sent = 0
        for key, value in inputs["payload"].items():
            body = json.dumps(serialize_value(value, _PAYLOAD_JPEG_QUALITY, None), default=str)
            if self._published.get(key) == body:
                continue  # retained already: publish changes only
            self._broker.publish(f"{self._topic}/{key}", body, qos=self._qos, retain=self._retain)
            self._published[key] = body
            sent += 1
        return {"error_status": False, "message": f"{sent} changed values published"}

    def close(self) -> None:
        self._broker.close()


def stream_name(step: str, field: str, template: Any, context: BuildContext) -> str:
    """``template`` with ``{pipeline}`` and ``{source}`` filled in for this stream."""
    try:
        return str(template).format(**context.stream)
    except (KeyError, IndexError, ValueError) as exc:
        raise WorkflowCompilationError(
            f"step '{step}': {field} may use {{pipeline}} and {{source}} only ({exc})"
        ) from None


_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True, kw_only=True)
class EventSinkSettings(BlockSettings):
    payload: list[str] = setting(FieldSpec(default=None, takes=Takes.ENTRIES))
    file: Any = setting(FieldSpec(default=None))
    snapshot: Any = setting(FieldSpec(default=True))
    clip_seconds_before: float = setting(FieldSpec(default=5, type="number", minimum=0, maximum=60))
    clip_seconds_after: float = setting(FieldSpec(default=5, type="number", minimum=0, maximum=60))
    max_events: int = setting(FieldSpec(default=1000, type="integer", minimum=1))
    max_age_hours: float = setting(
        FieldSpec(default=168, type="number", minimum=0, maximum=24 * 365 * 10)
    )
    max_megabytes: float = setting(FieldSpec(default=1024, type="number", minimum=0, maximum=2**30))


class EventSinkBlock(Block):
    """``visionstream/event_sink@v1`` (ours): each time it runs, one JSON line in
    ``<VISIONSTREAM_SINK_DIR>/<file>.jsonl`` with ``payload`` and the frame's number and time,
    plus the event's evidence in ``<file>/``: a JPEG snapshot (``image``, e.g. the annotated
    frame, else the input frame) and an MP4 clip of the input video from
    ``clip_seconds_before`` to ``clip_seconds_after`` around it. Put it behind
    ``delta_filter`` or ``continue_if`` for one event per crossing; it sees every frame
    anyway, for the clips' pre-roll.

    ``file`` is a name, never a path (``{pipeline}`` and ``{source}`` allowed; default
    ``{pipeline}-{source}-<step name>``). Evidence beyond ``max_events``, ``max_age_hours``
    or ``max_megabytes`` is removed, oldest first; the JSON lines stay."""

    type_ids = ("visionstream/event_sink@v1",)
    observes_frames = True
    inputs = {"image": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = EventSinkSettings
    outputs = {"error_status": "boolean", "message": "string", "event_id": "string"}

    def __init__(self, name: str, config: EventSinkSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        if context.sink_dir is None:
            raise WorkflowCompilationError(f"step '{name}': this stream keeps no files")
        file = stream_name(name, "file", config.file or f"{{pipeline}}-{{source}}-{name}",
                           context)  # fmt: skip
        if not _FILE_NAME.match(file):
            raise WorkflowCompilationError(
                f"step '{name}': file must be a name of letters, digits, '.', '_' and '-' "
                f"(no path), got {file!r}"
            )
        if not isinstance(config.snapshot, bool):
            raise WorkflowCompilationError(f"step '{name}': snapshot must be true or false")
        self._directory, self._file = context.sink_dir, file
        self._context = context
        self._snapshot = config.snapshot
        self._pre = config.clip_seconds_before
        self._post = config.clip_seconds_after
        hours = config.max_age_hours
        megabytes = config.max_megabytes
        if megabytes > context.limits.file_sink_mb:  # the caller's retention, the server's cap
            raise WorkflowCompilationError(
                f"step '{name}': max_megabytes {megabytes:g} is over the server's "
                f"{context.limits.file_sink_mb} (VISIONSTREAM_LIMIT_FILE_SINK_MB)"
            )
        self._retention = Retention(
            max_events=config.max_events,
            max_age_s=3600 * hours,
            max_bytes=int(2**20 * megabytes),
        )
        self._log: EventLog | None = None
        self._closed = False
        self._latest: Any = None
        """The stream's newest input frame: the snapshot when no ``image`` is given."""

    def _log_now(self) -> EventLog | None:
        # Made on first use: a workflow compiled only to watch a pipeline never writes.
        if self._log is None and not self._closed:
            self._log = EventLog(
                self._directory,
                self._file,
                pre_s=self._pre,
                post_s=self._post,
                snapshot=self._snapshot,
                retention=self._retention,
            )
        return self._log

    def observe(self, image: Any, frame: FrameState) -> None:
        self._latest = image
        log = self._log_now()
        if log is not None:
            log.observe(image, frame.facts.seconds)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        log = self._log_now()
        if log is None:
            return {"error_status": True, "message": "Sink is closed", "event_id": None}
        payload = {
            key: serialize_value(value, _PAYLOAD_JPEG_QUALITY, None)
            for key, value in (inputs["payload"] or {}).items()
        }
        facts = frame.facts
        record = {
            "step": self.name,
            "frame_number": facts.frame_number,
            "frame_timestamp": facts.timestamp.isoformat() if facts.timestamp else None,
            "payload": payload,
        }
        given = inputs.get("image")  # optional: absent when not bound
        image = given.numpy if given is not None else self._latest
        line = log.event(record, image, facts.seconds)
        self._context.event(
            EventKind.EVENT_SINK,
            self.name,
            payload={"event_id": line["event_id"], "file": self._file, **record},
            snapshot=line["snapshot"],
            clip=line["clip"],
        )
        return {"error_status": False, "message": "Event logged", "event_id": line["event_id"]}

    def close(self) -> None:
        self._closed = True
        log, self._log = self._log, None
        if log is not None:
            log.close()
