"""Descriptions of a pipeline's events by a vision-language model (Frigate's "generative AI"
descriptions and alert summaries): when an event is recorded (a crossing, a zone exit, an
event sink's fire), the frame it happened on goes with a prompt the operator writes (per
camera, per class; ``{label}``, ``{camera}``, ``{zone}``) to a provider, and the answer is
written onto the stored event: a description, and with ``summary`` a structured summary
(title, short summary, threat level 0-2, confidence).

Nothing here is on a frame's path: ``DescribingEvents.record`` only notes the event, the
pipeline hands the frame over once the frame's workflow ran (``frame_done``), and a thread of
its own encodes, asks and writes back. A provider that fails or is away costs the event
nothing: it is stored as ever, with the reason in its ``summary`` (``error``). Off by
default; per pipeline, switched on and off at run time (``enabled``)."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

import cv2
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from sinks.pinning import Pin
from sinks.worker import QueueWorker

from ..language import Prompt, ProviderError, Providers, decoding
from ..language.embeddings import Embedding
from .announcing import DescriptionAnnouncer, Mail
from .records import EventKind, EventRecord, EventRecorder
from .vectors import embedding_for

__all__ = ["SUMMARY_SCHEMA", "DescribeConfiguration", "DescribingEvents", "EventDescriber"]

log = logging.getLogger(__name__)

DEFAULT_PROMPT = (
    "This picture is from camera {camera}, when a {label} was seen{zone}. Describe the "
    "{label} and what it is doing in two sentences."
)
SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "summary": {"type": "string"},
        "threat_level": {"type": "integer", "minimum": 0, "maximum": 2},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["title", "summary", "threat_level", "confidence"],
}
"""An alert's summary, as the model is asked for it (Frigate's review summaries)."""
_SUMMARY_ASK = (
    " Answer with a JSON object: a short title, a summary of at most two sentences, a "
    "threat_level (0: normal activity, 1: needs a look, 2: needs action now) and your "
    "confidence (0 to 1)."
)
_PLACEHOLDER = re.compile(r"\{(label|camera|zone)\}")
_MAX_JPEG_EDGE = 1280
_DESCRIBED = (EventKind.EVENT_SINK, EventKind.LINE_CROSSING, EventKind.ZONE_EXIT)


class DescribeConfiguration(BaseModel):
    """A pipeline's descriptions (``describe`` of its request)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Describe this pipeline's events now (switched at run time too)."""
    provider: str = Field(min_length=1, max_length=128)
    """A provider of ``VISIONSTREAM_VLM_PROVIDERS``."""
    model: str | None = Field(default=None, max_length=256)
    """The model to ask; None: the provider's."""
    prompt: str = Field(default=DEFAULT_PROMPT, max_length=4000)
    """What is asked, ``{label}``, ``{camera}`` and ``{zone}`` filled in."""
    class_prompts: dict[str, str] = Field(default_factory=dict, max_length=256)
    """A prompt per class (``person``, ``car``), instead of ``prompt``."""
    camera_prompts: dict[str, str] = Field(default_factory=dict, max_length=256)
    """A prompt per camera (its source id, ``0``, ``1``), instead of ``prompt``; a class's
    prompt wins over a camera's."""
    camera_names: dict[str, str] = Field(default_factory=dict, max_length=256)
    """How ``{camera}`` names each source id (default: ``camera <id>``)."""
    kinds: list[str] = Field(default_factory=lambda: [str(k) for k in _DESCRIBED], max_length=32)
    """The event kinds described."""
    classes: list[str] | None = Field(default=None, max_length=256)
    """Only these classes' events; None: every class."""
    zones: list[str] | None = Field(default=None, max_length=256)
    """Only events of these steps (zones, lines, event sinks); None: every step."""
    min_interval_s: float = Field(default=30.0, ge=0, le=86_400)
    """Per camera, the least time between two described events (the rest are stored as
    ever, undescribed)."""
    summary: bool = False
    """Ask for an alert's structured summary (title, summary, threat level, confidence)."""
    max_tokens: int = Field(default=300, ge=16, le=4096)
    queue: int = Field(default=32, ge=1, le=1024)
    """Events waiting for the model, at most (the oldest is dropped past it)."""
    webhook_url: str | None = Field(default=None, max_length=2048, pattern=r"^https?://")
    """Each described event is also POSTed here as JSON (its pipeline, source, kind, class,
    time, description and summary), as Frigate announces descriptions; the address passes
    ``VISIONSTREAM_ALLOWED_NETWORKS``."""
    mqtt_url: str | None = Field(default=None, max_length=2048, pattern=r"^mqtt://[^/]+$")
    """A broker (``mqtt://host[:port]``, passing ``VISIONSTREAM_ALLOWED_NETWORKS``): each
    described event is published to ``<mqtt_topic>/event`` (the webhook's JSON), the
    switch's state retained at ``<mqtt_topic>/state`` (``ON``/``OFF``), and ``ON`` or
    ``OFF`` published to ``<mqtt_topic>/set`` switches descriptions at run time."""
    mqtt_topic: str = Field(
        default="visionstream/{pipeline}/descriptions",
        min_length=1,
        max_length=256,
        pattern=r"^[^#+]+$",
    )
    """The topics' prefix; ``{pipeline}`` is the pipeline's id."""
    email_to: list[Annotated[str, Field(max_length=320, pattern=r"^[^@\s]+@[^@\s]+$")]] = Field(
        default_factory=list, max_length=50
    )
    """Each described event is e-mailed to these addresses, its frame attached, through the
    server's mail relay (``VISIONSTREAM_SMTP_*``): only to ``VISIONSTREAM_SMTP_ALLOWED_RECIPIENTS``,
    at most one message per ``VISIONSTREAM_SMTP_MIN_INTERVAL_S``."""


class Annotating(Protocol):
    """Where descriptions are written: the event writer (``flush``) and its store."""

    def flush(self, timeout: float) -> bool: ...

    @property
    def store(self) -> Any: ...


Picture = np.ndarray | Callable[[], np.ndarray]
"""A frame, or what makes its pixels (a camera's frame is converted to BGR on first use: a
frame with no event to describe is never converted for it)."""


@dataclass
class _Job:
    event: EventRecord
    frame: Picture | None = None
    jpeg: bytes | None = None
    """The frame as the model was sent it (and an e-mail attaches it)."""


class EventDescriber:
    """One pipeline's descriptions; ``close`` is idempotent and abandons what waits."""

    def __init__(
        self,
        config: DescribeConfiguration,
        providers: Providers,
        writer: Annotating | None,
        *,
        write_timeout_s: float = 30.0,
        pin: Pin | None = None,
        pipeline_id: str = "",
        mail: Mail | None = None,
    ) -> None:
        self.config = config
        self.enabled = config.enabled
        self._pipeline = pipeline_id
        self._providers = providers
        self._writer = writer
        self._write_timeout_s = write_timeout_s
        self._lock = threading.Lock()
        self._pending: dict[str, list[_Job]] = {}
        self._last: dict[str, float] = {}
        self._closed = threading.Event()
        self.described = self.failed = self.dropped = 0
        self.announcer = DescriptionAnnouncer(
            webhook_url=config.webhook_url,
            mqtt_url=config.mqtt_url,
            mqtt_topic=config.mqtt_topic.replace("{pipeline}", pipeline_id),
            pin=pin,
            switch=self.switch,
            mail=mail,
        )
        self._worker: QueueWorker[_Job] = QueueWorker(
            "describer",
            self._describe,
            capacity=config.queue,
            drop_oldest=True,
            on_drop=self._drop,
            lazy=True,
        )

    def wrap(self, inner: EventRecorder | None) -> DescribingEvents:
        return DescribingEvents(inner, self)

    def wants(self, event: EventRecord) -> bool:
        """The event is one this pipeline describes, and its camera's interval has passed."""
        config = self.config
        if not self.enabled or event.kind not in config.kinds:
            return False
        if config.classes is not None and event.class_name not in config.classes:
            return False
        if config.zones is not None and event.step not in config.zones:
            return False
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(event.source, -float("inf")) < config.min_interval_s:
                return False
            self._last[event.source] = now
        return True

    def noted(self, event: EventRecord) -> None:
        with self._lock:
            self._pending.setdefault(event.source, []).append(_Job(event))

    def frame_done(self, source: str, image: Picture) -> None:
        """The frame a source's workflow just ran on: its events' picture. Never blocks;
        made into pixels, where it is a function, on the describer's thread."""
        if not self._pending:  # the common case: read without the lock, nothing to hand
            return
        with self._lock:
            jobs = self._pending.pop(source, None)
        for job in jobs or ():
            job.frame = image
            self._worker.put(job)

    def describe_now(self, event: EventRecord, image: np.ndarray) -> dict[str, Any]:
        """Describes an event now, on this thread (the test trigger of a stored event): the
        fields to write onto it, which the caller writes."""
        return self._ask(_Job(event, image))

    def _drop(self, job: _Job) -> None:
        self.dropped += 1

    def _describe(self, job: _Job) -> None:
        fields = self._ask(job)
        if self._writer is not None:
            event = job.event
            embedding = embedding_for(
                self._providers, fields.get("description"), event.class_name, event.kind
            )
            self._write(event.uid, fields, embedding)
        self.announcer.announce(job.event, fields, job.jpeg)

    def _ask(self, job: _Job) -> dict[str, Any]:
        config = self.config
        event = job.event
        text = _PLACEHOLDER.sub(lambda m: self._filled(m.group(1), event), self._prompt(event))
        if config.summary:
            text += _SUMMARY_ASK
        frame = job.frame() if callable(job.frame) else job.frame
        job.jpeg = _jpeg(frame) if frame is not None else None
        images = (job.jpeg,) if job.jpeg is not None else ()
        prompt = Prompt(
            text,
            images,
            schema=SUMMARY_SCHEMA if config.summary else None,
            max_tokens=config.max_tokens,
            model=config.model,
        )
        try:
            answer = self._providers.named(config.provider).describe(prompt)
        except ProviderError as exc:
            self.failed += 1
            log.warning("describer: event %s not described: %s", event.uid, exc)
            return {"summary": {"error": str(exc)}}
        self.described += 1
        if not config.summary:
            return {"description": answer.text.strip()}
        error, parsed = decoding.extract_json(answer.text)
        if error or not isinstance(parsed, dict):
            return {"description": answer.text.strip(), "summary": {"error": "not JSON"}}
        summary = _summary(parsed)
        return {"description": summary.get("summary") or answer.text.strip(), "summary": summary}

    def _prompt(self, event: EventRecord) -> str:
        config = self.config
        if event.class_name is not None and event.class_name in config.class_prompts:
            return config.class_prompts[event.class_name]
        return config.camera_prompts.get(event.source, config.prompt)

    def _filled(self, name: str, event: EventRecord) -> str:
        if name == "label":
            return event.class_name or "object"
        if name == "camera":
            return self.config.camera_names.get(event.source, f"camera {event.source}")
        return f" in {event.step}" if event.step else ""

    def _write(self, uid: str, fields: dict[str, Any], embedding: Embedding | None) -> None:
        """Onto the stored event; the writer's queue first, so that the event is there.
        A store that is away is tried again until ``write_timeout_s``."""
        assert self._writer is not None
        deadline = time.monotonic() + self._write_timeout_s
        wait = 0.1
        while not self._closed.is_set():
            self._writer.flush(max(0.0, deadline - time.monotonic()))
            try:
                if self._writer.store.annotate(uid, fields, embedding):
                    return
            except Exception as exc:  # the database's: tried again below
                log.info("describer: event %s not written yet: %s", uid, exc)
            if time.monotonic() >= deadline or self._closed.wait(wait):
                break
            wait = min(wait * 2, 5.0)
        log.warning("describer: the description of event %s could not be stored", uid)

    def stats(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "described": self.described,
            "failed": self.failed,
            "dropped": self.dropped,
            "waiting": self._worker.pending(),
            "mails_skipped": self.announcer.mails_skipped,
        }

    def open(self) -> None:
        """Connects where descriptions are announced (blocking: not the event loop's)."""
        self.announcer.open(self.enabled)

    def switch(self, enabled: bool) -> None:
        """Descriptions on or off from now (the API, or MQTT's ``<mqtt_topic>/set``)."""
        if enabled != self.enabled:
            log.info("pipeline %s: descriptions %s", self._pipeline[:8], "on" if enabled else "off")
        self.enabled = enabled
        self.announcer.state(enabled)

    def close(self) -> None:
        self._closed.set()
        self._worker.close(abandon=True)
        self.announcer.close()


class DescribingEvents:
    """An ``EventRecorder`` in front of the pipeline's: every event goes on as ever; the
    ones the describer wants wait for their frame (``EventDescriber.frame_done``)."""

    def __init__(self, inner: EventRecorder | None, describer: EventDescriber) -> None:
        self._inner = inner
        self.describer = describer

    def record(self, event: EventRecord) -> None:
        if self._inner is not None:
            self._inner.record(event)
        if self.describer.wants(event):
            self.describer.noted(event)


def _summary(parsed: dict[str, Any]) -> dict[str, Any]:
    """The model's summary, its fields typed and bounded (a model may answer anything)."""
    level = parsed.get("threat_level")
    confidence = parsed.get("confidence")
    return {
        "title": str(parsed.get("title") or "")[:200],
        "summary": str(parsed.get("summary") or "")[:2000],
        "threat_level": min(max(int(level), 0), 2) if isinstance(level, int | float) else None,
        "confidence": min(max(float(confidence), 0.0), 1.0)
        if isinstance(confidence, int | float)
        else None,
    }


def _jpeg(image: np.ndarray) -> bytes:
    height, width = image.shape[:2]
    if max(height, width) > _MAX_JPEG_EDGE:
        scale = _MAX_JPEG_EDGE / max(height, width)
        size = (round(width * scale), round(height * scale))
        image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
    ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 85])
    if not ok:
        raise ValueError("the frame could not be encoded")
    return bytes(data)
