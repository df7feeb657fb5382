"""Flow control: whether a frame goes on to some steps. ``roboflow_core/continue_if@v1`` (a
condition in the reference's query language over ``evaluation_parameters``) and
``roboflow_core/delta_filter@v1`` (only when a value changed since the stream's last frame:
one event per line crossing, not one per frame) and ``roboflow_core/rate_limiter@v1`` (at most
once per ``cooldown_seconds``). Steps not let through, and every step reading
them, are skipped for the frame; their outputs are None."""

from __future__ import annotations

import time
from typing import Any

from ...errors import WorkflowCompilationError
from ..query import Env, QueryCompiler
from .analytics import frame_seconds
from .base import CONTINUE, IMAGE, Block, BuildContext, FieldSpec, FrameState

__all__ = ["ContinueIfBlock", "DeltaFilterBlock", "RateLimiterBlock"]


class ContinueIfBlock(Block):
    """``next_steps`` run for this frame only if ``condition_statement`` holds."""

    type_ids = ("roboflow_core/continue_if@v1", "ContinueIf")
    fields = {
        "condition_statement": FieldSpec(),
        "evaluation_parameters": FieldSpec(default=None, entries=True),
        "next_steps": FieldSpec(steps=True),
        "stop_delay": FieldSpec(default=0, type="number", minimum=0),
    }
    outputs = {}  # none: it only decides what runs

    def __init__(self, name: str, config: dict[str, Any], context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._stop_delay = config["stop_delay"]
        self._held_since: float | None = None
        statement = config["condition_statement"]
        if not isinstance(statement, dict) or statement.get("type") != "StatementGroup":
            raise WorkflowCompilationError(
                f"step '{name}': condition_statement must be a StatementGroup"
            )
        # config holds the evaluation_parameters' names; their values come per frame.
        names = dict.fromkeys(config["evaluation_parameters"])
        compiler = QueryCompiler(
            name, "condition_statement", names, "evaluation_parameters", detections=False
        )
        self._condition = compiler.group(statement)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        values = inputs["evaluation_parameters"]
        now = time.monotonic()
        if self._condition(Env(values, frame.video), None):
            if self._stop_delay > 0:
                self._held_since = now
            return {CONTINUE: True}
        # As the reference: a branch stays open stop_delay seconds after its condition last
        # held (no flicker when a count dips for a frame).
        held = self._held_since is not None and now - self._held_since <= self._stop_delay
        return {CONTINUE: held}


class DeltaFilterBlock(Block):
    """``next_steps`` run for a frame only when ``value`` differs from the stream's last."""

    type_ids = ("roboflow_core/delta_filter@v1",)
    fields = {
        "image": FieldSpec((IMAGE,), default=None, per_frame=True),
        "value": FieldSpec(per_frame=True),
        "next_steps": FieldSpec(steps=True),
    }
    outputs = {}  # none: it only decides what runs

    def __init__(self, name: str, config: dict[str, Any], context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._last: Any = None

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        # As the reference: the stream's first value counts as a change (unless None).
        value = inputs["value"]
        changed = value != self._last
        self._last = value
        return {CONTINUE: changed}


class RateLimiterBlock(Block):
    """``next_steps`` run at most once per ``cooldown_seconds``: of a video file's own clock
    when ``video_reference_image`` is given (a file processed faster than real time is
    limited as if played), else of the wall clock."""

    type_ids = ("roboflow_core/rate_limiter@v1",)
    fields = {
        "cooldown_seconds": FieldSpec(default=1.0, type="number", minimum=0),
        "depends_on": FieldSpec(per_frame=True),
        "next_steps": FieldSpec(steps=True),
        "video_reference_image": FieldSpec((IMAGE,), default=None, per_frame=True),
    }
    outputs = {}  # none: it only decides what runs

    def __init__(self, name: str, config: dict[str, Any], context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._cooldown = config["cooldown_seconds"]
        self._last: float | None = None

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        by_file = inputs.get("video_reference_image") is not None and bool(
            frame.video.get("comes_from_video_file") and frame.video.get("fps")
        )
        now = frame_seconds(frame.video) if by_file else time.monotonic()
        if self._last is not None and 0 <= now - self._last < self._cooldown:
            return {CONTINUE: False}
        self._last = now
        return {CONTINUE: True}
