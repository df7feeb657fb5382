"""Batch dimensions, worked out when a workflow is compiled: where each value lives and at
which level each step runs, with the reference's rules for what may meet what.

A frame's values live at level 1 (one per frame); collapsing them gives one value for the
whole run (level 0, like a constant: the reference's non-batch data). A step that raises the
dimension (a crop per detection, a slice per tile) puts its outputs one level deeper: a list
per frame, one element per crop; a step that collapses it (``dimension_collapse``) brings a
list of elements back up as one value. Every other step runs once per element of its inputs'
level. A value's lineage names the steps that raised it, outermost first: two inputs at one
level must come from the same raises (crops of one detector, not of two), and an input one
level up must be their parent. Constants (literals, parameters) live at level 0 and go with
any element.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import WorkflowCompilationError

__all__ = ["CONSTANT", "FRAME", "Dim", "StepDims", "check_gate", "step_dims"]


@dataclass(frozen=True)
class Dim:
    """Where a value lives: ``lineage`` None for a constant, else the steps that raised it."""

    lineage: tuple[str, ...] | None

    @property
    def level(self) -> int:
        """0: a constant; 1: one per frame; 2: one per element of a raise (a crop); ..."""
        return 0 if self.lineage is None else 1 + len(self.lineage)


CONSTANT = Dim(None)
FRAME = Dim(())


@dataclass(frozen=True)
class StepDims:
    """How a step runs: once per element at ``level`` (1: once per frame), each field
    taking its value at that element (depth 0) or the list of the element's children (depth
    1); its outputs live at ``output``."""

    level: int
    """0: once for the run's frames together (it collapses them); 1: once per frame; ..."""
    lineage: tuple[str, ...]
    """The lineage of the elements it runs on."""
    depths: dict[str, int]
    output: Dim
    children: tuple[str, ...] | None = None
    """The lineage of the children its depth-1 fields list, if it has such fields."""


def step_dims(
    step: str,
    fields: dict[str, list[Dim]],
    *,
    output_offset: int = 0,
    input_offsets: dict[str, int] | None = None,
    reference: str | None = None,
    gates: list[tuple[str, ...]] | None = None,
) -> StepDims:
    """The level a step runs at, from the places of its fields' per-frame values (an
    object field's entries are several values). ``output_offset``: +1 for a step that raises
    the dimension, -1 for one that collapses it; ``input_offsets`` and ``reference``: a step
    that takes some fields one level below another (the reference's dimensionality offsets
    and reference property); ``gates``: the lineages its flow-control steps decide on.
    Raises ``WorkflowCompilationError`` naming the step and the fields that do not fit."""
    offsets = input_offsets or {}
    lineages = {name: _one_lineage(step, name, dims) for name, dims in fields.items()}
    batch = {name: lineage for name, lineage in lineages.items() if lineage is not None}
    if not batch:
        if output_offset < 0:
            raise WorkflowCompilationError(
                f"step '{step}' collapses a dimension, but none of its inputs has one to "
                "collapse (it takes only constants)"
            )
        # Only constants: it runs where its gates decide (the reference's control-flow
        # lineage), once per element a gate let through; else once per frame.
        lineage = _gated_lineage(step, gates or [])
        raised = (*lineage, step) if output_offset > 0 else lineage
        return StepDims(1 + len(lineage), lineage, {}, Dim(raised))
    levels = {name: 1 + len(lineage) for name, lineage in batch.items()}
    if reference is not None and reference in batch:
        base = levels[reference] - offsets.get(reference, 0)
        depths = {name: offsets.get(name, 0) - offsets.get(reference, 0) for name in batch}
        for name, depth in depths.items():
            expected = base + depth
            if expected < 1 or levels[name] != expected:
                raise WorkflowCompilationError(
                    f"step '{step}': the data fed into '{name}' is at dimension "
                    f"{levels[name]}, but this step expects it at {max(expected, 1)} "
                    f"(one level {'below' if depth else 'with'} '{reference}')"
                )
        level = base
    else:
        if len(set(levels.values())) > 1:
            raise WorkflowCompilationError(
                f"step '{step}': its inputs are at different dimensions {levels} (one per "
                "frame is 1, one per crop 2, ...): a step takes all of them at one level"
            )
        (input_level,) = set(levels.values())
        if output_offset < 0:
            if input_level == 1:  # the run's frames: one in a stream, each image over HTTP
                return StepDims(0, (), dict.fromkeys(batch, 1), CONSTANT, ())
            level, depths = input_level - 1, dict.fromkeys(batch, 1)
        else:
            level, depths = input_level, dict.fromkeys(batch, 0)
    lineage, children = _element_lineage(step, batch, depths)
    raised = (*lineage, step) if output_offset > 0 else lineage
    return StepDims(level, lineage, depths, Dim(raised), children)


def _one_lineage(step: str, name: str, dims: list[Dim]) -> tuple[str, ...] | None:
    """The lineage of one field's per-frame values (None when it has only constants)."""
    found = {d.lineage for d in dims if d.lineage is not None}
    if len(found) > 1:
        raise WorkflowCompilationError(
            f"step '{step}': the values of '{name}' come from different raises of the "
            f"dimension ({_describe(found)}): one field takes values of one lineage"
        )
    return next(iter(found), None)


def _element_lineage(
    step: str, batch: dict[str, tuple[str, ...]], depths: dict[str, int]
) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """The lineage of the elements the step runs on, and of their children where a field
    takes them; every field's must agree."""
    at_level = {batch[name] for name, depth in depths.items() if depth == 0}
    below = {batch[name] for name, depth in depths.items() if depth == 1}
    for group in (at_level, below):
        if len(group) > 1:
            raise WorkflowCompilationError(
                f"step '{step}': its inputs at one dimension come from different raises "
                f"({_describe(group)}): crops of one step cannot be matched to another's"
            )
    if below:
        (child,) = below
        parent = child[:-1]
        if at_level and next(iter(at_level)) != parent:
            raise WorkflowCompilationError(
                f"step '{step}': its inputs do not share a lineage: "
                f"{_describe(below)} is not made from {_describe(at_level)}"
            )
        return parent, child
    (lineage,) = at_level
    return lineage, None


def _gated_lineage(step: str, gates: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The lineage of a step that reads no per-frame data: its deepest gate's (each other
    gate's must lead to it, which ``check_gate`` checks)."""
    if not gates:
        return ()
    deepest = max(len(g) for g in gates)
    found = {g for g in gates if len(g) == deepest}
    if len(found) > 1:
        raise WorkflowCompilationError(
            f"step '{step}' reads no per-frame data and is gated by steps deciding on "
            f"different elements ({_describe(found)}): one of them must decide where it runs"
        )
    return next(iter(found))


def check_gate(step: str, gate: str, gate_lineage: tuple[str, ...], dims: StepDims) -> None:
    """A flow-control step's verdicts can only gate a step whose elements (or the children
    it takes) come from the elements it decided on: the reference refuses the rest, since
    the step would never run."""
    reachable = [dims.lineage] if dims.children is None else [dims.lineage, dims.children]
    if not any(lineage[: len(gate_lineage)] == gate_lineage for lineage in reachable):
        raise WorkflowCompilationError(
            f"step '{step}' is gated by '{gate}', which decides on data "
            f"({_describe([gate_lineage])}) that is not what '{step}' runs on "
            f"({_describe([dims.lineage])}): the step would never run"
        )


def _describe(lineages: Iterable[tuple[str, ...]]) -> str:
    names = [" > ".join(("frame", *lineage)) for lineage in lineages]
    return ", ".join(sorted(names))
