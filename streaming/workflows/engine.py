"""Compile a workflow once per session into an ordered plan; run the plan per frame.

Compilation resolves every selector, fills parameters (``WorkflowParameter`` defaults and
``workflows_parameters``) in as constants, loads models, orders steps by their dependencies
and fails with a message that names the offending step, selector, block type or model.
"""

from __future__ import annotations

import graphlib
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import WorkflowCompilationError
from .blocks import BLOCKS, get_block
from .blocks.base import (
    ANY,
    IMAGE,
    REQUIRED,
    VIDEO_METADATA,
    Block,
    BuildContext,
    FlowControlBlock,
    FrameState,
    Verdict,
    WorkflowImage,
)
from .spec import (
    IMAGE_INPUT_TYPES,
    PARAMETER_INPUT_TYPES,
    VIDEO_METADATA_INPUT_TYPES,
    Selector,
    StepSpec,
    WorkflowSpec,
    parse_selector,
)

__all__ = ["CompiledWorkflow", "compile_workflow", "workflow_urls"]

_DICT = "dict"


@dataclass(frozen=True)
class _Ref:
    """A per-frame value: the frame image, video metadata, or a step output (``*`` = all)."""

    step: str | None
    name: str


@dataclass(frozen=True)
class _Const:
    value: Any


@dataclass(frozen=True)
class _Entries:
    """An object field whose entries are each resolved per frame (``FieldSpec.entries``)."""

    entries: dict[str, _Ref | _Const]


_Source = _Ref | _Const | _Entries

_STEP_NAME = re.compile(r"^\$steps\.([A-Za-z0-9_-]+)$")


@dataclass
class _PlannedStep:
    block: Block
    bindings: dict[str, _Source]
    depends: set[str]
    gates: list[str]
    """The steps this one may skip (a flow-control block's ``next_steps``)."""


class CompiledWorkflow:
    """An ordered plan; ``run`` is called from worker threads, one frame at a time per session."""

    def __init__(
        self,
        steps: list[_PlannedStep],
        outputs: dict[str, _Source],
        output_kinds: dict[str, str],
        image_input: str,
        video_metadata_input: str,
    ) -> None:
        self._steps = steps
        self._outputs = outputs
        self.output_kinds = output_kinds
        self._image_input = image_input
        self._video_metadata_input = video_metadata_input
        self._observers = [s.block for s in steps if s.block.observes_frames]

    def close(self) -> None:
        """The stream is over: every block releases what it holds. Idempotent."""
        for planned in self._steps:
            planned.block.close()

    @property
    def output_names(self) -> list[str]:
        return list(self._outputs)

    def image_outputs(self) -> list[str]:
        return [name for name, kind in self.output_kinds.items() if kind == IMAGE]

    def run(
        self, image: np.ndarray, video_metadata: dict[str, Any], frame: FrameState
    ) -> dict[str, Any]:
        frame.video = video_metadata
        values: dict[tuple[str | None, str], Any] = {
            (None, self._image_input): WorkflowImage(image, self._image_input),
            (None, self._video_metadata_input): video_metadata,
        }
        step_outputs: dict[str, dict[str, Any]] = {}
        skipped: set[str] = set()
        for block in self._observers:
            block.observe(image, frame)

        def resolve(source: _Source) -> Any:
            if isinstance(source, _Const):
                return source.value
            if isinstance(source, _Entries):
                return {key: resolve(entry) for key, entry in source.entries.items()}
            if source.step in skipped:
                return None
            if source.step is not None and source.name == "*":
                return dict(step_outputs[source.step])
            return values[(source.step, source.name)]

        for planned in self._steps:
            name = planned.block.name
            if name in skipped or planned.depends & skipped:
                skipped.add(name)  # and, through depends, whatever reads it
                continue
            inputs = {field: resolve(src) for field, src in planned.bindings.items()}
            block = planned.block
            if isinstance(block, FlowControlBlock):
                produced: dict[str, Any] = {}
                if block.decide(inputs, frame) is Verdict.SKIP:
                    skipped.update(planned.gates)
            else:
                produced = block.run(inputs, frame)
            step_outputs[name] = produced
            for output, value in produced.items():
                values[(name, output)] = value
        return {name: resolve(src) for name, src in self._outputs.items()}


def workflow_urls(specification: Any, parameters: dict[str, Any] | None) -> list[tuple[str, str]]:
    """``(where, url)`` for every URL a workflow's steps would make the server connect to
    (literal, or a parameter's value), so the caller checks them before compiling. An
    unreadable specification yields none here: compiling it reports why."""
    if not isinstance(specification, dict):
        return []
    defaults: dict[Any, Any] = {
        i.get("name"): i.get("default_value")
        for i in specification.get("inputs") or []
        if isinstance(i, dict)
    }
    values: dict[Any, Any] = {**defaults, **(parameters or {})}
    found: list[tuple[str, str]] = []
    for step in specification.get("steps") or []:
        block = get_block(str(step.get("type"))) if isinstance(step, dict) else None
        for field in block.url_fields if block is not None else ():
            value = step.get(field)
            selector = parse_selector(value) if isinstance(value, str) else None
            if selector is not None and selector.step is None:
                value = values.get(selector.name)
            if isinstance(value, str):
                found.append((f"step '{step.get('name')}' {field}", value))
    return found


def compile_workflow(
    spec: WorkflowSpec,
    context: BuildContext,
    *,
    image_input_name: str = "image",
    video_metadata_input_name: str = "video_metadata",
    parameters: dict[str, Any] | None = None,
) -> CompiledWorkflow:
    """Blocking (it loads models): call it off the event loop."""
    compiler = _Compiler(spec, image_input_name, video_metadata_input_name, parameters or {})
    bound = {step.name: compiler.bind(step) for step in spec.steps}
    for name, step in bound.items():  # a gated step runs after the step that gates it
        for gated in step.gates:
            bound[gated].depends.add(name)
    order = compiler.order({name: b.depends for name, b in bound.items()})
    outputs, kinds = _outputs(spec, compiler)  # checked before any block loads a model
    planned: list[_PlannedStep] = []
    try:
        for name in order:
            step = bound[name]
            block = step.block_cls(name, step.block_cls.settings(step.config), context)
            planned.append(_PlannedStep(block, step.bindings, step.depends, step.gates))
    except BaseException:
        # A later step failed: the blocks built so far (their models held, their threads
        # started) are released here, since no workflow will close them.
        for built in planned:
            built.block.close()
        raise
    return CompiledWorkflow(planned, outputs, kinds, image_input_name, video_metadata_input_name)


def _outputs(spec: WorkflowSpec, compiler: _Compiler) -> tuple[dict[str, _Source], dict[str, str]]:
    outputs: dict[str, _Source] = {}
    kinds: dict[str, str] = {}
    for output in spec.outputs:
        selector = parse_selector(output.selector)
        if selector is None:
            raise WorkflowCompilationError(
                f"output '{output.name}': selector must start with $, got {output.selector!r}"
            )
        outputs[output.name], kinds[output.name] = compiler.resolve(
            selector, f"output '{output.name}'"
        )
    return outputs, kinds


@dataclass
class _Bound:
    """One step with its fields bound: constants in ``config``, per-frame values in
    ``bindings``, and the steps it reads."""

    block_cls: type[Block]
    config: dict[str, Any]
    bindings: dict[str, _Source]
    depends: set[str]
    gates: list[str]


class _Compiler:
    """Bind each step's fields, resolve each selector, order the steps; every failure is a
    ``WorkflowCompilationError`` that names the step, field, selector or block type."""

    def __init__(
        self,
        spec: WorkflowSpec,
        image_input_name: str,
        video_metadata_input_name: str,
        parameters: dict[str, Any],
    ) -> None:
        self._inputs = {i.name: i for i in spec.inputs}
        self._steps = {s.name: s for s in spec.steps}
        self._spec_order = [s.name for s in spec.steps]
        self._image = image_input_name
        self._video_metadata = video_metadata_input_name
        self._parameters = parameters
        image = self._inputs.get(image_input_name)
        # A workflow that reads no image at all (only parameters) runs on each frame too.
        reads_images = any(i.type in IMAGE_INPUT_TYPES for i in spec.inputs)
        if (image is None and reads_images) or (
            image is not None and image.type not in IMAGE_INPUT_TYPES
        ):
            raise WorkflowCompilationError(
                f"workflow has no image input named '{image_input_name}' (image_input_name)"
            )
        for step in spec.steps:
            if get_block(step.type) is None:
                raise WorkflowCompilationError(
                    f"step '{step.name}': unknown block type '{step.type}' "
                    f"(supported: {', '.join(sorted(BLOCKS))})"
                )

    def bind(self, step: StepSpec) -> _Bound:
        block_cls = get_block(step.type)
        assert block_cls is not None  # checked in __init__
        given = step.fields()
        bound = _Bound(block_cls, {}, {}, set(), [])
        for field_name, field in block_cls.fields.items():
            where = f"step '{step.name}' field '{field_name}'"
            value = given.get(field_name, field.default)
            if value is REQUIRED:
                raise WorkflowCompilationError(
                    f"step '{step.name}': field '{field_name}' is required"
                )
            if field.steps:
                bound.gates = self.step_names(step.name, value, where)
                bound.config[field_name] = list(bound.gates)
                continue
            if field.entries:
                entries = self.entries(step.name, value, where, bound.depends)
                bound.bindings[field_name] = entries
                bound.config[field_name] = sorted(entries.entries)  # the names, at compile
                continue
            selector = parse_selector(value)
            if selector is None:
                if field.per_frame and value is not None:
                    raise WorkflowCompilationError(f"{where} must be a selector, got {value!r}")
                if not field.per_frame:
                    literal = self.literal(value, where)
                    bound.config[field_name] = field.check(step.name, field_name, literal)
                continue
            source, kind = self.resolve(selector, where)
            if isinstance(source, _Const):
                if field.per_frame and ANY not in field.kinds:
                    raise WorkflowCompilationError(f"{where} needs per-frame data, not a parameter")
                checked = field.check(step.name, field_name, source.value)
                if field.per_frame:  # a field of any kind takes a parameter's value each frame
                    bound.bindings[field_name] = _Const(checked)
                else:
                    bound.config[field_name] = checked
                continue
            if not field.per_frame:
                raise WorkflowCompilationError(
                    f"{where} takes a literal or a parameter, not '{selector.raw}'"
                )
            if ANY not in field.kinds and kind not in field.kinds and kind != ANY:
                raise WorkflowCompilationError(
                    f"{where} expects {' or '.join(field.kinds)}, but '{selector.raw}' is {kind}"
                )
            if selector.step is not None:
                if selector.step == step.name:
                    raise WorkflowCompilationError(f"{where} refers to its own step")
                bound.depends.add(selector.step)
            bound.bindings[field_name] = source
        block_cls.check_bindings(step.name, set(bound.bindings))
        return bound

    def step_names(self, step: str, value: Any, where: str) -> list[str]:
        """``["$steps.a", ...]``: the names, each an existing step other than ``step``."""
        if not isinstance(value, list):
            raise WorkflowCompilationError(f"{where} must be a list of $steps.<name> selectors")
        names = []
        for item in value:
            match = _STEP_NAME.match(item) if isinstance(item, str) else None
            if match is None:
                raise WorkflowCompilationError(f"{where}: {item!r} is not a $steps.<name> selector")
            name = match.group(1)
            if name not in self._steps or name == step:
                raise WorkflowCompilationError(f"{where}: {item!r} names no other step")
            names.append(name)
        return names

    def entries(self, step: str, value: Any, where: str, depends: set[str]) -> _Entries:
        """An object whose entries are literals, parameters or per-frame data."""
        if value is None:
            return _Entries({})
        if not isinstance(value, dict):
            raise WorkflowCompilationError(f"{where} must be an object")
        entries: dict[str, _Ref | _Const] = {}
        for key, item in value.items():
            selector = parse_selector(item)
            if selector is None:
                entries[str(key)] = _Const(item)
                continue
            source, _ = self.resolve(selector, f"{where} entry '{key}'")
            assert not isinstance(source, _Entries)
            if selector.step is not None:
                if selector.step == step:
                    raise WorkflowCompilationError(f"{where} entry '{key}' refers to its own step")
                depends.add(selector.step)
            entries[str(key)] = source
        return _Entries(entries)

    def literal(self, value: Any, where: str) -> Any:
        """A literal field's value. An object's entries may name parameters (``$inputs.x``),
        as the reference's ``operations_parameters`` do; never per-frame data."""
        if not isinstance(value, dict):
            return value
        resolved = {}
        for key, item in value.items():
            selector = parse_selector(item)
            if selector is None:
                resolved[key] = item
                continue
            source, _ = self.resolve(selector, f"{where} entry '{key}'")
            if not isinstance(source, _Const):
                raise WorkflowCompilationError(
                    f"{where} entry '{key}' takes a literal or a parameter, not '{selector.raw}'"
                )
            resolved[key] = source.value
        return resolved

    def resolve(self, selector: Selector, where: str) -> tuple[_Source, str]:
        """The value source and its kind; raises naming ``where`` on a dangling selector."""
        if selector.step is None:
            return self._resolve_input(selector, where)
        step = self._steps.get(selector.step)
        if step is None:
            raise WorkflowCompilationError(
                f"{where}: selector '{selector.raw}' names unknown step '{selector.step}'"
            )
        block_cls = get_block(step.type)
        assert block_cls is not None  # checked in __init__
        if selector.name == "*":
            return _Ref(selector.step, "*"), _DICT
        outputs = block_cls.outputs_of(step.fields())
        if selector.name not in outputs:
            raise WorkflowCompilationError(
                f"{where}: step '{selector.step}' has no output '{selector.name}' "
                f"(outputs: {', '.join(outputs)})"
            )
        return _Ref(selector.step, selector.name), outputs[selector.name]

    def _resolve_input(self, selector: Selector, where: str) -> tuple[_Source, str]:
        spec_input = self._inputs.get(selector.name)
        if spec_input is None:
            raise WorkflowCompilationError(
                f"{where}: selector '{selector.raw}' names no workflow input"
            )
        if spec_input.type in IMAGE_INPUT_TYPES:
            if selector.name != self._image:
                raise WorkflowCompilationError(
                    f"{where}: image input '{selector.name}' is never fed; frames go to "
                    f"'{self._image}'"
                )
            return _Ref(None, selector.name), IMAGE
        if spec_input.type in VIDEO_METADATA_INPUT_TYPES:
            return _Ref(None, self._video_metadata), VIDEO_METADATA
        if spec_input.type in PARAMETER_INPUT_TYPES:
            if selector.name in self._parameters:
                return _Const(self._parameters[selector.name]), ANY
            if "default_value" in spec_input.model_fields_set:
                return _Const(spec_input.default_value), ANY
            raise WorkflowCompilationError(
                f"{where}: parameter '{selector.name}' has no default_value and is not "
                "given in workflows_parameters"
            )
        raise WorkflowCompilationError(
            f"{where}: input '{selector.name}' has unsupported type '{spec_input.type}'"
        )

    def order(self, depends: dict[str, set[str]]) -> list[str]:
        """Each step after the steps it reads; steps that are ready together keep the
        specification's order, so a plan never depends on hashing."""
        sorter = graphlib.TopologicalSorter(depends)
        try:
            sorter.prepare()
        except graphlib.CycleError as exc:
            cycle = exc.args[1] if len(exc.args) > 1 else []
            raise WorkflowCompilationError(
                f"steps {sorted(set(cycle))} depend on each other in a cycle"
            ) from None
        position = {name: i for i, name in enumerate(self._spec_order)}
        order: list[str] = []
        while sorter.is_active():
            ready = sorted(sorter.get_ready(), key=position.__getitem__)
            order.extend(ready)
            sorter.done(*ready)
        return order
