"""``roboflow_core/detections_filter@v1``: keep the detections a condition holds for, written
in the reference's query language. The subset understood here, the rest a 400 naming it:

- ``operations``: ``DetectionsFilter`` operations, applied in order;
- ``filter_operation``: a ``StatementGroup`` (``and`` / ``or``) of ``BinaryStatement``s and
  nested groups, each with ``negate``;
- operands: ``StaticOperand`` (a value), ``DynamicOperand`` naming an ``operations_parameters``
  entry, or the detection itself (``operand_name`` ``_``) through one
  ``ExtractDetectionProperty`` (``PROPERTIES`` below);
- comparators: ``COMPARATORS`` below.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import supervision as sv

from ...errors import WorkflowCompilationError
from .base import DETECTION_KINDS, DETECTIONS, Block, BuildContext, FieldSpec, FrameState, select

__all__ = [
    "COMPARATORS",
    "PROPERTIES",
    "UNARY",
    "Condition",
    "DetectionsFilterBlock",
    "PropertyDefinitionBlock",
    "operations_chain",
]

Row = tuple[sv.Detections, int]
"""A detection: the detections and its index."""
Context = tuple[dict[str, Any], Row | None]
"""What a condition reads: the named operands' values, and the detection being tested
(``detections_filter``) or None (``continue_if``)."""
Value = Callable[[Context], Any]


def _data(key: str) -> Callable[[Row], Any]:
    def read(row: Row) -> Any:
        detections, i = row
        values = detections.data.get(key)
        if values is None:
            return None
        value = values[i]
        return value.item() if isinstance(value, np.generic) else value  # numpy -> Python

    return read


PROPERTIES: dict[str, Callable[[Row], Any]] = {
    "confidence": lambda r: None if r[0].confidence is None else float(r[0].confidence[r[1]]),
    "class_name": _data("class_name"),
    "class_id": lambda r: None if r[0].class_id is None else int(r[0].class_id[r[1]]),
    "tracker_id": lambda r: None if r[0].tracker_id is None else int(r[0].tracker_id[r[1]]),
    "x_min": lambda r: float(r[0].xyxy[r[1], 0]),
    "y_min": lambda r: float(r[0].xyxy[r[1], 1]),
    "x_max": lambda r: float(r[0].xyxy[r[1], 2]),
    "y_max": lambda r: float(r[0].xyxy[r[1], 3]),
    "size": lambda r: float(r[0].box_area[r[1]]),
    "time_in_zone": _data("time_in_zone"),
}


def _number(a: Any) -> bool:
    return isinstance(a, int | float) and not isinstance(a, bool)


def _ordered(test: Callable[[float, float], bool]) -> Callable[[Any, Any], bool]:
    return lambda a, b: _number(a) and _number(b) and test(a, b)


COMPARATORS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b,
    "(Number) ==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "(Number) !=": lambda a, b: a != b,
    "(Number) >": _ordered(lambda a, b: a > b),
    "(Number) >=": _ordered(lambda a, b: a >= b),
    "(Number) <": _ordered(lambda a, b: a < b),
    "(Number) <=": _ordered(lambda a, b: a <= b),
    "(Number) in range": lambda a, b: (
        _number(a) and isinstance(b, list | tuple) and len(b) == 2 and b[0] <= a <= b[1]
    ),
    "in (Sequence)": lambda a, b: isinstance(b, list | tuple | set) and a in b,
    "(String) startsWith": lambda a, b: isinstance(a, str) and a.startswith(str(b)),
    "(String) endsWith": lambda a, b: isinstance(a, str) and a.endswith(str(b)),
    "(String) contains": lambda a, b: isinstance(a, str) and str(b) in a,
}


UNARY: dict[str, Callable[[Any], bool]] = {
    "Exists": lambda a: a is not None,
    "DoesNotExist": lambda a: a is None,
    "(Boolean) is True": lambda a: a is True,
    "(Boolean) is False": lambda a: a is False,
    "(Sequence) is empty": lambda a: a is not None and len(a) == 0,
    "(Sequence) is not empty": lambda a: a is not None and len(a) > 0,
}

Condition = Callable[[Context], bool]


class QueryCompiler:
    """The query language subset, compiled into Python predicates. ``names``: the operands a
    ``DynamicOperand`` may name (the keys of the block's ``names_field``); ``detections``:
    whether the detection under test (operand ``_``) exists; ``field``: the field errors
    name."""

    def __init__(
        self, step: str, field: str, names: dict[str, Any], names_field: str, detections: bool
    ) -> None:
        self.step = step
        self.field = field
        self.names = set(names)
        self.names_field = names_field
        self.detections = detections

    def fail(self, what: str) -> WorkflowCompilationError:
        return WorkflowCompilationError(f"step '{self.step}': {self.field}: {what}")

    def kind(self, node: Any, where: str) -> str:
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise self.fail(f"{where} must be an object with a 'type'")
        return str(node["type"])

    def group(self, node: Any) -> Condition:
        kind = self.kind(node, "a statement")
        if kind == "BinaryStatement":
            test = self.binary(node)
        elif kind == "UnaryStatement":
            test = self.unary(node)
        elif kind == "StatementGroup":
            statements = node.get("statements")
            if not isinstance(statements, list) or not statements:
                raise self.fail("a StatementGroup needs at least one statement")
            parts = [self.group(s) for s in statements]
            operator = node.get("operator", "or")
            if operator not in ("and", "or"):
                raise self.fail(f"StatementGroup operator must be 'and' or 'or', got {operator!r}")
            combine = all if operator == "and" else any
            test = lambda ctx: combine(p(ctx) for p in parts)  # noqa: E731
        else:
            raise self.fail(f"statement type '{kind}' is not supported here (supported: "
                            "BinaryStatement, UnaryStatement, StatementGroup)")  # fmt: skip
        if node.get("negate", False) is True:
            return lambda ctx: not test(ctx)
        return test

    def unary(self, node: dict[str, Any]) -> Condition:
        operator = node.get("operator")
        name = operator.get("type") if isinstance(operator, dict) else None
        if name not in UNARY:
            raise self.fail(
                f"operator {name!r} is not supported here (supported: {', '.join(UNARY)})"
            )
        test, value = UNARY[name], self.operand(node.get("operand"))
        return lambda ctx: bool(test(value(ctx)))

    def binary(self, node: dict[str, Any]) -> Condition:
        comparator = node.get("comparator")
        name = comparator.get("type") if isinstance(comparator, dict) else None
        if name not in COMPARATORS:
            raise self.fail(
                f"comparator {name!r} is not supported here (supported: {', '.join(COMPARATORS)})"
            )
        compare = COMPARATORS[name]
        left = self.operand(node.get("left_operand"))
        right = self.operand(node.get("right_operand"))
        return lambda ctx: bool(compare(left(ctx), right(ctx)))

    def operand(self, node: Any) -> Value:
        kind = self.kind(node, "an operand")
        operations = node.get("operations") or []
        if kind == "StaticOperand":
            if operations:
                raise self.fail("operations on a StaticOperand are not supported here")
            value = node.get("value")
            return lambda ctx: value
        if kind != "DynamicOperand":
            raise self.fail(f"operand type '{kind}' is not supported here")
        name = node.get("operand_name", "_")
        if name != "_" or not self.detections:
            if name not in self.names:
                raise self.fail(
                    f"operand '{name}' is not in {self.names_field} (has {sorted(self.names)})"
                )
            kinds = [self.kind(o, "an operation") for o in operations]
            if kinds == ["SequenceLength"]:
                return lambda ctx: None if ctx[0][name] is None else len(ctx[0][name])
            if kinds:
                raise self.fail(
                    f"operations {kinds} on operand '{name}' are not supported here "
                    "(supported: none, or SequenceLength)"
                )
            return lambda ctx: ctx[0][name]
        if len(operations) != 1 or self.kind(operations[0], "an operation") != (
            "ExtractDetectionProperty"
        ):
            raise self.fail("the detection operand takes exactly one ExtractDetectionProperty")
        prop = operations[0].get("property_name")
        if prop not in PROPERTIES:
            raise self.fail(f"property {prop!r} is not supported here "
                            f"(supported: {', '.join(PROPERTIES)})")  # fmt: skip
        extract = PROPERTIES[prop]
        return lambda ctx: extract(ctx[1]) if ctx[1] is not None else None


class DetectionsFilterBlock(Block):
    """The detections every operation's condition holds for."""

    type_ids = ("roboflow_core/detections_filter@v1", "DetectionsFilter")
    fields = {
        "predictions": FieldSpec(DETECTION_KINDS, per_frame=True),
        "operations": FieldSpec(),
        "operations_parameters": FieldSpec(default=None),
    }
    outputs = {"predictions": DETECTIONS}

    def __init__(self, name: str, config: dict[str, Any], context: BuildContext) -> None:
        super().__init__(name, config, context)
        parameters = config["operations_parameters"] or {}
        if not isinstance(parameters, dict):
            raise WorkflowCompilationError(
                f"step '{name}': operations_parameters must be an object"
            )
        compiler = QueryCompiler(
            name, "operations", parameters, "operations_parameters", detections=True
        )
        self._parameters = parameters
        operations = config["operations"]
        if not isinstance(operations, list) or not operations:
            raise compiler.fail("must be a non-empty list")
        self._tests = []
        for operation in operations:
            kind = compiler.kind(operation, "an operation")
            if kind != "DetectionsFilter":
                raise compiler.fail(
                    f"operation '{kind}' is not supported here (supported: DetectionsFilter)"
                )
            self._tests.append(compiler.group(operation.get("filter_operation")))

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        detections: sv.Detections = inputs["predictions"]
        for test in self._tests:
            rows = range(len(detections))
            keep = np.array([test((self._parameters, (detections, i))) for i in rows], dtype=bool)
            detections = select(detections, keep)
        frame.add_time("analytics", started)
        return {"predictions": detections}


class PropertyDefinitionBlock(Block):
    """``roboflow_core/property_definition@v1``: a value computed from another step's output,
    this subset of the reference's operations: ``SequenceLength`` (how many detections, or
    items), ``DetectionsPropertyExtract`` (each detection's ``PROPERTIES`` value, a list)."""

    type_ids = (
        "roboflow_core/property_definition@v1",
        "PropertyDefinition",
        "PropertyExtraction",
    )
    fields = {
        "data": FieldSpec(per_frame=True),
        "operations": FieldSpec(),
    }
    outputs = {"output": "*"}

    def __init__(self, name: str, config: dict[str, Any], context: BuildContext) -> None:
        super().__init__(name, config, context)
        self._chain = operations_chain(name, "operations", config["operations"])

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return {"output": self._chain(inputs["data"])}


def operations_chain(step: str, field: str, operations: Any) -> Callable[[Any], Any]:
    """The reference's operations list as one function, for the subset supported here:
    ``SequenceLength`` (how many detections, or items) and ``DetectionsPropertyExtract``
    (each detection's ``PROPERTIES`` value, a list)."""
    if not isinstance(operations, list):
        raise WorkflowCompilationError(f"step '{step}': {field} must be a list")
    steps: list[Callable[[Any], Any]] = []
    for operation in operations:
        kind = operation.get("type") if isinstance(operation, dict) else None
        if kind == "SequenceLength":
            steps.append(lambda value: None if value is None else len(value))
        elif kind == "DetectionsPropertyExtract":
            prop = operation.get("property_name")
            if prop not in PROPERTIES:
                raise WorkflowCompilationError(
                    f"step '{step}': {field}: property {prop!r} is not supported here "
                    f"(supported: {', '.join(PROPERTIES)})"
                )
            steps.append(_extract_all(PROPERTIES[prop]))
        else:
            raise WorkflowCompilationError(
                f"step '{step}': {field}: operation {kind!r} is not supported here "
                "(supported: SequenceLength, DetectionsPropertyExtract)"
            )

    def chain(value: Any) -> Any:
        for function in steps:
            value = function(value)
        return value

    return chain


def _extract_all(extract: Callable[[Row], Any]) -> Callable[[Any], Any]:
    def each(detections: Any) -> Any:
        if not isinstance(detections, sv.Detections):
            return None
        return [extract((detections, i)) for i in range(len(detections))]

    return each
