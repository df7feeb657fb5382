"""Operations on strings, numbers, booleans, any value, dictionaries and sequences."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import re2
import supervision as sv

from .values import Env, python

if TYPE_CHECKING:
    from .compiler import QueryCompiler
from .fields import (
    Builder,
    Op,
    as_key,
    as_sequence,
    as_string,
    expect,
    read_choice,
    read_integer,
    read_mapping,
    read_number,
    simple,
)

__all__ = [
    "MAX_JOINED_LENGTH",
    "SCALAR_OPERATIONS",
]

MAX_JOINED_LENGTH = 1_000_000
"""``SequenceJoin``'s longest string, as the reference bounds it."""

# ------------------------------------------------------------------ the operations


def _lookup(node: dict[str, Any], q: QueryCompiler) -> Op:
    table = read_mapping(node, "lookup_table", q.where)

    def run(value: Any, env: Env) -> Any:
        key = as_key(value, "LookupTable", q.where)
        if key not in table:
            raise q.where.error(f"LookupTable has no entry for {key!r}")
        return table[key]

    return run


def _sequence_map(node: dict[str, Any], q: QueryCompiler) -> Op:
    table = read_mapping(node, "lookup_table", q.where)

    def run(value: Any, env: Env) -> Any:
        out = []
        for item in as_sequence(value, "SequenceMap", q.where):
            key = as_key(item, "SequenceMap", q.where)
            if key not in table:
                raise q.where.error(f"SequenceMap's lookup_table has no entry for {key!r}")
            out.append(table[key])
        return out

    return run


def _sequence_apply(node: dict[str, Any], q: QueryCompiler) -> Op:
    chain = q.chain(node.get("operations"), "SequenceApply.operations")
    return lambda value, env: [chain(v, env) for v in as_sequence(value, "SequenceApply", q.where)]


def _to_number(node: dict[str, Any], q: QueryCompiler) -> Op:
    cast = read_choice(node, "cast_to", ("int", "float"), q.where)

    def run(value: Any, env: Env) -> Any:
        try:
            number = float(python(value))
        except (TypeError, ValueError):
            raise q.where.error(f"ToNumber cannot read {value!r} as a number") from None
        return int(number) if cast == "int" else number

    return run


def _round(node: dict[str, Any], q: QueryCompiler) -> Op:
    digits = read_integer(node, "decimal_digits", q.where)
    number_ = (int, float)
    return lambda v, env: round(
        expect(python(v), number_, "a number", "NumberRound", q.where), digits
    )


def _arithmetic(name: str, apply: Callable[[float, float], float]) -> Builder:
    def build(node: dict[str, Any], q: QueryCompiler) -> Op:
        other = read_number(node, "other", q.where)

        def run(value: Any, env: Env) -> Any:
            value = python(value)
            if isinstance(value, list):  # the reference multiplies numpy arrays elementwise
                return [
                    apply(expect(v, (int, float), "numbers", name, q.where), other) for v in value
                ]
            try:
                return apply(expect(value, (int, float), "a number", name, q.where), other)
            except ZeroDivisionError:
                raise q.where.error(f"{name} by zero") from None

        return run

    return build


_AGGREGATES: dict[str, Callable[[list[Any]], Any]] = {"min": min, "max": max, "sum": sum}


def _numeric_aggregate(node: dict[str, Any], q: QueryCompiler) -> Op:
    function = _AGGREGATES[read_choice(node, "function", tuple(_AGGREGATES), q.where)]
    neutral = node.get("neutral_value")

    def run(value: Any, env: Env) -> Any:
        items = [python(v) for v in as_sequence(value, "NumericSequenceAggregate", q.where)]
        if not items:
            return neutral
        try:
            return function(items)
        except TypeError:
            raise q.where.error("NumericSequenceAggregate takes numbers") from None

    return run


def _aggregate(node: dict[str, Any], q: QueryCompiler) -> Op:
    mode = read_choice(node, "mode", ("first", "last", "most_common", "least_common"), q.where)

    def run(value: Any, env: Env) -> Any:
        items = as_sequence(value, "SequenceAggregate", q.where)
        if not items:
            raise q.where.error("SequenceAggregate of an empty sequence")
        if mode in ("first", "last"):
            return items[0 if mode == "first" else -1]
        ranked = [
            v
            for v, _ in Counter(
                as_key(i, "SequenceAggregate", q.where) for i in items
            ).most_common()
        ]
        return ranked[0 if mode == "most_common" else -1]

    return run


def _substring(node: dict[str, Any], q: QueryCompiler) -> Op:
    start, end = read_integer(node, "start", q.where, 0), read_integer(node, "end", q.where, -1)
    return lambda v, env: expect(v, str, "a string", "StringSubSequence", q.where)[start:end]


MAX_PATTERN_LENGTH = 1000
"""A ``StringMatches`` pattern's characters, at most."""
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.max_mem = 8 << 20  # what one compiled pattern may hold (RE2's own default)
_RE2_OPTIONS.log_errors = False  # a caller's bad pattern is their 400, not our stderr


def _matches(node: dict[str, Any], q: QueryCompiler) -> Op:
    # The caller's pattern runs on RE2: time linear in the text, never backtracking, so a
    # pattern like ``(a+)+$`` cannot hold the GIL for minutes. What RE2 lacks (back
    # references, look-around) is a compile-time 400, not a slow path.
    pattern = node.get("regex")
    if not isinstance(pattern, str):
        raise q.where.fail("StringMatches: regex must be a string")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise q.where.fail(f"StringMatches: regex is longer than {MAX_PATTERN_LENGTH} characters")
    try:
        regex = re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        raise q.where.fail(
            f"StringMatches: regex {pattern!r} is invalid or not linear-time (RE2 syntax: no "
            f"back references or look-around): {_reason(exc)}"
        ) from None
    return lambda v, env: (
        regex.search(expect(v, str, "a string", "StringMatches", q.where)) is not None
    )


def _reason(exc: Exception) -> str:
    reason = exc.args[0] if exc.args else exc
    return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)


def _join(node: dict[str, Any], q: QueryCompiler) -> Op:
    separator = node.get("separator", ", ")
    if not isinstance(separator, str):
        raise q.where.fail("SequenceJoin: separator must be a string")

    def run(value: Any, env: Env) -> str:
        parts = [str(python(v)) for v in as_sequence(value, "SequenceJoin", q.where)]
        if sum(map(len, parts)) + len(separator) * max(0, len(parts) - 1) > MAX_JOINED_LENGTH:
            raise q.where.error(f"SequenceJoin would make more than {MAX_JOINED_LENGTH} characters")
        return separator.join(parts)

    return run


def _elements_count(node: dict[str, Any], q: QueryCompiler) -> Op:
    def run(value: Any, env: Env) -> dict[Any, int]:
        items = as_sequence(value, "SequenceElementsCount", q.where)
        return dict(Counter(as_key(i, "SequenceElementsCount", q.where) for i in items))

    return run


def _length(node: dict[str, Any], q: QueryCompiler) -> Op:
    def run(value: Any, env: Env) -> int | None:
        if value is None:
            return None  # as a step that did not run: nothing to count
        if isinstance(value, sv.Detections):
            return len(value)
        return len(
            expect(
                value, (list, tuple, set, dict, str, bytes), "a sequence", "SequenceLength", q.where
            )
        )

    return run


def _random(node: dict[str, Any], q: QueryCompiler) -> Op:
    low = read_number(node, "min_value", q.where, 0.0)
    high = read_number(node, "max_value", q.where, 1.0)
    return lambda value, env: low + random.random() * abs(high - low)


def _to_json(node: dict[str, Any], q: QueryCompiler) -> Op:
    def run(value: Any, env: Env) -> str:
        try:
            return json.dumps(
                expect(value, dict, "a dictionary", "ConvertDictionaryToJSON", q.where),
                default=python,
            )
        except (TypeError, ValueError) as exc:
            raise q.where.error(f"ConvertDictionaryToJSON: {exc}") from None

    return run


SCALAR_OPERATIONS: dict[str, Builder] = {
    "StringToLowerCase": simple(lambda v, w: as_string(v, "StringToLowerCase", w).lower()),
    "StringToUpperCase": simple(lambda v, w: as_string(v, "StringToUpperCase", w).upper()),
    "ToString": simple(lambda v, w: str(python(v))),
    "ToBoolean": simple(lambda v, w: bool(python(v))),
    "LookupTable": _lookup,
    "ToNumber": _to_number,
    "NumberRound": _round,
    "Multiply": _arithmetic("Multiply", lambda a, b: a * b),
    "Divide": _arithmetic("Divide", lambda a, b: a / b),
    "RandomNumber": _random,
    "StringSubSequence": _substring,
    "StringMatches": _matches,
    "SequenceLength": _length,
    "SequenceElementsCount": _elements_count,
    "SequenceJoin": _join,
    "SequenceMap": _sequence_map,
    "SequenceApply": _sequence_apply,
    "SequenceAggregate": _aggregate,
    "NumericSequenceAggregate": _numeric_aggregate,
    "ConvertDictionaryToJSON": _to_json,
}
