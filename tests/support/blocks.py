"""The block harness: one workflow block (or a whole specification) run over a sequence of
frames, without a session or a pipeline, as pipecat's ``run_test`` runs one processor.

- ``build(cls, **fields)``: a block as the compiler makes it (every literal field, defaults
  filled in, per-frame fields left to the frames).
- ``frame_at(seconds, **facts)``: the frame state a block sees at ``seconds`` into a stream,
  its ``video_metadata`` made by ``FrameFacts`` as sessions and pipelines make it.
- ``run_block(block, inputs)``: each item of ``inputs`` one frame's inputs; returns each
  frame's outputs (``decide_block``: a flow-control block's verdicts).
- ``compile_spec(spec, models=None)``: a specification compiled as a session compiles it.
- ``run_frames(spec, settings, image)``: a specification compiled with the server's settings
  and run on an image, its outputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from streaming.workflows import CompiledWorkflow, compile_workflow, parse_spec
from streaming.workflows.binding import settled
from streaming.workflows.blocks.base import Block, BuildContext, FrameState, Verdict
from streaming.workflows.blocks.fields import REQUIRED, Takes
from streaming.workflows.runner import FrameFacts

__all__ = [
    "STREAM_START",
    "build",
    "compile_spec",
    "decide_block",
    "frame_at",
    "run_block",
    "run_frames",
]

STREAM_START = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
"""When the harness's streams start (frame times count from here)."""


_ENTRIES = "_harness_entries"
"""Where ``build`` keeps an entries field's literal object, which ``run_block`` gives every
frame (the compiler passes such objects per frame, their names in the config)."""


def build(cls: type[Block], name: str = "step", **given: Any) -> Any:
    """A block as the compiler makes it: every field that is not per frame, defaults filled
    in, settled as the compiler settles them (``binding.settled``)."""
    values = {
        field: given.get(field, spec.default)
        for field, spec in cls.fields.items()
        if not spec.per_frame
    }
    assert REQUIRED not in values.values(), values
    config = {field: settled(cls.fields[field], name, field, v) for field, v in values.items()}
    entries = {
        field: values[field] or {}
        for field, spec in cls.fields.items()
        if spec.takes is Takes.ENTRIES
    }
    block = cls(name, cls.settings(config), BuildContext(None))  # type: ignore[arg-type]
    setattr(block, _ENTRIES, entries)
    return block


def frame_at(seconds: float, number: int = 1, **facts: Any) -> FrameState:
    """The state of frame ``number``, received ``seconds`` into the stream; ``facts``: the
    other ``FrameFacts`` fields (``fps``, ``from_file``, ``stream_restarts``)."""
    received = STREAM_START + timedelta(seconds=seconds)
    metadata = FrameFacts("harness", number, received, **facts).video_metadata()
    return FrameState(video=metadata)


def run_block(
    block: Any, inputs: Iterable[dict[str, Any]], fps: float = 2.0
) -> list[dict[str, Any]]:
    """Each item of ``inputs`` one frame, ``1 / fps`` s apart; each frame's outputs."""
    entries = getattr(block, _ENTRIES, {})
    return [
        block.run({**entries, **given}, frame_at(i / fps, i + 1))  # type: ignore[no-any-return]
        for i, given in enumerate(inputs)
    ]


def decide_block(block: Any, inputs: Iterable[dict[str, Any]], fps: float = 2.0) -> list[Verdict]:
    """A flow-control block's verdict for each frame, as ``run_block`` runs frames."""
    entries = getattr(block, _ENTRIES, {})
    return [
        block.decide({**entries, **given}, frame_at(i / fps, i + 1))
        for i, given in enumerate(inputs)
    ]


def run_frames(
    spec: dict[str, Any],
    settings: Any,
    image: Any,
    *,
    frames: int = 1,
    live: bool = False,
    **parameters: Any,
) -> list[dict[str, Any]]:
    """``spec`` compiled with the server's ``settings`` (a model registry of its own; ``live``:
    as a stream compiles it) and run on ``image`` ``frames`` times; each frame's outputs,
    the workflow closed (what it queued sent) before returning."""
    from streaming.inference.registry import ModelRegistry

    registry = ModelRegistry(settings)
    context = BuildContext(registry, settings=settings, live=live)
    workflow = compile_workflow(parse_spec(spec), context, parameters=parameters)
    try:
        return [workflow.run(image, {}, FrameState()) for _ in range(frames)]
    finally:
        workflow.close()
        registry.close()


def compile_spec(spec: dict[str, Any], models: Any = None) -> CompiledWorkflow:
    """``spec`` compiled as a session compiles it (``models``: a ``ModelRegistry``, for
    specifications with model steps)."""
    return compile_workflow(parse_spec(spec), BuildContext(models))
