"""What every workflow block declares (fields, outputs) and implements (``run``)."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, Protocol, cast

import numpy as np
import supervision as sv

from sinks.pinning import Pin

from ...access import Role
from ...bounds import WorkflowLimits
from ...config import Settings
from ...egress import EgressPolicy
from ...events import EventRecord, EventRecorder
from ...inference.model import DetectionModel, StageTimer
from ...language import Providers
from .fields import FieldSpec
from .images import Origin, WorkflowImage

__all__ = [
    "Block",
    "BlockSettings",
    "BuildContext",
    "FlowControlBlock",
    "FrameState",
    "Origin",
    "Verdict",
    "VideoFacts",
    "WorkflowImage",
    "select",
    "setting",
]


def select(detections: sv.Detections, index: np.ndarray) -> sv.Detections:
    """The detections at ``index`` (a mask or positions), as a new object."""
    return cast(sv.Detections, detections[index])


class AnalyticsSink(Protocol):
    """Where analytics blocks report what they count (a pipeline source's metrics)."""

    def line(self, step: str, count_in: int, count_out: int) -> None: ...

    def zone(self, step: str, occupancy: int) -> None: ...


class ModelSource(Protocol):
    """Where blocks get their models (the registry, or a fixed set in tests)."""

    def acquire(self, model_id: str) -> DetectionModel:
        """The model, held (not unloaded) until ``release``."""

    def release(self, model_id: str) -> None: ...

    def available(self) -> list[str]: ...


_DEFAULT_LIMITS = WorkflowLimits()


@dataclass
class BuildContext:
    """What compiling a block may use."""

    models: ModelSource
    analytics: AnalyticsSink | None = None
    """Reports counts and occupancy (a pipeline source's Prometheus series); None: not kept."""
    stream: dict[str, str] = field(
        default_factory=lambda: {"pipeline": "session", "source": "webrtc"}
    )
    """What the stream is, for names sinks publish under: a pipeline's id and source index."""
    sink_dir: Path | None = None
    """Where event sinks write (``VISIONSTREAM_SINK_DIR``); None: this stream keeps no files."""
    events: EventRecorder | None = None
    """The event store's queue (line crossings, zone entries, event sinks); None: not kept."""
    settings: Settings | None = None
    """The server's settings, for blocks that reach outside the stream (where a file sink
    may write, the SMTP server); None: such blocks are refused."""
    workflows: Callable[[str | None, str], dict[str, Any]] | None = None
    """Stored workflows by workspace and id, for ``inner_workflow`` steps that name one."""
    caller: str = "anonymous"
    """Who asked for this workflow (a key's name, a client's address): what the server's
    shared resources (the mail relay) are rationed by."""
    live: bool = False
    """The workflow runs on a live stream (a session, a pipeline, a WHIP publisher): steps
    that wait on a remote model ask in the background and frames carry the last answer.
    False: a run that waits for every answer (an HTTP run)."""
    language: Providers | None = None
    """The server's vision-language providers (shared, so each provider's concurrency limit
    holds server-wide); None: a block that asks one makes its own from ``settings``."""
    role: Role = Role.ADMIN
    """The caller's role: a step whose block needs more (``access.BLOCKS``) is a 403 when
    compiled. Admin for what the server runs itself (tests, restarted pipelines)."""

    @property
    def pin(self) -> Pin | None:
        """Where a block connects for the caller (a webhook, an SMTP server): the address
        checked against ``VISIONSTREAM_ALLOWED_NETWORKS`` as it connects; None without settings."""
        if self.settings is None:
            return None
        return EgressPolicy(self.settings.allowed_networks).pin

    @property
    def limits(self) -> WorkflowLimits:
        """What a step may make (the server's ``VISIONSTREAM_LIMIT_*``; defaults without one)."""
        return self.settings.limits if self.settings is not None else _DEFAULT_LIMITS

    def event(self, kind: str, step: str, **fields: Any) -> None:
        """Stores one event of this stream (``EventRecord``'s fields), if events are kept."""
        if self.events is not None:
            stream = self.stream
            self.events.record(
                EventRecord(kind, stream["pipeline"], stream["source"], step, **fields)
            )


@dataclass(frozen=True)
class VideoFacts:
    """The frame's video metadata, typed: what blocks read of it (``FrameState.facts``)."""

    frame_number: int | None = None
    timestamp: datetime | None = None
    fps: float | None = None
    """The stream's own rate where known (a file's, or what the client declared)."""
    from_file: bool = False
    stream_restarts: int = 0
    """How often a camera has reconnected: a tracker starts afresh after a gap."""
    started_at: datetime | None = None
    """When the stream's first frame arrived (``stream_started_at``)."""

    @classmethod
    def of(cls, video: Mapping[str, Any]) -> VideoFacts:
        """From the reference's ``video_metadata`` (what a session, a pipeline or an HTTP
        run gives); what it lacks or gives in another shape is left unknown."""
        stamp = _datetime(video.get("frame_timestamp"))
        number, fps, restarts = (video.get(k) for k in ("frame_number", "fps", "stream_restarts"))
        started = video.get("stream_started_at")
        return cls(
            frame_number=number
            if isinstance(number, int) and not isinstance(number, bool)
            else None,
            timestamp=stamp if isinstance(stamp, datetime) else None,
            fps=float(fps) if isinstance(fps, int | float) and fps > 0 else None,
            from_file=bool(video.get("comes_from_video_file")),
            stream_restarts=restarts if isinstance(restarts, int) else 0,
            started_at=_datetime(started),
        )

    @property
    def by_file_clock(self) -> bool:
        """The frame's time is the file's own (frame number / fps), not the wall clock's."""
        return self.from_file and self.fps is not None

    @property
    def seconds(self) -> float:
        """The frame's time on the clock the reference's analytics blocks keep (time in
        zone, velocity, the rate limiter): frame number / fps for a video file, else its
        timestamp; 0 when the frame says neither."""
        if self.by_file_clock:
            assert self.fps is not None
            return float(self.frame_number or 0) / self.fps
        return self.timestamp.timestamp() if self.timestamp is not None else 0.0

    @property
    def since_start(self) -> float | None:
        """Seconds since the stream's first frame, as the reference's query language and
        event log count them: (frame number - 1) / fps, so the first frame is at 0 (the
        analytics clock, ``seconds``, puts it at 1 / fps: durations agree, instants differ
        by one frame, as in the reference). Without an fps, the stream's own timestamps;
        None when the frame says neither."""
        if self.fps is not None and self.frame_number is not None:
            return (self.frame_number - 1) / self.fps
        if self.timestamp is not None and self.started_at is not None:
            return (self.timestamp - self.started_at).total_seconds()
        return None


def _datetime(value: Any) -> datetime | None:
    """A timestamp as the metadata carries it (text, or already a datetime); else None."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    return value if isinstance(value, datetime) else None


@dataclass
class FrameState:
    """Per-frame facts blocks may read, and the stage timer they add to."""

    timer: StageTimer = field(default_factory=dict)
    video: dict[str, Any] = field(default_factory=dict)
    """The frame's video metadata as the reference has it (``frame_timestamp``, ``fps``,
    ``frame_number``, ``comes_from_video_file``): what results carry."""
    given: VideoFacts | None = None
    """The frame's facts as its source typed them (a session's or a pipeline's frame): then
    ``facts`` is made from these, not parsed back from ``video``'s text."""
    still: bool = False
    """Nothing moved since the frame the models last ran on (a pipeline's motion gate):
    the steps that hold give their last outputs again (``Block.holds_when_still``)."""
    held_steps: int = 0
    """How many steps gave their last outputs again on this frame."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """This frame's own values of the inputs given one per image (an HTTP run's lists:
    ``WorkflowBatchInput``s and image inputs beside the frames')."""
    _facts: tuple[int, VideoFacts] | None = field(default=None, init=False, repr=False)

    @property
    def facts(self) -> VideoFacts:
        """The frame's facts, typed: what blocks and the query language read (made once per
        metadata object; from ``given`` where the source typed them)."""
        if self._facts is None or self._facts[0] != id(self.video):
            if self.given is not None:  # the stream's start is the engine's to say
                started = _datetime(self.video.get("stream_started_at"))
                typed = replace(self.given, started_at=started)
            else:
                typed = VideoFacts.of(self.video)
            self._facts = (id(self.video), typed)
        return self._facts[1]

    def add_time(self, stage: str, started: float) -> None:
        """Adds the time since ``started`` (``time.perf_counter()``) to ``stage``, in ms."""
        self.timer[stage] = self.timer.get(stage, 0.0) + (time.perf_counter() - started) * 1000


class Verdict(Enum):
    """A flow-control block's decision for one frame."""

    RUN = "run"
    """Its ``next_steps`` run."""
    SKIP = "skip"
    """Its ``next_steps`` (and every step that reads them) are skipped; their outputs None."""

    @classmethod
    def of(cls, run: bool) -> Verdict:
        return cls.RUN if run else cls.SKIP


def setting(spec: FieldSpec) -> Any:
    """A settings attribute declared with its field: ``threshold: float =
    setting(fraction(0.25))`` is the attribute, its type and what the compiler checks and
    ``/workflows/blocks/describe`` shows, in one line."""
    return field(metadata={_SPEC: spec})


_SPEC = "visionstream.field"


@dataclass(frozen=True, kw_only=True)
class BlockSettings:
    """A block's settings: one typed attribute per field that is not per frame, its value
    checked against the field's ``FieldSpec`` (defaults filled in, parameters resolved) when
    the workflow is compiled. Each attribute declares its field (``setting``); each block
    declares its own settings (``Block.Settings``)."""

    @classmethod
    def names(cls) -> set[str]:
        return {f.name for f in fields(cls)}

    @classmethod
    def specs(cls) -> dict[str, FieldSpec]:
        """The fields its attributes declare (``setting``), in declaration order."""
        return {f.name: f.metadata[_SPEC] for f in fields(cls) if _SPEC in f.metadata}


class Block(ABC):
    """A workflow block: its type ids, fields (literal or per-frame) and outputs; built once
    per compiled workflow, run once per frame."""

    type_ids: ClassVar[tuple[str, ...]]
    inputs: ClassVar[dict[str, FieldSpec]] = {}
    """The per-frame fields (images, predictions, a step's output): what ``run`` is given."""
    Settings: ClassVar[type[BlockSettings]] = BlockSettings
    """What ``__init__`` is given: the fields that are not per frame, typed, each attribute
    declaring its field (``setting``)."""
    fields: ClassVar[dict[str, FieldSpec]]
    """Every field, made when the class is defined: ``inputs`` and the fields ``Settings``
    declares. The compiler binds, and ``/workflows/blocks/describe`` shows, these."""
    host_fields: ClassVar[tuple[tuple[str, str, int], ...]] = ()
    """Fields naming a host the server will connect to: (host field, port field, default
    port), checked as ``url_fields`` are (an e-mail step's ``smtp_server``)."""
    url_fields: ClassVar[tuple[str, ...]] = ()
    """Fields naming a URL the server will connect to: checked against the egress policy
    before the stream starts (``workflow_urls``)."""
    outputs: ClassVar[dict[str, str]]
    """Output name -> kind."""
    passes_kind: ClassVar[str | None] = None
    """The input field whose kind its detections outputs hand on (a filter given instance
    segmentation gives instance segmentation), as the reference's union-kinded outputs
    are matched to what the next step takes; None: its outputs are the kind they say."""
    output_dimension: ClassVar[int] = 0
    """+1: the step makes several elements of each one it runs on (a crop per detection):
    ``run`` gives, for each output, a list, and the outputs live one dimension deeper. -1:
    it collapses its inputs' dimension: each per-frame field gets the list of its
    element's children (``dimension_collapse``)."""
    input_offsets: ClassVar[dict[str, int]] = {}
    """Fields taken one dimension below ``dimension_reference`` (1): each gets the list of
    the reference element's children (``detections_classes_replacement``'s classes, one
    per crop of its detections)."""
    dimension_reference: ClassVar[str | None] = None
    accepts_empty: ClassVar[bool] = False
    """True: the step runs on an element whose input is missing (None), as the reference's
    ``accepts_empty_values``; otherwise that element's outputs are missing too."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each field declared once: per frame in ``inputs``, every other one on ``Settings``
        (``setting``); ``fields`` made from both."""
        super().__init_subclass__(**kwargs)
        declared = cls.Settings.specs()
        problems = []
        if twice := sorted(set(declared) & set(cls.inputs)):
            problems.append(f"{twice} declared in inputs and on Settings")
        if fixed := sorted(n for n, spec in cls.inputs.items() if not spec.per_frame):
            problems.append(f"{fixed} in inputs are not per frame: declare them on Settings")
        if bare := sorted(cls.Settings.names() - set(declared)):
            problems.append(f"{cls.Settings.__name__}'s {bare} declare no field (setting(...))")
        if problems:
            raise TypeError(f"block {cls.__name__}: {'; '.join(problems)}")
        cls.fields = {**cls.inputs, **declared}

    def __init__(self, name: str, config: BlockSettings, context: BuildContext) -> None:
        """``config``: every field that is not per frame, checked, defaults filled in."""
        self.name = name

    @classmethod
    def settings(cls, config: dict[str, Any]) -> BlockSettings:
        """The typed settings of a step, from its checked field values."""
        return cls.Settings(**config)

    @classmethod
    def outputs_of(cls, given: dict[str, Any]) -> dict[str, str]:
        """The outputs of a step with these fields as written (a block whose outputs are
        named by its configuration, like ``data_aggregator``, overrides this)."""
        return cls.outputs

    @classmethod
    def check_given(cls, name: str, given: dict[str, Any]) -> None:
        """Raise ``WorkflowCompilationError`` when the fields as written do not go together
        (the reference's manifest validators: a task that needs a prompt given none)."""
        return

    @classmethod
    def check_bindings(cls, name: str, bound: set[str]) -> None:
        """Raise ``WorkflowCompilationError`` when per-frame fields are bound inconsistently."""
        return

    @abstractmethod
    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        """Per-frame fields in, every declared output out."""

    def run_batch(self, batch: list[dict[str, Any]], frame: FrameState) -> list[dict[str, Any]]:
        """Every element of a frame at the step's dimension at once (one per crop): a model
        block runs them as one batch; others run each in turn."""
        return [self.run(inputs, frame) for inputs in batch]

    holds_when_still: ClassVar[bool] = False
    """True (a model on the whole frame): on a still frame (``FrameState.still``) the
    engine gives the block's last outputs again instead of running it."""
    held: dict[str, Any] | None = None
    """What the engine gives again on a still frame (its last outputs, when it holds)."""

    observes_frames: ClassVar[bool] = False
    """True: ``observe`` sees every frame of the stream, whether or not flow control lets
    the step run (an event sink's pre-roll)."""

    def observe(self, image: np.ndarray, frame: FrameState) -> None:  # noqa: B027 - optional
        """The stream's input frame, before any step runs (when ``observes_frames``)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """The stream ended: release what the block holds (a sink's thread). Idempotent."""


class FlowControlBlock(Block):
    """A block that decides whether its ``next_steps`` run for a frame, and outputs nothing
    (``continue_if``, ``delta_filter``, ``rate_limiter``)."""

    outputs: ClassVar[dict[str, str]] = {}

    @abstractmethod
    def decide(self, inputs: dict[str, Any], frame: FrameState) -> Verdict:
        """Per-frame fields in, the frame's verdict out."""

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return {}  # the engine asks ``decide``; a flow-control block has no outputs
