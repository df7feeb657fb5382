"""Prometheus metrics of one server (own registry, so several apps can live in one process)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:  # the pipelines import this module
    from .pipelines.motion import MotionStats

__all__ = ["Metrics", "SourceMetrics", "merge_workers"]

_STAGE_BUCKETS = (0.5, 1, 2, 5, 10, 20, 35, 50, 75, 100, 150, 250, 500, 1000, 2500)


class Metrics:
    """The server's Prometheus metrics, in a registry of its own (``/metrics``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._declare_sessions()
        self._declare_models()
        self._declare_pipelines()
        self._declare_events()
        self._declare_language()

    def _declare_sessions(self) -> None:
        """Sessions, the frames they take, process and drop, and where the time goes."""
        self.sessions = Gauge(
            "visionstream_sessions_active", "WebRTC sessions alive", registry=self.registry
        )
        self.sessions_total = Counter(
            "visionstream_sessions", "WebRTC sessions created", registry=self.registry
        )
        self.frames_received = Counter(
            "visionstream_frames_received", "Frames taken from sources", registry=self.registry
        )
        self.frames_processed = Counter(
            "visionstream_frames_processed",
            "Frames run through a workflow, by path: a WebRTC session, a pipeline's source, a "
            "WHIP publisher's",
            ["path"],
            registry=self.registry,
        )
        for path in ("session", "pipeline", "whip"):
            self.frames_processed.labels(path)  # every path shows from the start, at 0
        self.frames_dropped = Counter(
            "visionstream_frames_dropped",
            "Frames dropped before processing",
            ["reason"],
            registry=self.registry,
        )
        self.messages_dropped = Counter(
            "visionstream_result_messages_dropped",
            "Result messages not delivered (no open channel, congestion)",
            registry=self.registry,
        )
        self.acks_received = Counter(
            "visionstream_acks_received",
            "ACK control messages from clients",
            registry=self.registry,
        )
        self.upload_bytes = Counter(
            "visionstream_upload_bytes",
            "Bytes of completed video uploads",
            registry=self.registry,
        )
        self.uploads_refused = Counter(
            "visionstream_uploads_refused",
            "Uploads ended by a protocol error or a limit",
            registry=self.registry,
        )
        self.stage_ms = Histogram(
            "visionstream_stage_milliseconds",
            "Per-frame time spent in each processing stage",
            ["stage"],
            buckets=_STAGE_BUCKETS,
            registry=self.registry,
        )

    def _declare_models(self) -> None:
        """What each model runs on, and its batches."""
        self.model_info = Gauge(
            "visionstream_model_loaded",
            "Loaded models, the backend and execution provider they run on",
            ["model", "backend", "provider"],
            registry=self.registry,
        )
        self.model_degraded = Gauge(
            "visionstream_model_degraded",
            "1 when a model runs on less than it asked for (e.g. CUDA requested, CPU in use)",
            ["model"],
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "visionstream_batch_size",
            "Images per inference batch (frames from all sessions of a model)",
            ["model"],
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=self.registry,
        )
        self.batch_ms = Histogram(
            "visionstream_batch_compute_milliseconds",
            "Inference time per batch",
            ["model"],
            buckets=_STAGE_BUCKETS,
            registry=self.registry,
        )

    def _declare_pipelines(self) -> None:
        """Monitoring pipelines: each source's frames and its analytics."""
        # Monitoring pipelines' analytics, per pipeline, source and step (sessions, which
        # come and go by the thousand, are left out: their series would never end).
        self.line_count = Gauge(
            "visionstream_line_count",
            "Objects a pipeline's line counter has counted, by direction",
            ["pipeline", "source", "step", "direction"],
            registry=self.registry,
        )
        self.zone_occupancy = Gauge(
            "visionstream_zone_occupancy",
            "Tracked objects in a pipeline's zone now",
            ["pipeline", "source", "step"],
            registry=self.registry,
        )
        source = ["pipeline", "source"]
        self.source_frames = Counter(
            "visionstream_source_frames",
            "Frames a pipeline source has processed",
            source,
            registry=self.registry,
        )
        self.source_fps = Gauge(
            "visionstream_source_fps",
            "Frames per second a pipeline source processes now (its last 30 frames)",
            source,
            registry=self.registry,
        )
        self.source_reconnects = Counter(
            "visionstream_source_reconnects",
            "Times a pipeline's camera has reconnected",
            source,
            registry=self.registry,
        )
        self.source_dropped = Counter(
            "visionstream_source_frames_dropped",
            "Frames a pipeline source dropped before processing (its buffer strategy)",
            source,
            registry=self.registry,
        )

        self.source_detected = Counter(
            "visionstream_source_frames_detected",
            "Frames a motion-gated pipeline source ran its models on",
            source,
            registry=self.registry,
        )
        self.source_gated = Counter(
            "visionstream_source_frames_gated",
            "Frames a motion-gated pipeline source did not run its models on (nothing "
            "moved: their last outputs were given again)",
            source,
            registry=self.registry,
        )
        self.source_motion = Gauge(
            "visionstream_source_motion_area",
            "The fraction of a motion-gated pipeline source's last frame that moved",
            source,
            registry=self.registry,
        )

    def _declare_language(self) -> None:
        """Vision-language providers: requests by outcome, tokens by direction."""
        self.vlm_requests = Counter(
            "visionstream_vlm_requests",
            "Requests to vision-language providers, by provider, model and outcome (answered, "
            "refused, unavailable after every try)",
            ["provider", "model", "outcome"],
            registry=self.registry,
        )
        self.vlm_tokens = Counter(
            "visionstream_vlm_tokens",
            "Tokens vision-language providers counted, by provider, model and direction",
            ["provider", "model", "direction"],
            registry=self.registry,
        )

    def vlm_request(self, provider: str, model: str, outcome: str) -> None:
        self.vlm_requests.labels(provider, model, outcome).inc()

    def vlm_token_counts(self, provider: str, model: str, input_tokens: int, output: int) -> None:
        self.vlm_tokens.labels(provider, model, "input").inc(input_tokens)
        self.vlm_tokens.labels(provider, model, "output").inc(output)

    def _declare_events(self) -> None:
        """The event store's writes, drops and queue."""
        self.events_written = Counter(
            "visionstream_events_written",
            "Events committed to the event store",
            registry=self.registry,
        )
        self.events_dropped = Counter(
            "visionstream_events_dropped",
            "Events never stored: the queue was full (database down or slow), or the server "
            "stopped while the database was unreachable",
            ["reason"],
            registry=self.registry,
        )
        self.events_queued = Gauge(
            "visionstream_events_queued",
            "Events waiting for the event store",
            registry=self.registry,
        )

    def observe_batch(self, model: str, size: int, compute_ms: float) -> None:
        self.batch_size.labels(model).observe(size)
        self.batch_ms.labels(model).observe(compute_ms)

    def observe_model(self, model) -> None:
        """A model finished loading: what it runs on, and whether that is less than asked."""
        session = model.session
        self.model_info.labels(model.name, session.backend, session.providers[0]).set(1)
        self.model_degraded.labels(model.name).set(1 if session.degraded else 0)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Merged:
    """A collector that yields already-collected families (``merge_workers``)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def merge_workers(expositions: Mapping[str, str]) -> bytes:
    """One exposition from several workers' (by worker id): every sample labelled with its
    ``worker``, each metric family once (a Ray deployment's ``/metrics``)."""
    families: dict[str, Metric] = {}
    for worker, text in sorted(expositions.items()):
        for family in text_string_to_metric_families(text):
            merged = families.setdefault(
                family.name, Metric(family.name, family.documentation, family.type, family.unit)
            )
            merged.samples.extend(
                sample._replace(labels={**sample.labels, "worker": worker})
                for sample in family.samples
            )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Merged(list(families.values())))
    return generate_latest(registry)


class SourceMetrics:
    """One pipeline source's series, labelled with the pipeline and the source: its frames,
    frame rate, reconnects and drops (``frame``), and its analytics (``BuildContext.analytics``:
    a line counter's counts and a zone's occupancy, by step). ``close`` removes them all, when
    the pipeline is terminated; a frame still in a worker thread then reports nothing (it
    would bring the series back)."""

    def __init__(
        self, metrics: Metrics, pipeline: str, source: int, path: str = "pipeline"
    ) -> None:
        """``path``: how its frames count in ``visionstream_frames_processed`` (``whip``
        for a WHIP publisher's stream)."""
        self._metrics = metrics
        self._labels = (pipeline, str(source))
        self._processed = metrics.frames_processed.labels(path)
        self._lines: set[str] = set()
        self._zones: set[str] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._done: deque[float] = deque(maxlen=30)
        self._reconnects = 0
        self._dropped = 0
        self._detected = 0
        self._gated = 0
        self._gate_series = False
        for family in self._source_families():
            family.labels(*self._labels)  # every series shows from the start, at 0

    def _source_families(self) -> tuple[Counter | Gauge, ...]:
        m = self._metrics
        return (m.source_frames, m.source_fps, m.source_reconnects, m.source_dropped)

    def _gate_families(self) -> tuple[Counter | Gauge, ...]:
        m = self._metrics
        return (m.source_detected, m.source_gated, m.source_motion)

    def frame(self, reconnects: int, dropped: int, motion: MotionStats | None = None) -> None:
        """A frame was processed; ``reconnects`` and ``dropped`` are the source's totals,
        ``motion`` its motion gate's (a gated source's)."""
        with self._lock:
            if self._closed:
                return
            now = time.monotonic()
            self._done.append(now)
            m = self._metrics
            m.source_frames.labels(*self._labels).inc()
            self._processed.inc()
            span = now - self._done[0]
            if len(self._done) > 1 and span > 0:
                m.source_fps.labels(*self._labels).set((len(self._done) - 1) / span)
            if reconnects > self._reconnects:
                m.source_reconnects.labels(*self._labels).inc(reconnects - self._reconnects)
                self._reconnects = reconnects
            if dropped > self._dropped:
                m.source_dropped.labels(*self._labels).inc(dropped - self._dropped)
                self._dropped = dropped
            if motion is not None:
                self._motion(motion)

    def _motion(self, motion: MotionStats) -> None:
        """Call with the lock held."""
        m, labels = self._metrics, self._labels
        m.source_detected.labels(*labels).inc(motion.frames_detected - self._detected)
        m.source_gated.labels(*labels).inc(motion.frames_gated - self._gated)
        self._detected, self._gated = motion.frames_detected, motion.frames_gated
        if motion.motion_area is not None:
            m.source_motion.labels(*labels).set(motion.motion_area)
        self._gate_series = True

    def line(self, step: str, count_in: int, count_out: int) -> None:
        with self._lock:
            if self._closed:
                return
            self._lines.add(step)
            self._metrics.line_count.labels(*self._labels, step, "in").set(count_in)
            self._metrics.line_count.labels(*self._labels, step, "out").set(count_out)

    def zone(self, step: str, occupancy: int) -> None:
        with self._lock:
            if self._closed:
                return
            self._zones.add(step)
            self._metrics.zone_occupancy.labels(*self._labels, step).set(occupancy)

    def close(self) -> None:
        """Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for step in self._lines:
                for direction in ("in", "out"):
                    self._metrics.line_count.remove(*self._labels, step, direction)
            for step in self._zones:
                self._metrics.zone_occupancy.remove(*self._labels, step)
            for family in self._source_families():
                family.remove(*self._labels)
            if self._gate_series:
                for gate_family in self._gate_families():
                    with contextlib.suppress(KeyError):  # a gauge never set
                        gate_family.remove(*self._labels)
            self._lines.clear()
            self._zones.clear()
