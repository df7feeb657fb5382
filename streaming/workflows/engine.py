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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..access import Forbidden, Role, block_role
from ..errors import WorkflowCompilationError
from .batches import MASKED, at, elements, shape, unmasked
from .binding import Compiler, Const, Entries, Ref, Source, leak_check, plan_dims
from .blocks import get_block
from .blocks.base import Block, BuildContext, FlowControlBlock, FrameState, Verdict, WorkflowImage
from .blocks.fields import IMAGE
from .dimensions import StepDims
from .inner import budget_of, inlined
from .spec import WorkflowSpec, parse_selector

__all__ = ["CompiledWorkflow", "compile_workflow", "workflow_urls"]


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


@dataclass
class _FrameRun:
    """One frame's values while the plan runs: each output at its dimension (nested lists
    below the frame's), where each step ran, and each flow-control step's verdicts."""

    levels: dict[str | None, int]
    values: dict[tuple[str | None, str], Any] = field(default_factory=dict)
    ran: dict[str, Any] = field(default_factory=dict)
    verdicts: dict[str, Any] = field(default_factory=dict)
    produced: dict[str, list[str]] = field(default_factory=dict)

    def whole(self, source: Source) -> Any:
        """A value with all its elements (nested lists for a value below the frame's)."""
        if isinstance(source, Const):
            return source.value
        if isinstance(source, Entries):
            values = {key: self.whole(entry) for key, entry in source.entries.items()}
            return list(values.values()) if source.listed else values
        return self.at(source, ())

    def at(self, source: Source, index: tuple[int, ...]) -> Any:
        """The value at one element (``index`` into the nesting); a value above it is the
        element's ancestor's (the frame's image for a crop), one below it the list of the
        element's children. ``MASKED`` where what it comes from did not run."""
        if isinstance(source, Const):
            return source.value
        if isinstance(source, Entries):  # its values as they are, MASKED included
            entries = {key: self.at(entry, index) for key, entry in source.entries.items()}
            return list(entries.values()) if source.listed else entries
        depth = self.levels[source.step] - 1
        if source.step is None or source.name != "*":
            return at(self.values[(source.step, source.name)], index, depth)
        if not index and depth > 0:  # the whole of a step below the frame: every output
            outputs = {k: self.values[(source.step, k)] for k in self.produced[source.step]}
            return _per_element(outputs, self.ran[source.step], depth)
        if at(self.ran[source.step], index, depth) is not True:
            return MASKED
        return {
            k: at(self.values[(source.step, k)], index, depth) for k in self.produced[source.step]
        }


def _per_element(outputs: dict[str, Any], ran: Any, depth: int) -> Any:
    """A step's outputs below the frame as the reference gives ``$steps.x.*``: a list per
    level of one dict of every output per element (all None where the step did not run)."""
    if depth == 0:
        if ran is not True:
            return dict.fromkeys(outputs)
        return {k: unmasked(v) for k, v in outputs.items()}
    if not isinstance(ran, list):  # what it would have run on did not exist
        return []
    return [
        _per_element(
            {k: v[i] if isinstance(v, list) else MASKED for k, v in outputs.items()},
            ran[i],
            depth - 1,
        )
        for i in range(len(ran))
    ]


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
    ) -> None:
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

    def run(
        self,
        image: np.ndarray | Callable[[], np.ndarray],
        video_metadata: dict[str, Any],
        frame: FrameState,
    ) -> dict[str, Any]:
        """``image``: the frame's pixels, or a function that makes them (called only if a
        step reads them)."""
        if self._started is None:  # the stream's own clock starts at its first frame
            self._started = video_metadata.get("frame_timestamp")
        video_metadata.setdefault("stream_started_at", self._started)
        frame.video = video_metadata
        state = _FrameRun(self._levels)
        root = WorkflowImage(image, self._image_input)
        state.values[(None, self._image_input)] = root
        state.values[(None, self._video_metadata_input)] = video_metadata
        for name, value in frame.inputs.items():
            state.values[(None, name)] = value
        for block in self._observers:
            block.observe(root.numpy, frame)
        for planned in self._steps:
            _run_step(planned, state, frame)
        return {name: unmasked(state.whole(src)) for name, src in self._outputs.items()}


def _run_step(planned: _PlannedStep, state: _FrameRun, frame: FrameState) -> None:
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


def _run_once(planned: _PlannedStep, state: _FrameRun, frame: FrameState) -> None:
    name, block = planned.block.name, planned.block
    inputs = _inputs_at(planned, state, ())
    if isinstance(block, FlowControlBlock):
        verdict = MASKED if inputs is None else block.decide(inputs, frame) is Verdict.RUN
        state.verdicts[name] = verdict
        state.ran[name] = True if inputs is not None else MASKED
        state.produced[name] = []
        return
    result = _held_or_run(block, inputs, frame) if inputs is not None else {}
    state.ran[name] = True if inputs is not None else MASKED
    produced = list(planned.output_names)
    produced.extend(k for k in result if k not in produced)
    state.produced[name] = produced
    for output in produced:
        state.values[(name, output)] = result.get(output) if inputs is not None else MASKED


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
    planned: _PlannedStep, state: _FrameRun, index: tuple[int, ...]
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


def workflow_urls(spec: WorkflowSpec, parameters: dict[str, Any] | None) -> list[tuple[str, str]]:
    """``(where, url)`` for every URL the steps of ``spec`` (parsed, inner workflows already
    inlined: what will be compiled) would make the server connect to, literal or a
    parameter's value, so the caller checks them before compiling."""
    values: dict[str, Any] = {i.name: i.default_value for i in spec.inputs}
    values |= parameters or {}
    found: list[tuple[str, str]] = []
    for step in spec.steps:
        block = get_block(step.type)
        if block is None:
            continue  # compiling says why
        given = step.fields()
        for url_field in block.url_fields:
            if isinstance(url := _given(given, url_field, values), str):
                found.append((f"step '{step.name}' {url_field}", url))
        for host_field, port_field, default_port in block.host_fields:
            host = _given(given, host_field, values)
            port = _given(given, port_field, values, default_port)
            if isinstance(host, str) and isinstance(port, int) and "/" not in host:
                shown = f"[{host}]" if ":" in host else host  # an IPv6 address
                found.append((f"step '{step.name}' {host_field}", f"smtp://{shown}:{port}"))
    return found


def _given(fields: dict[str, Any], field: str, values: dict[str, Any], default: Any = None) -> Any:
    """A step's field as written, or the value of the parameter it names."""
    value = fields.get(field, default)
    selector = parse_selector(value) if isinstance(value, str) else None
    return values.get(selector.name) if selector and selector.step is None else value


def check_roles(spec: WorkflowSpec, role: Role) -> None:
    """A 403 naming the first step (of an inlined ``spec``) whose block needs more than
    ``role`` (``access.BLOCKS``: the server's relay, disk, secrets)."""
    for step in spec.steps:
        needed, why = block_role(step.type, step.fields())
        if role < needed:
            raise Forbidden(
                f"step '{step.name}' ({step.type}) needs the {needed} role: {why}; this "
                f"caller is a {role}"
            )


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
    dims = plan_dims(order, bound)
    # Checked before any block loads a model.
    outputs, kinds, levels = _outputs(spec, compiler, dims)
    gated_by: dict[str, list[tuple[str, int]]] = {name: [] for name in order}
    for name in order:
        for gated in bound[name].gates:
            gated_by[gated].append((name, dims[name].level))
    planned: list[_PlannedStep] = []
    try:
        for name in order:
            step = bound[name]
            if step.unset:
                continue  # validating: it needs a value the definition leaves to the run
            block = step.block_cls(name, step.block_cls.settings(step.config), context)
            names = list(step.block_cls.outputs_of(compiler.given(name)))
            shaped_by = _shape(step.bindings, dims[name], dims, gated_by[name])
            planned.append(
                _PlannedStep(block, step.bindings, dims[name], names, gated_by[name], shaped_by)
            )
    except BaseException:
        # A later step failed: the blocks built so far (their models held, their threads
        # started) are released here, since no workflow will close them.
        for built in planned:
            built.block.close()
        raise
    return CompiledWorkflow(
        planned, outputs, kinds, levels, image_input_name, video_metadata_input_name
    )


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
