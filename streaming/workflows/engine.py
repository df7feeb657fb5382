"""Compile a workflow once per session into an ordered plan; run the plan per frame.

Compilation resolves every selector, fills parameters (``WorkflowParameter`` defaults and
``workflows_parameters``) in as constants, loads models, orders steps by their dependencies
and fails with a message that names the offending step, selector, block type or model.
"""

from __future__ import annotations

import graphlib
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
    FrameState,
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

__all__ = ["CompiledWorkflow", "compile_workflow"]

_DICT = "dict"


@dataclass(frozen=True)
class _Ref:
    """A per-frame value: the frame image, video metadata, or a step output (``*`` = all)."""

    step: str | None
    name: str


@dataclass(frozen=True)
class _Const:
    value: Any


_Source = _Ref | _Const


@dataclass
class _PlannedStep:
    block: Block
    bindings: dict[str, _Source]


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

        def resolve(source: _Source) -> Any:
            if isinstance(source, _Const):
                return source.value
            if source.step is not None and source.name == "*":
                return dict(step_outputs[source.step])
            return values[(source.step, source.name)]

        for planned in self._steps:
            inputs = {name: resolve(src) for name, src in planned.bindings.items()}
            produced = planned.block.run(inputs, frame)
            step_outputs[planned.block.name] = produced
            for name, value in produced.items():
                values[(planned.block.name, name)] = value
        return {name: resolve(src) for name, src in self._outputs.items()}


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
    planned = [
        _PlannedStep(bound[name].block_cls(name, bound[name].config, context), bound[name].bindings)
        for name in compiler.order({name: b.depends for name, b in bound.items()})
    ]
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
    return CompiledWorkflow(planned, outputs, kinds, image_input_name, video_metadata_input_name)


@dataclass
class _Bound:
    """One step with its fields bound: constants in ``config``, per-frame values in
    ``bindings``, and the steps it reads."""

    block_cls: type[Block]
    config: dict[str, Any]
    bindings: dict[str, _Source]
    depends: set[str]


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
        if image is None or image.type not in IMAGE_INPUT_TYPES:
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
        bound = _Bound(block_cls, {}, {}, set())
        for field_name, field in block_cls.fields.items():
            where = f"step '{step.name}' field '{field_name}'"
            value = given.get(field_name, field.default)
            if value is REQUIRED:
                raise WorkflowCompilationError(
                    f"step '{step.name}': field '{field_name}' is required"
                )
            selector = parse_selector(value)
            if selector is None:
                if field.per_frame and value is not None:
                    raise WorkflowCompilationError(f"{where} must be a selector, got {value!r}")
                if not field.per_frame:
                    bound.config[field_name] = self.literal(value, where)
                continue
            source, kind = self.resolve(selector, where)
            if isinstance(source, _Const):
                if field.per_frame:
                    raise WorkflowCompilationError(f"{where} needs per-frame data, not a parameter")
                bound.config[field_name] = source.value
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
        if selector.name not in block_cls.outputs:
            raise WorkflowCompilationError(
                f"{where}: step '{selector.step}' has no output '{selector.name}' "
                f"(outputs: {', '.join(block_cls.outputs)})"
            )
        return _Ref(selector.step, selector.name), block_cls.outputs[selector.name]

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
