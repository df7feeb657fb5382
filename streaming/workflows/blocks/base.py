"""What every workflow block declares (fields, outputs) and implements (``run``)."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, cast

import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from ...events import EventRecord, EventRecorder
from ...inference.model import DetectionModel, StageTimer

__all__ = [
    "ANY",
    "CLASSIFICATION",
    "CONTINUE",
    "DETECTIONS",
    "DETECTION_KINDS",
    "IMAGE",
    "KEYPOINTS",
    "REQUIRED",
    "SEGMENTATION",
    "VIDEO_METADATA",
    "Block",
    "BuildContext",
    "FieldSpec",
    "FrameState",
    "WorkflowImage",
    "select",
]

IMAGE = "image"
DETECTIONS = "object_detection_prediction"
SEGMENTATION = "instance_segmentation_prediction"
KEYPOINTS = "keypoint_detection_prediction"
CLASSIFICATION = "classification_prediction"
DETECTION_KINDS = (DETECTIONS, SEGMENTATION, KEYPOINTS)
"""Every kind of detections (boxes, with masks or keypoints): what tracking, zones, filters
and drawing take."""
VIDEO_METADATA = "video_metadata"
ANY = "*"
REQUIRED = object()


def select(detections: sv.Detections, index: np.ndarray) -> sv.Detections:
    """The detections at ``index`` (a mask or positions), as a new object."""
    return cast(sv.Detections, detections[index])


@dataclass
class WorkflowImage:
    """An image flowing through a workflow: BGR uint8 pixels and where they came from."""

    numpy: np.ndarray
    parent_id: str


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
    """Where event sinks write (``STREAMING_SINK_DIR``); None: this stream keeps no files."""
    events: EventRecorder | None = None
    """The event store's queue (line crossings, zone entries, event sinks); None: not kept."""

    def event(self, kind: str, step: str, **fields: Any) -> None:
        """Stores one event of this stream (``EventRecord``'s fields), if events are kept."""
        if self.events is not None:
            stream = self.stream
            self.events.record(
                EventRecord(kind, stream["pipeline"], stream["source"], step, **fields)
            )


@dataclass
class FrameState:
    """Per-frame facts blocks may read, and the stage timer they add to."""

    timer: StageTimer = field(default_factory=dict)
    video: dict[str, Any] = field(default_factory=dict)
    """The frame's video metadata (``frame_timestamp``, ``fps``, ``frame_number``,
    ``comes_from_video_file``): what the reference's blocks read from their image."""

    def add_time(self, stage: str, started: float) -> None:
        """Adds the time since ``started`` (``time.perf_counter()``) to ``stage``, in ms."""
        self.timer[stage] = self.timer.get(stage, 0.0) + (time.perf_counter() - started) * 1000


FieldType = Literal["any", "number", "integer", "boolean", "string", "list", "object"]

_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "string": (str,),
    "list": (list, tuple),
    "object": (dict,),
}


@dataclass(frozen=True)
class FieldSpec:
    """One block field, declared once: what it takes (``type``, ``minimum``/``maximum``,
    ``choices``; for a selector, its ``kinds``) and its default. The compiler checks every
    value against it (``check``), literal or a parameter's, and ``/workflows/blocks`` and
    ``/workflows/blocks/describe`` show it (``describe``)."""

    kinds: tuple[str, ...] = (ANY,)
    default: Any = REQUIRED
    per_frame: bool = False
    """True when the field takes per-frame data (images, predictions) through a selector."""
    entries: bool = False
    """An object whose entries may each be a literal, a parameter or per-frame data (the
    reference's ``evaluation_parameters``, a webhook's ``json_payload``): the block's config
    holds the entries' names, and each frame's inputs the object with every entry's value."""
    steps: bool = False
    """A list of step selectors (``$steps.<name>``): the steps a flow-control block lets run
    or not (``next_steps``); the block gets their names."""
    type: FieldType = "any"
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    """An exclusive lower bound (``text_scale`` above 0)."""
    choices: tuple[Any, ...] | None = None
    nullable: bool = False
    """``null`` is taken too, though the default is a value (``custom_confidence``)."""
    description: str = ""

    def check(self, step: str, name: str, value: Any) -> Any:
        """``value`` if this field takes it (a number as a float, an integer as an int);
        else a 400 naming the step, the field and what it takes. ``None`` passes where the
        default is ``None`` or the field is ``nullable``."""
        if value is None and (self.default is None or self.nullable):
            return None
        if self.choices is not None:
            if value not in self.choices:
                raise WorkflowCompilationError(
                    f"step '{step}': {name} must be one of "
                    f"{', '.join(map(str, self.choices))}, got {value!r}"
                )
            return value
        if self.type == "any":
            return value
        kinds = _PYTHON_TYPES[self.type]
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            raise WorkflowCompilationError(
                f"step '{step}': {name} must be {self._what()}, got {value!r}"
            )
        if self.type not in ("number", "integer"):
            return value
        number = cast(float, value)
        if not self._in_range(number):
            raise WorkflowCompilationError(
                f"step '{step}': {name} must be {self._what()}, got {value!r}"
            )
        return float(number) if self.type == "number" else value

    def _in_range(self, value: float) -> bool:
        return (
            (self.minimum is None or value >= self.minimum)
            and (self.maximum is None or value <= self.maximum)
            and (self.above is None or value > self.above)
        )

    def _what(self) -> str:
        article = "an" if self.type in ("integer", "object") else "a"
        bounds = []
        if self.minimum is not None:
            bounds.append(f"at least {self.minimum:g}")
        if self.above is not None:
            bounds.append(f"above {self.above:g}")
        if self.maximum is not None:
            bounds.append(f"at most {self.maximum:g}")
        return f"{article} {self.type}" + (f" ({', '.join(bounds)})" if bounds else "")

    def describe(self) -> dict[str, Any]:
        """The field as ``/workflows/blocks/describe`` shows it."""
        if self.per_frame:
            takes = "selector"  # per-frame data: a step's output or an input
        elif self.entries:
            takes = "object of literals or selectors"
        elif self.steps:
            takes = "list of step selectors"
        else:
            takes = "literal or parameter"
        entry: dict[str, Any] = {
            "type": self.type,
            "takes": takes,
            "kinds": list(self.kinds),
            "required": self.default is REQUIRED,
        }
        if self.default is not REQUIRED:
            entry["default"] = self.default
        for key in ("minimum", "maximum", "above", "choices"):
            if (value := getattr(self, key)) is not None:
                entry[key] = list(value) if key == "choices" else value
        if self.description:
            entry["description"] = self.description
        return entry


def fraction(default: float) -> FieldSpec:
    """A number from 0 to 1 (a confidence, an IoU threshold)."""
    return FieldSpec(default=default, type="number", minimum=0.0, maximum=1.0)


CONTINUE = "__continue__"
"""A flow-control block's verdict among its outputs: False skips its ``next_steps`` (and
every step that reads them) for this frame; their outputs are None."""


class Block(ABC):
    """A workflow block: its type ids, fields (literal or per-frame) and outputs; built once
    per compiled workflow, run once per frame."""

    type_ids: ClassVar[tuple[str, ...]]
    fields: ClassVar[dict[str, FieldSpec]]
    url_fields: ClassVar[tuple[str, ...]] = ()
    """Fields naming a URL the server will connect to: checked against the egress policy
    before the stream starts (``workflow_urls``)."""
    outputs: ClassVar[dict[str, str]]
    """Output name -> kind."""

    def __init__(self, name: str, config: dict[str, Any], context: BuildContext) -> None:
        """``config`` holds every non-per-frame field, defaults filled in."""
        self.name = name

    @classmethod
    def outputs_of(cls, given: dict[str, Any]) -> dict[str, str]:
        """The outputs of a step with these fields as written (a block whose outputs are
        named by its configuration, like ``data_aggregator``, overrides this)."""
        return cls.outputs

    @classmethod
    def check_bindings(cls, name: str, bound: set[str]) -> None:
        """Raise ``WorkflowCompilationError`` when per-frame fields are bound inconsistently."""
        return

    @abstractmethod
    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        """Per-frame fields in, every declared output out."""

    observes_frames: ClassVar[bool] = False
    """True: ``observe`` sees every frame of the stream, whether or not flow control lets
    the step run (an event sink's pre-roll)."""

    def observe(self, image: np.ndarray, frame: FrameState) -> None:  # noqa: B027 - optional
        """The stream's input frame, before any step runs (when ``observes_frames``)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """The stream ended: release what the block holds (a sink's thread). Idempotent."""
