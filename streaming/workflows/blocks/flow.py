"""Flow control: whether a frame goes on to some steps. ``roboflow_core/continue_if@v1`` (a
condition in the reference's query language over ``evaluation_parameters``) and
``roboflow_core/delta_filter@v1`` (only when a value changed since the stream's last frame:
one event per line crossing, not one per frame) and ``roboflow_core/rate_limiter@v1`` (at most
once per ``cooldown_seconds``). Steps not let through, and every step reading
them, are skipped for the frame; their outputs are None."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import WorkflowCompilationError
from ..query import Env, QueryCompiler
from .base import BlockSettings, BuildContext, FlowControlBlock, FrameState, Verdict, setting
from .fields import IMAGE, FieldSpec, Takes

__all__ = ["ContinueIfBlock", "DeltaFilterBlock", "RateLimiterBlock"]


@dataclass(frozen=True, kw_only=True)
class ContinueIfSettings(BlockSettings):
    condition_statement: Any = setting(FieldSpec())
    evaluation_parameters: list[str] = setting(FieldSpec(default=None, takes=Takes.ENTRIES))
    next_steps: list[str] = setting(FieldSpec(takes=Takes.STEPS))
    stop_delay: float = setting(FieldSpec(default=0, type="number", minimum=0))


class ContinueIfBlock(FlowControlBlock):
    """``next_steps`` run for this frame only if ``condition_statement`` holds."""

    type_ids = ("roboflow_core/continue_if@v1", "ContinueIf")
    Settings: ClassVar[type[BlockSettings]] = ContinueIfSettings

    def __init__(self, name: str, config: ContinueIfSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._stop_delay = config.stop_delay
        self._held_since: float | None = None
        statement = config.condition_statement
        if not isinstance(statement, dict) or statement.get("type") != "StatementGroup":
            raise WorkflowCompilationError(
                f"step '{name}': condition_statement must be a StatementGroup"
            )
        # config holds the evaluation_parameters' names; their values come per frame.
        names = dict.fromkeys(config.evaluation_parameters)
        compiler = QueryCompiler(
            name, "condition_statement", names, "evaluation_parameters", detections=False
        )
        self._condition = compiler.group(statement)

    def decide(self, inputs: dict[str, Any], frame: FrameState) -> Verdict:
        values = inputs["evaluation_parameters"]
        now = time.monotonic()
        if self._condition(Env(values, frame.facts), None):
            if self._stop_delay > 0:
                self._held_since = now
            return Verdict.RUN
        # As the reference: a branch stays open stop_delay seconds after its condition last
        # held (no flicker when a count dips for a frame).
        held = self._held_since is not None and now - self._held_since <= self._stop_delay
        return Verdict.of(held)


@dataclass(frozen=True, kw_only=True)
class DeltaFilterSettings(BlockSettings):
    next_steps: list[str] = setting(FieldSpec(takes=Takes.STEPS))


class DeltaFilterBlock(FlowControlBlock):
    """``next_steps`` run for a frame only when ``value`` differs from the stream's last."""

    type_ids = ("roboflow_core/delta_filter@v1",)
    inputs = {
        "image": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),
        "value": FieldSpec(takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = DeltaFilterSettings

    def __init__(self, name: str, config: DeltaFilterSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._last: Any = None

    def decide(self, inputs: dict[str, Any], frame: FrameState) -> Verdict:
        # As the reference: the stream's first value counts as a change (unless None).
        value = inputs["value"]
        changed = value != self._last
        self._last = value
        return Verdict.of(changed)


@dataclass(frozen=True, kw_only=True)
class RateLimiterSettings(BlockSettings):
    cooldown_seconds: float = setting(FieldSpec(default=1.0, type="number", minimum=0))
    next_steps: list[str] = setting(FieldSpec(takes=Takes.STEPS))


class RateLimiterBlock(FlowControlBlock):
    """``next_steps`` run at most once per ``cooldown_seconds``: of a video file's own clock
    when ``video_reference_image`` is given (a file processed faster than real time is
    limited as if played), else of the wall clock."""

    type_ids = ("roboflow_core/rate_limiter@v1",)
    inputs = {
        "depends_on": FieldSpec(takes=Takes.FRAME),
        "video_reference_image": FieldSpec((IMAGE,), default=None, takes=Takes.FRAME),
    }
    Settings: ClassVar[type[BlockSettings]] = RateLimiterSettings

    def __init__(self, name: str, config: RateLimiterSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._cooldown = config.cooldown_seconds
        self._last: float | None = None

    def decide(self, inputs: dict[str, Any], frame: FrameState) -> Verdict:
        by_file = inputs.get("video_reference_image") is not None and frame.facts.by_file_clock
        now = frame.facts.seconds if by_file else time.monotonic()
        if self._last is not None and 0 <= now - self._last < self._cooldown:
            return Verdict.SKIP
        self._last = now
        return Verdict.RUN
