"""Statements, operands and operation chains of the reference's query language, compiled into
Python functions once per step.

- statements: ``StatementGroup`` (``and`` / ``or``) of ``BinaryStatement``s,
  ``UnaryStatement``s and nested groups, each with ``negate``;
- operands: ``StaticOperand`` (a value) and ``DynamicOperand`` (a named operand, or ``_``:
  the detection under test in a detections filter), each through its own ``operations``;
- comparators ``BINARY`` and unary operators ``UNARY`` below.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import cv2
import numpy as np

from .operations import OPERATIONS, Op
from .values import Env, Row, Where, python

__all__ = ["BINARY", "UNARY", "Condition", "QueryCompiler", "named_chains"]

Condition = Callable[[Env, Row | None], bool]
"""A compiled statement: true or false for one evaluation (and the detection under test)."""
Operand = Callable[[Env, Row | None], Any]


def _number(a: Any) -> bool:
    return isinstance(a, int | float) and not isinstance(a, bool)


def _ordered(test: Callable[[float, float], bool]) -> Callable[[Any, Any], bool]:
    return lambda a, b: _number(a) and _number(b) and test(a, b)


def _in_zone(point: Any, zone: Any) -> bool:
    """The reference's ``(Detection) in zone``: the point strictly inside the polygon."""
    try:
        polygon = np.asarray(zone, dtype=np.float32).reshape(-1, 2)
        x, y = (float(c) for c in point)
    except (TypeError, ValueError):
        return False
    return len(polygon) >= 3 and cv2.pointPolygonTest(polygon, (x, y), False) > 0


def _sequence(value: Any) -> bool:
    return isinstance(value, list | tuple | set)


BINARY: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b,
    "(Number) ==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "(Number) !=": lambda a, b: a != b,
    "(Number) >": _ordered(lambda a, b: a > b),
    "(Number) >=": _ordered(lambda a, b: a >= b),
    "(Number) <": _ordered(lambda a, b: a < b),
    "(Number) <=": _ordered(lambda a, b: a <= b),
    "(Number) in range": lambda a, b: (
        _number(a) and _sequence(b) and len(b) == 2 and b[0] <= a <= b[1]
    ),
    "in (Sequence)": lambda a, b: _sequence(b) and a in b,
    "any in (Sequence)": lambda a, b: _sequence(a) and _sequence(b) and any(x in b for x in a),
    "all in (Sequence)": lambda a, b: _sequence(a) and _sequence(b) and all(x in b for x in a),
    "(String) startsWith": lambda a, b: isinstance(a, str) and a.startswith(str(b)),
    "(String) endsWith": lambda a, b: isinstance(a, str) and a.endswith(str(b)),
    "(String) contains": lambda a, b: isinstance(a, str) and str(b) in a,
    "(Detection) in zone": _in_zone,
}
"""Every comparator of the reference; one that cannot compare its operands (a number with a
string) is false rather than an error, so one odd value does not fail a frame."""

UNARY: dict[str, Callable[[Any], bool]] = {
    "Exists": lambda a: a is not None,
    "DoesNotExist": lambda a: a is None,
    "(Boolean) is True": lambda a: a is True,
    "(Boolean) is False": lambda a: a is False,
    "(Sequence) is empty": lambda a: a is not None and len(a) == 0,
    "(Sequence) is not empty": lambda a: a is not None and len(a) > 0,
}


def _false_when_incomparable(test: Callable[[Env, Row | None], Any]) -> Condition:
    """``test`` as a condition that is false where its values do not compare (a number with
    a string; ``len`` of a number: neither empty nor not) rather than failing the frame."""

    def run(env: Env, row: Row | None) -> bool:
        try:
            return bool(test(env, row))
        except TypeError:
            return False

    return run


DETECTION = "_"
"""The operand name of the detection under test in a detections filter."""


class QueryCompiler:
    """Compiles one step's expressions. ``names``: the operands a ``DynamicOperand`` may name
    (None: any, checked when evaluated); ``names_field``: the block field that gives them;
    ``detections``: whether ``_`` (the detection under test) exists here."""

    def __init__(
        self,
        step: str,
        field: str,
        names: Collection[str] | None = None,
        names_field: str = "operations_parameters",
        detections: bool = False,
    ) -> None:
        self.where = Where(step, field)
        self.names = None if names is None else set(names)
        self.names_field = names_field
        self.detections = detections

    def fail(self, what: str) -> Exception:
        return self.where.fail(what)

    def kind(self, node: Any, what: str) -> str:
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise self.fail(f"{what} must be an object with a 'type'")
        return str(node["type"])

    # --------------------------------------------------------------- operations

    def chain(self, operations: Any, what: str = "operations") -> Op:
        """A list of operations as one function of ``(value, env)``."""
        if operations is None:
            operations = []
        if not isinstance(operations, list):
            raise self.fail(f"{what} must be a list")
        steps = []
        for node in operations:
            kind = self.kind(node, "an operation")
            build = OPERATIONS.get(kind)
            if build is None:
                raise self.fail(
                    f"operation '{kind}' is not supported here (supported: "
                    f"{', '.join(sorted(OPERATIONS))})"
                )
            steps.append(build(node, self))
        if not steps:
            return lambda value, env: value
        if len(steps) == 1:
            return steps[0]

        def run(value: Any, env: Env) -> Any:
            for step in steps:
                value = step(value, env)
            return value

        return run

    def nested_detection_filter(self, statement: Any) -> Condition:
        """A ``DetectionsFilter`` operation's statement: ``_`` is each detection in turn."""
        inner = QueryCompiler(
            self.where.step, self.where.field, self.names, self.names_field, detections=True
        )
        return inner.statement(statement)

    # --------------------------------------------------------------- statements

    def statement(self, node: Any) -> Condition:
        kind = self.kind(node, "a statement")
        if kind == "BinaryStatement":
            test = self.binary(node)
        elif kind == "UnaryStatement":
            test = self.unary(node)
        elif kind == "StatementGroup":
            statements = node.get("statements")
            if not isinstance(statements, list) or not statements:
                raise self.fail("a StatementGroup needs at least one statement")
            parts = [self.statement(s) for s in statements]
            operator = node.get("operator", "or")
            if operator not in ("and", "or"):
                raise self.fail(f"StatementGroup operator must be 'and' or 'or', got {operator!r}")
            combine = all if operator == "and" else any
            test = lambda env, row: combine(p(env, row) for p in parts)  # noqa: E731
        else:
            raise self.fail(
                f"statement type '{kind}' is not supported here (supported: "
                "BinaryStatement, UnaryStatement, StatementGroup)"
            )
        if node.get("negate", False) is True:
            return lambda env, row: not test(env, row)
        return test

    # The old name: blocks call ``group`` for their top-level StatementGroup.
    group = statement

    def _operator(self, node: dict[str, Any], key: str, known: dict[str, Any], what: str) -> Any:
        named = node.get(key)
        name = named.get("type") if isinstance(named, dict) else None
        if name not in known:
            raise self.fail(
                f"{what} {name!r} is not supported here (supported: {', '.join(known)})"
            )
        return known[name]

    def unary(self, node: dict[str, Any]) -> Condition:
        test = self._operator(node, "operator", UNARY, "operator")
        value = self.operand(node.get("operand"))
        return _false_when_incomparable(lambda env, row: test(value(env, row)))

    def binary(self, node: dict[str, Any]) -> Condition:
        compare = self._operator(node, "comparator", BINARY, "comparator")
        left = self.operand(node.get("left_operand"))
        right = self.operand(node.get("right_operand"))
        return _false_when_incomparable(lambda env, row: compare(left(env, row), right(env, row)))

    def operand(self, node: Any) -> Operand:
        kind = self.kind(node, "an operand")
        operations = self.chain(node.get("operations"), "an operand's operations")
        if kind == "StaticOperand":
            value = node.get("value")
            return lambda env, row: python(operations(value, env))
        if kind != "DynamicOperand":
            raise self.fail(
                f"operand type '{kind}' is not supported here "
                "(supported: StaticOperand, DynamicOperand)"
            )
        name = node.get("operand_name", DETECTION)
        if name == DETECTION and self.detections:
            return lambda env, row: python(operations(row, env))
        if self.names is not None and name not in self.names:
            raise self.fail(
                f"operand '{name}' is not in {self.names_field} (has {sorted(self.names)})"
            )
        where = self.where

        def named(env: Env, row: Row | None) -> Any:
            if name not in env.values:
                raise where.error(f"operand '{name}' is not given")
            return python(operations(env.values[name], env))

        return named


def named_chains(
    step: str, values_field: str, operations_field: str, names: Collection[str], operations: Any
) -> dict[str, Op]:
    """The reference's ``*_operations`` of a block whose ``values_field`` names values (an
    expression's ``data``, a CSV's ``columns_data``, a webhook's ``form_data``): each named
    value's operations as one function; naming a value the field lacks is refused."""
    where = Where(step, operations_field)
    if not isinstance(operations, dict):
        raise where.fail("must be an object of operation lists")
    unknown = sorted(set(operations) - set(names))
    if unknown:
        raise where.fail(f"names {unknown}, which {values_field} does not have")
    compiler = QueryCompiler(step, operations_field, names, values_field)
    return {
        key: compiler.chain(ops, f"{operations_field} '{key}'") for key, ops in operations.items()
    }
