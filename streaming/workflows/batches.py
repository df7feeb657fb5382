"""Values at a level below the frame's, as the engine holds them while a frame runs: nested
lists, one level of nesting per dimension a step raised (a list of crops per frame, a list
of a crop's slices per crop, ...). An element that is not there (flow control stopped it, or
its crop was empty) is ``MASKED`` or None, and every step downstream skips it, as the
reference does."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["MASKED", "at", "elements", "is_masked", "shape", "unmasked"]


class _Masked:
    """A step's output where the step did not run (its element was stopped or missing)."""

    def __repr__(self) -> str:
        return "MASKED"


MASKED: Any = _Masked()


def is_masked(value: Any) -> bool:
    return value is MASKED


def unmasked(value: Any) -> Any:
    """What a block or a workflow output sees: None where nothing ran, at any depth."""
    if value is MASKED:
        return None
    if isinstance(value, list):
        return [unmasked(v) for v in value]
    return value


def at(value: Any, index: tuple[int, ...], depth: int) -> Any:
    """The element of ``value`` (nested ``depth`` lists deep) at ``index[:depth]``;
    ``MASKED`` where a list on the way is missing (an element masked above)."""
    for i in index[:depth]:
        if value is MASKED or value is None or not isinstance(value, list):
            return MASKED
        value = value[i]
    return value


def elements(structure: Any, depth: int) -> Iterator[tuple[int, ...]]:
    """Every index ``depth`` lists deep into ``structure``, in order; a masked list has
    none."""
    if depth == 0:
        yield ()
        return
    if not isinstance(structure, list):
        return
    for i, child in enumerate(structure):
        for rest in elements(child, depth - 1):
            yield (i, *rest)


def shape(structure: Any, depth: int, leaf: Callable[[tuple[int, ...]], Any]) -> Any:
    """Nested lists with ``structure``'s shape ``depth`` deep, each element ``leaf(index)``;
    where ``structure`` is masked, so is the result."""

    def build(node: Any, level: int, prefix: tuple[int, ...]) -> Any:
        if level == 0:
            return leaf(prefix)
        if not isinstance(node, list):
            return MASKED
        return [build(child, level - 1, (*prefix, i)) for i, child in enumerate(node)]

    return build(structure, depth, ())
