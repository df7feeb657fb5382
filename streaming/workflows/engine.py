"""Compile a workflow once per session into an ordered plan; run the plan per frame.

Compilation (``binding.py``) resolves every selector, fills parameters
(``WorkflowParameter`` defaults and ``workflows_parameters``) in as constants, orders steps
by their dependencies, works out each step's dimension (``dimensions.py``: once per frame, or
once per crop of a step that made crops) and loads models; it fails with a message that
names the offending step, selector, block type or model. Running a step runs it on every
element at its dimension (``batches.py``), all of a frame's at once (``Block.run_batch``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import WorkflowCompilationError
from .batches import MASKED, at, elements, shape, unmasked
from .binding import Compiler, Entries, Ref, Source, leak_check, plan_dims
from .blocks.base import Block, BuildContext, FlowControlBlock, FrameState, Verdict, WorkflowImage
from .blocks.fields import IMAGE
from .dimensions import Dim, StepDims
from .frame_values import FrameValues
from .inner import budget_of, inlined
from .inputs import VALUE, deep_name
from .reach import check_roles
from .spec import WorkflowSpec, parse_selector

__all__ = ["CompiledWorkflow", "compile_workflow"]


@dataclass
class _PlannedStep:
    block: Block
    bindings: dict[str, Source]
    dims: StepDims
    output_names: list[str]
    gated_by: list[tuple[str, int]]
    """The flow-control steps that decide whether it runs, each with its dimension."""
    shape: Ref | str | None
    """A value whose nesting is that of the elements it runs on, or the gate whose verdicts
    have it (a step that reads only constants); None: once per frame."""
    once: bool = False
    """It reads nothing of any frame and nothing gates it: in a run of several frames
    (``run_many``) it runs once, as the reference runs a step of non-batch data."""


class CompiledWorkflow:
    """An ordered plan; ``run`` is called from worker threads, one frame at a time per session."""

    def __init__(
        self,
        steps: list[_PlannedStep],
        outputs: dict[str, Source],
        output_kinds: dict[str, str],
        output_levels: dict[str, int],
        image_input: str,
        video_metadata_input: str,
        deep: dict[str, Dim] | None = None,
    ) -> None:
        """``deep``: the inputs of dimensionality 2 (``inputs.deep_name``), and where."""
        self._steps = steps
        self._outputs = outputs
        self.output_kinds = output_kinds
        self.output_levels = output_levels
        """Each output's dimension: 1 one value per frame, 2 a list (one per crop), ..."""
        self._image_input = image_input
        self._video_metadata_input = video_metadata_input
        self._observers = [s.block for s in steps if s.block.observes_frames]
        self._started: str | None = None
        """The first frame's ``frame_timestamp``: when the stream started, for blocks that
        count time since (``ExtractFrameMetadata``'s ``seconds_since_start``)."""
        self._levels: dict[str | None, int] = {None: 1}
        self._levels.update({name: dim.level for name, dim in (deep or {}).items()})
        self._levels.update({s.block.name: s.dims.output.level for s in steps})

    def close(self) -> None:
        """The stream is over: every block releases what it holds. Idempotent."""
        for planned in self._steps:
            planned.block.close()

    @property
    def holds_when_still(self) -> bool:
        """Whether a step on the whole frame holds its outputs on a still frame (a model):
        only then does a motion gate save anything."""
        return any(s.block.holds_when_still and s.dims.level == 1 for s in self._steps)

    @property
    def output_names(self) -> list[str]:
        return list(self._outputs)

    def image_outputs(self) -> list[str]:
        """The outputs that are one image per frame (what can be shown as video)."""
        return [
            name
            for name, kind in self.output_kinds.items()
            if kind == IMAGE and self.output_levels[name] == 1
        ]

    @property
    def collapses_frames(self) -> bool:
        """Whether a step collapses the run's frames (``dimension_collapse`` of per-frame
        data): then a run of several images runs them together (``run_many``)."""
        return any(s.dims.level == 0 for s in self._steps)

    def run(
        self,
        image: np.ndarray | Callable[[], np.ndarray],
        video_metadata: dict[str, Any],
        frame: FrameState,
    ) -> dict[str, Any]:
        """``image``: the frame's pixels, or a function that makes them (called only if a
        step reads them)."""
        (outputs,) = self.run_many([(image, video_metadata, frame)])  # a stream's run: a frame
        return outputs

    def run_many(
        self,
        frames: Sequence[tuple[np.ndarray | Callable[[], np.ndarray], dict[str, Any], FrameState]],
    ) -> list[dict[str, Any]]:
        """Several frames as one run (an HTTP run's images), step by step: each step on
        every frame in order, a step collapsing the frames once on all of them, and a step
        that reads nothing of any frame once for the run; each frame's outputs."""
        states = [self._start(image, video, frame) for image, video, frame in frames]
        states_of = [frame for _, _, frame in frames]
        for planned in self._steps:
            if planned.dims.level == 0:
                _run_across(planned, states, states_of)
            elif planned.once:
                _run_step(planned, states[0], states_of[0])
                for state in states[1:]:
                    state.copy_step(states[0], planned.block.name)
            else:
                for state, frame in zip(states, states_of, strict=True):
                    _run_step(planned, state, frame)
        return [self._finish(state) for state in states]

    def _start(
        self,
        image: np.ndarray | Callable[[], np.ndarray],
        video_metadata: dict[str, Any],
        frame: FrameState,
    ) -> FrameValues:
        if self._started is None:  # the stream's own clock starts at its first frame
            self._started = video_metadata.get("frame_timestamp")
        video_metadata.setdefault("stream_started_at", self._started)
        frame.video = video_metadata
        state = FrameValues(self._levels)
        root = WorkflowImage(image, self._image_input)
        state.values[(None, self._image_input)] = root
        state.values[(None, self._video_metadata_input)] = video_metadata
        for name, value in frame.inputs.items():
            deep = deep_name(name)
            if deep not in self._levels:
                state.values[(None, name)] = value
                continue
            state.values[(deep, VALUE)] = value  # a list per image: as a step's crops
            state.ran[deep] = [True] * len(value)
            state.produced[deep] = [VALUE]
        for block in self._observers:
            block.observe(root.numpy, frame)
        return state

    def _finish(self, state: FrameValues) -> dict[str, Any]:
        return {name: unmasked(state.whole(src)) for name, src in self._outputs.items()}


def _run_across(planned: _PlannedStep, states: list[FrameValues], frames: list[FrameState]) -> None:
    """A step collapsing the run's frames: each collapsed field gets the list of every
    frame's value (None where a gate stopped it or its step did not run), and the step runs
    once; its outputs are every frame's (the reference's non-batch data)."""
    block = planned.block
    assert not isinstance(block, FlowControlBlock)  # no flow-control block collapses
    first = states[0]
    runs = all(
        at(first.verdicts[gate], (), 0) is True for gate, level in planned.gated_by if level == 0
    )
    inputs: dict[str, Any] = {}
    for field_name, source in planned.bindings.items():
        if planned.dims.depths.get(field_name, 0) != 1:
            inputs[field_name] = unmasked(first.at(source, ()))  # the same for every frame
            continue
        inputs[field_name] = [
            None if _stopped(planned, state) else unmasked(state.at(source, ())) for state in states
        ]
    result = block.run(inputs, frames[-1]) if runs else None
    for state in states:
        _record(planned, state, result)


def _stopped(planned: _PlannedStep, state: FrameValues) -> bool:
    """Whether a per-frame gate of a step collapsing the frames stopped this frame."""
    return any(state.verdicts[gate] is not True for gate, level in planned.gated_by if level == 1)


def _run_step(planned: _PlannedStep, state: FrameValues, frame: FrameState) -> None:
    """Runs a step on every element of its dimension in this frame, at once."""
    name, block = planned.block.name, planned.block
    depth = planned.dims.level - 1
    if depth == 0:  # once per frame, as most steps run: no elements to walk
        _run_once(planned, state, frame)
        return
    if isinstance(planned.shape, str):  # where its gate decided
        structure = state.verdicts[planned.shape]
    else:
        structure = state.whole(planned.shape) if planned.shape is not None else None
    positions: list[tuple[int, ...]] = []
    batch: list[dict[str, Any]] = []
    for index in elements(structure, depth):
        inputs = _inputs_at(planned, state, index)
        if inputs is not None:
            positions.append(index)
            batch.append(inputs)
    if isinstance(block, FlowControlBlock):
        verdicts = {
            i: block.decide(inputs, frame) is Verdict.RUN
            for i, inputs in zip(positions, batch, strict=True)
        }
        state.verdicts[name] = shape(structure, depth, lambda i: verdicts.get(i, MASKED))
        state.ran[name] = shape(structure, depth, lambda i: True if i in verdicts else MASKED)
        state.produced[name] = []
        return
    results = dict(zip(positions, block.run_batch(batch, frame) if batch else [], strict=True))
    state.ran[name] = shape(structure, depth, lambda i: True if i in results else MASKED)
    produced = list(planned.output_names)
    for result in results.values():
        produced.extend(k for k in result if k not in produced)
    state.produced[name] = produced
    for output in produced:
        state.values[(name, output)] = shape(structure, depth, _picker(results, output))


def _run_once(planned: _PlannedStep, state: FrameValues, frame: FrameState) -> None:
    name, block = planned.block.name, planned.block
    inputs = _inputs_at(planned, state, ())
    if isinstance(block, FlowControlBlock):
        verdict = MASKED if inputs is None else block.decide(inputs, frame) is Verdict.RUN
        state.verdicts[name] = verdict
        state.ran[name] = True if inputs is not None else MASKED
        state.produced[name] = []
        return
    result = _held_or_run(block, inputs, frame) if inputs is not None else None
    _record(planned, state, result)


def _record(planned: _PlannedStep, state: FrameValues, result: dict[str, Any] | None) -> None:
    """A step's outputs where it ran once for the frame (None: it did not run)."""
    name = planned.block.name
    state.ran[name] = True if result is not None else MASKED
    produced = list(planned.output_names)
    produced.extend(k for k in result or () if k not in produced)
    state.produced[name] = produced
    for output in produced:
        state.values[(name, output)] = result.get(output) if result is not None else MASKED


def _held_or_run(block: Block, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
    """The block's outputs. On a still frame (motion gating: nothing moved since its last
    run), a block that holds (a model on the frame) gives a copy of its last outputs instead
    of running: a parked car keeps its box, so its tracker id and time in zone go on."""
    if not block.holds_when_still:
        return block.run(inputs, frame)
    if frame.still and block.held is not None:
        frame.held_steps += 1
        return copy.deepcopy(block.held)  # a later step may change what it is given
    result = block.run(inputs, frame)
    block.held = copy.deepcopy(result)
    return result


def _unmasked_items(value: dict[str, Any] | list[Any]) -> dict[str, Any] | list[Any]:
    if isinstance(value, dict):
        return {key: unmasked(item) for key, item in value.items()}
    return [unmasked(item) for item in value]


def _picker(results: dict[tuple[int, ...], dict[str, Any]], output: str) -> Any:
    return lambda i: results[i].get(output) if i in results else MASKED


def _inputs_at(
    planned: _PlannedStep, state: FrameValues, index: tuple[int, ...]
) -> dict[str, Any] | None:
    """The step's inputs at one element; None when it does not run there (flow control
    stopped it, or an input is missing and the block does not take missing inputs)."""
    level = planned.dims.level
    child_gates = []
    for gate, gate_level in planned.gated_by:
        if gate_level > level:  # decided per child: those it stopped are missing
            child_gates.append(at(state.verdicts[gate], index, level))
        elif at(state.verdicts[gate], index, gate_level - 1) is not True:
            return None
    inputs: dict[str, Any] = {}
    for name, source in planned.bindings.items():
        value = state.at(source, index)
        if planned.dims.depths.get(name, 0) == 1:
            children = value if isinstance(value, list) else []
            for verdicts in child_gates:
                children = [
                    c if isinstance(verdicts, list) and verdicts[k] is True else None
                    for k, c in enumerate(children)
                ]
            inputs[name] = unmasked(children)
            continue
        if isinstance(source, Entries):  # an object or list of values: each may be missing
            items = value.values() if isinstance(value, dict) else value
            if any(v is MASKED for v in items) and not planned.block.accepts_empty:
                return None
            inputs[name] = _unmasked_items(value)
            continue
        deep = isinstance(source, Ref) and state.levels[source.step] > 1
        if value is MASKED or (value is None and deep):
            if not planned.block.accepts_empty:
                return None
            value = None
        inputs[name] = unmasked(value)
    return inputs


def compile_workflow(
    spec: WorkflowSpec,
    context: BuildContext,
    *,
    image_input_name: str = "image",
    video_metadata_input_name: str = "video_metadata",
    parameters: dict[str, Any] | None = None,
    batched: frozenset[str] = frozenset(),
    validating: bool = False,
) -> CompiledWorkflow:
    """Blocking (it loads models): call it off the event loop. ``batched``: the inputs given
    one value per image (an HTTP run's lists, in ``FrameState.inputs``); ``validating``: the
    definition is checked without its inputs' values (``inputs.py``), and a step that needs
    one of them is checked but not built, so the result is never run."""
    spec = inlined(spec, context.workflows, budget_of(context))
    check_roles(spec, context.role)  # before anything is built
    compiler = Compiler(
        spec,
        image_input_name,
        video_metadata_input_name,
        parameters or {},
        batched=batched,
        validating=validating,
    )
    bound = {step.name: compiler.bind(step) for step in spec.steps}
    for name, step in bound.items():  # a gated step runs after the step that gates it
        for gated in step.gates:
            bound[gated].depends.add(name)
    order = compiler.order({name: b.depends for name, b in bound.items()})
    dims = plan_dims(order, bound, compiler.input_dims)
    # Checked before any block loads a model.
    outputs, kinds, levels = _outputs(spec, compiler, dims)
    gated_by: dict[str, list[tuple[str, int]]] = {name: [] for name in order}
    for name in order:
        for gated in bound[name].gates:
            gated_by[gated].append((name, dims[name].level))
    planned: list[_PlannedStep] = []
    collapses = any(d.level == 0 for d in dims.values())
    try:
        for name in order:
            step = bound[name]
            if step.unset:
                continue  # validating: it needs a value the definition leaves to the run
            block = step.block_cls(name, step.block_cls.settings(step.config), context)
            names = list(step.block_cls.outputs_of(compiler.given(name)))
            shaped_by = _shape(step.bindings, dims[name], dims, gated_by[name])
            once = (  # only a run of frames together (a collapse of them) asks
                collapses
                and dims[name].level == 1
                and not gated_by[name]
                and not _reads_frames(step.bindings, dims)
            )
            planned.append(
                _PlannedStep(
                    block, step.bindings, dims[name], names, gated_by[name], shaped_by, once
                )
            )
    except BaseException:
        # A later step failed: the blocks built so far (their models held, their threads
        # started) are released here, since no workflow will close them.
        for built in planned:
            built.block.close()
        raise
    return CompiledWorkflow(
        planned,
        outputs,
        kinds,
        levels,
        image_input_name,
        video_metadata_input_name,
        compiler.input_dims,
    )


def _reads_frames(bindings: dict[str, Source], dims: dict[str, StepDims]) -> bool:
    """Whether any bound value is a frame's (not a constant, not a value of the whole run)."""
    for source in bindings.values():
        refs = source.entries.values() if isinstance(source, Entries) else [source]
        for ref in refs:
            if isinstance(ref, Ref) and (ref.step is None or dims[ref.step].output.level > 0):
                return True
    return False


def _shape(
    bindings: dict[str, Source],
    dims: StepDims,
    steps: dict[str, StepDims],
    gates: list[tuple[str, int]],
) -> Ref | str | None:
    """A bound value nested as the step's elements are (any at their dimension or below
    will do: the compiler checked that they share a lineage), else the gate at its level."""
    if dims.level == 1:
        return None
    for source in bindings.values():
        refs = source.entries.values() if isinstance(source, Entries) else [source]
        deep = [r for r in refs if isinstance(r, Ref) and r.step is not None]
        for ref in deep:
            if steps[str(ref.step)].output.level >= dims.level:
                return ref
    for gate, level in gates:
        if level == dims.level:
            return gate
    raise AssertionError("a step below the frame reads no value below it")  # compiler-checked


def _outputs(
    spec: WorkflowSpec, compiler: Compiler, dims: dict[str, StepDims]
) -> tuple[dict[str, Source], dict[str, str], dict[str, int]]:
    outputs: dict[str, Source] = {}
    kinds: dict[str, str] = {}
    levels: dict[str, int] = {}
    for output in spec.outputs:
        selector = parse_selector(output.selector)
        if selector is None:
            raise WorkflowCompilationError(
                f"output '{output.name}': selector must start with $, got {output.selector!r}"
            )
        source, kinds[output.name] = compiler.resolve(selector, f"output '{output.name}'")
        leak_check(kinds[output.name], f"output '{output.name}'", output.selector)
        outputs[output.name] = source
        step = source.step if isinstance(source, Ref) else None
        levels[output.name] = dims[step].output.level if step is not None else 1
    return outputs, kinds, levels
