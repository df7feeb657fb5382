"""Binding a workflow's steps: each field's value resolved to a constant (a literal, a
parameter's value) or a per-frame source (an input, a step's output), every selector checked,
the steps ordered by what they read. Every failure is a ``WorkflowCompilationError`` that
names the step, field, selector or block type."""

from __future__ import annotations

import dataclasses
import functools
import graphlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import WorkflowCompilationError
from ..suggest import did_you_mean, shown
from .blocks import BLOCKS, get_block
from .blocks.base import Block
from .blocks.fields import ANY, DETECTION_KINDS, DETECTIONS, REQUIRED, SECRET, FieldSpec, Takes
from .dimensions import CONSTANT, FRAME, Dim, StepDims, check_gate, step_dims
from .inputs import InputResolver
from .spec import (
    Selector,
    StepSpec,
    WorkflowSpec,
    parse_selector,
)
from .values import Const, Entries, Ref, Source, Unset

__all__ = [
    "DICT",
    "Bound",
    "Compiler",
    "Const",
    "Entries",
    "Ref",
    "Source",
    "plan_dims",
    "settled",
    "source_dims",
]

DICT = "dict"


_STEP_NAME = re.compile(r"^\$steps\.([A-Za-z0-9_-]+)$")


class _Field:
    """The field being bound: its step, name and declaration, and the step's bound record."""

    __slots__ = ("bound", "field", "name", "step")

    def __init__(self, step: str, name: str, field: FieldSpec, bound: Bound) -> None:
        self.step, self.name, self.field, self.bound = step, name, field, bound

    @property
    def where(self) -> str:
        """How messages name the field (made only for a message or a selector's lookup)."""
        return f"step '{self.step}' field '{self.name}'"


def settled(field: FieldSpec, step: str, name: str, value: Any) -> Any:
    """What a block's settings hold for a field that is not per frame, given its value (a
    literal or a parameter's; an object's entries or a list's items as resolved; the gated
    steps' names): the value checked, the entries' names, the items' count, or the names.
    The compiler and the block harness (``tests/support/blocks.py``) both settle through it."""
    if field.takes is Takes.ENTRIES:
        return sorted(value or {})
    if field.takes is Takes.LIST:
        return len(value) if value else None
    if field.takes is Takes.STEPS:
        return list(value)
    return field.check(step, name, value)


@dataclass
class Bound:
    """One step with its fields bound: constants in ``config``, per-frame values in
    ``bindings``, and the steps it reads."""

    block_cls: type[Block]
    config: dict[str, Any]
    bindings: dict[str, Source]
    depends: set[str]
    gates: list[str]
    unset: list[Unset] = dataclasses.field(default_factory=list)
    """Inputs with no value that a field needs (only while validating: a run refuses them)."""


class Compiler:
    """Bind each step's fields, resolve each selector, order the steps; every failure is a
    ``WorkflowCompilationError`` that names the step, field, selector or block type."""

    def __init__(
        self,
        spec: WorkflowSpec,
        image_input_name: str,
        video_metadata_input_name: str,
        parameters: dict[str, Any],
        *,
        batched: frozenset[str] = frozenset(),
        validating: bool = False,
    ) -> None:
        self._steps = {s.name: s for s in spec.steps}
        self._given = {s.name: s.fields() for s in spec.steps}
        """Each step's fields as written, read once (bindings and selectors read them often)."""
        self._spec_order = [s.name for s in spec.steps]
        self._inputs = InputResolver(
            spec,
            image_input_name,
            video_metadata_input_name,
            parameters,
            batched=batched,
            validating=validating,
        )
        self.validating = validating
        self._handing: set[str] = set()
        self._handed: dict[str, str] = {}
        """Each step's detections kind as handed on, once found (chains are read often)."""
        for step in spec.steps:
            if get_block(step.type) is None:
                # The fix first and short: the SDK and the page show a prefix of it.
                hint = did_you_mean(step.type, BLOCKS, limit=1)  # versions crowd the rest
                raise WorkflowCompilationError(
                    f"step '{shown(step.name)}': unknown block type '{shown(step.type)}'"
                    + (f"; {hint}" if hint else "")
                    + f" (GET /workflows/blocks/describe lists the {len(BLOCKS)} types)"
                )

    @property
    def input_dims(self) -> dict[str, Dim]:
        """Where the inputs of dimensionality 2 live (``inputs.deep_name`` -> their place)."""
        return dict(self._inputs.deep)

    def given(self, step: str) -> dict[str, Any]:
        """A step's fields as written."""
        return self._given[step]

    def bind(self, step: StepSpec) -> Bound:
        block_cls = get_block(step.type)
        assert block_cls is not None  # checked in __init__
        given = self._given[step.name]
        bound = Bound(block_cls, {}, {}, set(), [])
        block_cls.check_given(step.name, given)
        for field_name, field, binder in _binders_of(block_cls):
            value = given.get(field_name, field.default)
            if value is REQUIRED:
                raise WorkflowCompilationError(
                    f"step '{step.name}': field '{field_name}' is required"
                )
            binder(self, _Field(step.name, field_name, field, bound), value)
        block_cls.check_bindings(step.name, set(bound.bindings))
        return bound

    def _bind_steps(self, at: _Field, value: Any) -> None:
        at.bound.gates = self.step_names(at.step, value, at.where)
        at.bound.config[at.name] = settled(at.field, at.step, at.name, at.bound.gates)

    def _bind_collection(self, at: _Field, value: Any) -> None:
        """An object of entries, or a list of items: each resolved per frame."""
        listed = at.field.takes is Takes.LIST
        if listed and value is None and at.field.default is None:
            at.bound.config[at.name] = None  # an optional list not given (an alias's)
            return
        if listed:
            if not isinstance(value, list) or not value:
                raise WorkflowCompilationError(f"{at.where} must be a non-empty list")
            value = {str(i): item for i, item in enumerate(value)}
        entries = self.entries(at.step, value, at.where, at.bound.depends, at.field)
        at.bound.bindings[at.name] = entries
        # At compile, the block has the names (or, for a list, how many).
        at.bound.config[at.name] = settled(at.field, at.step, at.name, entries.entries)

    def _bind_literal(self, at: _Field, value: Any) -> None:
        """A literal or a parameter's value, into the block's settings."""
        selector = parse_selector(value)
        if selector is None:  # most fields: a literal, checked (``settled`` of a literal)
            literal = self.literal(value, at.where) if isinstance(value, dict) else value
            at.bound.config[at.name] = at.field.check(at.step, at.name, literal)
            return
        source, kind = self.resolve(selector, at.where)
        if kind == SECRET and not at.field.takes_secret():
            raise _leak(at.where, selector.raw)
        if not isinstance(source, Const):
            raise WorkflowCompilationError(
                f"{at.where} takes a literal or a parameter, not '{selector.raw}'"
            )
        if isinstance(source.value, Unset):
            self._unset(at, source.value)
            if at.field.default is not REQUIRED:  # the field's own default stands
                at.bound.config[at.name] = settled(at.field, at.step, at.name, at.field.default)
            return
        at.bound.config[at.name] = settled(at.field, at.step, at.name, source.value)

    def _unset(self, at: _Field, value: Unset) -> None:
        """A field fed an input that has no value: one with a default of its own takes that
        (the reference passes None, which its blocks read as "not given"); one that needs a
        value fails the run naming the input, and only a validation goes on without it."""
        if at.field.default is not REQUIRED:
            return
        if not self.validating:
            raise value.error(at.where)
        at.bound.unset.append(value)

    def _bind_frame(self, at: _Field, value: Any) -> None:
        """Per-frame data through a selector (or, where the field admits one, a literal or a
        parameter's value given every frame), into each frame's inputs."""
        field = at.field
        selector = parse_selector(value)
        if selector is None:
            if value is None and field.default is REQUIRED:
                raise WorkflowCompilationError(f"{at.where} is required, got null")
            if value is None:
                return  # an optional input not given
            if field.takes is not Takes.FRAME_OR_LITERAL:
                raise WorkflowCompilationError(f"{at.where} must be a selector, got {value!r}")
            literal = self.literal(value, at.where)
            at.bound.bindings[at.name] = Const(field.check(at.step, at.name, literal))
            return
        source, kind = self.resolve(selector, at.where)
        if kind == SECRET and not field.takes_secret():
            raise _leak(at.where, selector.raw)
        if isinstance(source, Const) and isinstance(source.value, Unset):
            self._unset(at, source.value)  # an optional input left unbound
            return
        if isinstance(source, Const):
            if field.takes is Takes.FRAME and ANY not in field.kinds and kind not in field.kinds:
                raise WorkflowCompilationError(f"{at.where} needs per-frame data, not a parameter")
            # A field of any kind takes a parameter's value each frame.
            at.bound.bindings[at.name] = Const(field.check(at.step, at.name, source.value))
            return
        if ANY not in field.kinds and kind not in field.kinds and kind != ANY:
            raise WorkflowCompilationError(
                f"{at.where} expects {' or '.join(field.kinds)}, but '{selector.raw}' is {kind}"
            )
        if selector.step is not None:
            if selector.step == at.step:
                raise WorkflowCompilationError(f"{at.where} refers to its own step")
            at.bound.depends.add(selector.step)
        at.bound.bindings[at.name] = source

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

    def entries(
        self, step: str, value: Any, where: str, depends: set[str], field: FieldSpec
    ) -> Entries:
        """An object whose entries are literals, parameters or per-frame data."""
        if value is None:
            return Entries({})
        if not isinstance(value, dict):
            raise WorkflowCompilationError(f"{where} must be an object")
        entries: dict[str, Ref | Const] = {}
        for key, item in value.items():
            selector = parse_selector(item)
            if selector is None:
                entries[str(key)] = Const(item)
                continue
            source, kind = self.resolve(selector, f"{where} entry '{key}'")
            if kind == SECRET and not field.takes_secret(str(key)):
                raise _leak(f"{where} entry '{key}'", selector.raw)
            assert not isinstance(source, Entries)
            if isinstance(source, Const) and isinstance(source.value, Unset):
                source = Const(None)  # the reference's None for an input not given
            if selector.step is not None:
                if selector.step == step:
                    raise WorkflowCompilationError(f"{where} entry '{key}' refers to its own step")
                depends.add(selector.step)
            entries[str(key)] = source
        return Entries(entries, field.takes is Takes.LIST)

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
            if not isinstance(source, Const):
                raise WorkflowCompilationError(
                    f"{where} entry '{key}' takes a literal or a parameter, not '{selector.raw}'"
                )
            resolved[key] = None if isinstance(source.value, Unset) else source.value
        return resolved

    def resolve(self, selector: Selector, where: str) -> tuple[Source, str]:
        """The value source and its kind; raises naming ``where`` on a dangling selector."""
        if selector.step is None:
            return self._inputs.resolve(selector.name, selector.raw, where)
        step = self._steps.get(selector.step)
        if step is None:
            raise WorkflowCompilationError(
                f"{where}: selector '{selector.raw}' names unknown step '{selector.step}'"
            )
        block_cls = get_block(step.type)
        assert block_cls is not None  # checked in __init__
        outputs = block_cls.outputs_of(self._given[selector.step])
        if selector.name == "*":
            return Ref(selector.step, "*"), SECRET if SECRET in outputs.values() else DICT
        if selector.name not in outputs:
            raise WorkflowCompilationError(
                f"{where}: step '{selector.step}' has no output '{selector.name}' "
                f"(outputs: {', '.join(outputs)})"
            )
        kind = outputs[selector.name]
        if block_cls.passes_kind is not None and kind == DETECTIONS:
            kind = self._handed_on(selector.step, block_cls.passes_kind, kind)
        return Ref(selector.step, selector.name), kind

    def _handed_on(self, step: str, field: str, declared: str) -> str:
        """The detections kind a step's input ``field`` is fed (what its output hands on),
        else the kind its output declares."""
        if step in self._handed:
            return self._handed[step]
        fed = parse_selector(self._given[step].get(field))
        if fed is None or fed.step is None or step in self._handing:
            return declared
        self._handing.add(step)  # a cycle (refused later, by order) ends here
        try:
            _, kind = self.resolve(fed, f"step '{step}' field '{field}'")
        finally:
            self._handing.discard(step)
        self._handed[step] = kind if kind in DETECTION_KINDS else declared
        return self._handed[step]

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


_Binder = Callable[[Compiler, _Field, Any], None]
_BINDERS: dict[Takes, _Binder] = {
    Takes.LITERAL: Compiler._bind_literal,
    Takes.FRAME: Compiler._bind_frame,
    Takes.FRAME_OR_LITERAL: Compiler._bind_frame,
    Takes.ENTRIES: Compiler._bind_collection,
    Takes.LIST: Compiler._bind_collection,
    Takes.STEPS: Compiler._bind_steps,
}
"""How each mode of field is bound: one function per mode, nothing else branches on it."""


@functools.cache
def _binders_of(block_cls: type[Block]) -> tuple[tuple[str, FieldSpec, _Binder], ...]:
    """Each field of a block with the function that binds it (looked up once per class)."""
    return tuple((name, spec, _BINDERS[spec.takes]) for name, spec in block_cls.fields.items())


def _leak(where: str, selector: str) -> WorkflowCompilationError:
    return WorkflowCompilationError(
        f"{where}: '{selector}' is a lent secret (environment_secrets_store); a secret goes "
        "only into a field that takes credentials (a password, an Authorization or API-key "
        "header), never into an output, a message, a URL or a payload"
    )


def leak_check(kind: str, where: str, selector: str) -> None:
    """A 400 when a value of ``kind`` is a secret going where secrets may not."""
    if kind == SECRET:
        raise _leak(where, selector)


def source_dims(source: Source, steps: dict[str, StepDims]) -> list[Dim]:
    """Where a bound value lives (an object field's entries: each of theirs)."""
    if isinstance(source, Const):
        return [CONSTANT]
    if isinstance(source, Entries):
        return [dim for entry in source.entries.values() for dim in source_dims(entry, steps)]
    if source.step is None:
        return [FRAME]
    return [steps[source.step].output]


def plan_dims(
    order: list[str], bound: dict[str, Bound], inputs: dict[str, Dim] | None = None
) -> dict[str, StepDims]:
    """Each step's level and lineage, in order (``inputs``: the inputs that live below the
    frame, as if steps had made them); flow control checked against what it gates. Raises
    ``WorkflowCompilationError`` naming the step whose inputs do not fit."""
    gates_of: dict[str, list[str]] = {name: [] for name in order}
    for name in order:
        for gated in bound[name].gates:
            gates_of[gated].append(name)
    dims = {name: StepDims(dim.level, (), {}, dim) for name, dim in (inputs or {}).items()}
    for name in order:
        step = bound[name]
        block = step.block_cls
        fields = {f: source_dims(source, dims) for f, source in step.bindings.items()}
        dims[name] = step_dims(
            name,
            fields,
            output_offset=block.output_dimension,
            input_offsets=block.input_offsets,
            reference=block.dimension_reference,
            gates=[dims[gate].lineage for gate in gates_of[name]],
        )
    for name in order:
        for gated in bound[name].gates:
            check_gate(gated, name, dims[name].lineage, dims[gated])
    return dims
