"""The one run path of a frame through a workflow, for sessions, pipelines and Ray actors.

- ``compile_config``: a request's workflow configuration (its specification, image and
  metadata input names, parameters) compiled once, on a thread; the caller owns the result
  and closes it.
- ``FrameFacts``: what is known of a frame when it is taken from its source (which stream,
  its number, when it came, the stream's rate, file or live). It travels with the frame's
  job; nothing about a frame is read from fields another thread may be changing.
- ``run_frame``: one frame through a compiled workflow, its failure caught and returned, as
  both a session (a notice to the client) and a pipeline (an event) report it.
- ``OutputNames``: a workflow's outputs without the workflow, for a viewer of a pipeline that
  runs elsewhere: it selects outputs, it never runs (or loads the models of) the workflow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from ..access import Role
from ..config import Settings
from ..egress import EgressPolicy
from ..protocol.messages import WorkflowConfiguration
from ..request_images import ImageLimits, load_stills
from .blocks.base import BuildContext, FrameState, VideoFacts
from .engine import CompiledWorkflow, compile_workflow
from .inner import budget_of, inlined
from .reach import check_roles, workflow_urls
from .spec import WorkflowSpec, parse_spec

__all__ = [
    "FrameFacts",
    "FrameRun",
    "OutputNames",
    "WorkflowOutputs",
    "compile_config",
    "require_roles",
    "run_frame",
    "run_frames",
]


async def compile_config(
    config: WorkflowConfiguration,
    specification: dict[str, Any] | WorkflowSpec,
    context: BuildContext,
    *,
    egress: EgressPolicy,
    batched: frozenset[str] = frozenset(),
    validating: bool = False,
) -> CompiledWorkflow:
    """``specification`` (already resolved from ``config``: inline or the library's),
    compiled with ``config``'s input names and parameters; raises the compiler's 400s.

    Every URL its steps would connect to (a webhook's, literal, a stored default or a
    parameter from whatever the request came through) passes ``egress`` first: the one
    check of workflow URLs, since every way to run a workflow compiles it here."""
    # Parsing and inlining cost what the caller wrote (inlining multiplies it): off the loop.
    spec, urls = await asyncio.to_thread(_prepared, specification, context, config)
    for where, url in urls:
        await egress.check_url(url, where)
    # Image inputs other than the frames' (a template to find) come as still images.
    stills = [
        i.name
        for i in spec.inputs
        if i.is_image and i.name != config.image_input_name and i.name not in batched
    ]
    parameters = config.workflows_parameters
    if stills and parameters:
        limits = ImageLimits.of(context.settings or Settings())
        parameters = await load_stills(parameters, stills, limits, egress)
    return await asyncio.to_thread(
        compile_workflow,
        spec,
        context,
        image_input_name=config.image_input_name,
        video_metadata_input_name=config.video_metadata_input_name,
        parameters=parameters,
        batched=batched,
        validating=validating,
    )


def _prepared(
    specification: dict[str, Any] | WorkflowSpec,
    context: BuildContext,
    config: WorkflowConfiguration,
) -> tuple[WorkflowSpec, list[tuple[str, str]]]:
    """The specification parsed and inlined within the server's budget, and the URLs its
    steps would connect to (a child's checked with the parent's)."""
    spec = specification if isinstance(specification, WorkflowSpec) else parse_spec(specification)
    spec = inlined(spec, context.workflows, budget_of(context))
    return spec, workflow_urls(spec, config.workflows_parameters)


async def require_roles(
    specification: dict[str, Any] | WorkflowSpec, role: Role, context: BuildContext
) -> None:
    """A 403 when ``specification`` (inner workflows inlined) has a step ``role`` may not
    run: for what compiles elsewhere (a pipeline's workflow, in a worker or a Ray actor)."""
    config = WorkflowConfiguration()
    spec, _ = await asyncio.to_thread(_prepared, specification, context, config)
    check_roles(spec, role)


class WorkflowOutputs(Protocol):
    """What choosing outputs needs of a workflow (a ``CompiledWorkflow`` is one)."""

    @property
    def output_names(self) -> list[str]: ...

    def image_outputs(self) -> list[str]: ...


@dataclass(frozen=True)
class OutputNames:
    """A workflow's outputs, known without compiling it here."""

    names: tuple[str, ...]
    images: tuple[str, ...]

    @classmethod
    def of(cls, workflow: WorkflowOutputs) -> OutputNames:
        return cls(tuple(workflow.output_names), tuple(workflow.image_outputs()))

    @property
    def output_names(self) -> list[str]:
        return list(self.names)

    def image_outputs(self) -> list[str]:
        return list(self.images)


@dataclass(frozen=True, slots=True)
class FrameFacts:
    """One frame as its source gave it; the workflow reads these as ``video_metadata``."""

    video_identifier: str
    """The stream: ``webrtc`` for a session, the source id for a pipeline."""
    frame_number: int
    received_at: datetime
    fps: float | None = None
    """The stream's own rate where known (a file's, or what the client declared)."""
    from_file: bool = False
    stream_restarts: int = 0
    """How often a camera has reconnected: a tracker starts afresh after a gap."""

    def typed(self) -> VideoFacts:
        """These facts as blocks read them (``FrameState.given``)."""
        return VideoFacts(
            frame_number=self.frame_number,
            timestamp=self.received_at,
            fps=float(self.fps) if self.fps and self.fps > 0 else None,
            from_file=self.from_file,
            stream_restarts=self.stream_restarts,
        )

    def video_metadata(self) -> dict[str, Any]:
        return {
            "video_identifier": self.video_identifier,
            "frame_number": self.frame_number,
            "frame_timestamp": self.received_at.isoformat(),
            "fps": self.fps,
            "measured_fps": None,
            "comes_from_video_file": self.from_file,
            "stream_restarts": self.stream_restarts,
        }


@dataclass
class FrameRun:
    """One frame's run: its outputs (empty when it failed), why it failed, stage times."""

    outputs: dict[str, Any]
    error: Exception | None
    state: FrameState


def run_frame(
    workflow: CompiledWorkflow,
    image: np.ndarray | Callable[[], np.ndarray],
    facts: FrameFacts,
    state: FrameState | None = None,
) -> FrameRun:
    """Blocking: on a worker thread. A failing frame is returned, never raised: one bad
    frame must end neither a session nor a pipeline."""
    state = state if state is not None else FrameState()
    state.given = facts.typed()
    try:
        outputs = workflow.run(image, facts.video_metadata(), state)
    except Exception as exc:
        return FrameRun({}, exc, state)
    return FrameRun(outputs, None, state)


def run_frames(
    workflow: CompiledWorkflow,
    images: list[np.ndarray],
    facts: list[FrameFacts],
    states: list[FrameState],
) -> list[FrameRun]:
    """Blocking: several frames run as one (an HTTP run's images through a workflow that
    collapses them, ``CompiledWorkflow.run_many``); a failure is every frame's."""
    for state, frame in zip(states, facts, strict=True):
        state.given = frame.typed()
    frames = [
        (image, frame.video_metadata(), state)
        for image, frame, state in zip(images, facts, states, strict=True)
    ]
    try:
        outputs = workflow.run_many(frames)
    except Exception as exc:
        return [FrameRun({}, exc, state) for state in states]
    return [FrameRun(out, None, state) for out, state in zip(outputs, states, strict=True)]
