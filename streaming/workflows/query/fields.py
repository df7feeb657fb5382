"""The pieces every operation is built from: its compiled types, the readers of its fields
(at compile time: a bad field is a 400 naming the step, the field and the operation) and the
checks of the values it is given (at run time: a wrong one fails the frame)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import numpy as np
import supervision as sv

from ..blocks.base import WorkflowImage, select
from .values import Env, Where, python

if TYPE_CHECKING:
    from .compiler import QueryCompiler

__all__ = [
    "Builder",
    "Op",
    "as_detections",
    "as_image",
    "as_key",
    "as_sequence",
    "as_string",
    "expect",
    "read_choice",
    "read_integer",
    "read_mapping",
    "read_number",
    "simple",
]


Op = Callable[[Any, Env], Any]
"""A compiled operation: the value it is given, and the frame's environment."""
Builder = Callable[[dict[str, Any], "QueryCompiler"], Op]
"""Reads an operation's fields at compile time and returns its ``Op``."""


# ------------------------------------------------------------------ field readers


def read_choice(
    node: dict[str, Any],
    key: str,
    choices: tuple[str, ...],
    where: Where,
    default: str | None = None,
) -> str:
    value = node.get(key, default)
    if value not in choices:
        raise where.fail(
            f"{node['type']}: {key} must be one of {', '.join(choices)}, got {value!r}"
        )
    return str(value)


def read_number(node: dict[str, Any], key: str, where: Where, default: Any = None) -> float:
    value = node.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise where.fail(f"{node['type']}: {key} must be a number, got {value!r}")
    return value


def read_integer(node: dict[str, Any], key: str, where: Where, default: Any = None) -> int:
    value = node.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.fail(f"{node['type']}: {key} must be an integer, got {value!r}")
    return value


def read_mapping(node: dict[str, Any], key: str, where: Where) -> dict[Any, Any]:
    value = node.get(key)
    if not isinstance(value, dict):
        raise where.fail(f"{node['type']}: {key} must be an object")
    return value


# ------------------------------------------------------------------ value checks


def expect(value: Any, kinds: type | tuple[type, ...], what: str, op: str, where: Where) -> Any:
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise where.error(f"{op} takes {what}, got a boolean")
    if not isinstance(value, kinds):
        raise where.error(f"{op} takes {what}, got {type(value).__name__}")
    return value


def as_detections(value: Any, op: str, where: Where) -> sv.Detections:
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], sv.Detections):
        detections, i = value  # one detection (a filter's operand): as detections of one
        return select(detections, np.array([i]))
    return expect(value, sv.Detections, "detections", op, where)


def as_sequence(value: Any, op: str, where: Where) -> list[Any]:
    if isinstance(value, sv.Detections):
        return [(value, i) for i in range(len(value))]
    if isinstance(value, dict):
        return list(value)
    return list(expect(value, (list, tuple, set, str), "a sequence", op, where))


def as_string(value: Any, op: str, where: Where) -> str:
    return expect(value, str, "a string", op, where)


def as_image(value: Any, op: str, where: Where) -> np.ndarray:
    if isinstance(value, WorkflowImage):
        return value.numpy
    return expect(value, np.ndarray, "an image", op, where)


def as_key(value: Any, op: str, where: Where) -> Hashable:
    value = python(value)
    if not isinstance(value, Hashable):
        raise where.error(f"{op}: {type(value).__name__} cannot be looked up")
    return value


def simple(function: Callable[[Any, Where], Any]) -> Builder:
    return lambda node, q: lambda value, env: function(value, q.where)
