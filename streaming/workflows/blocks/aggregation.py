"""``roboflow_core/data_aggregator@v1``: values summed, averaged, counted... over an interval
(seconds, minutes, hours of the wall clock, or a number of runs), emitted once per interval
as ``<name>_<mode>`` outputs and None in between: a dashboard's "people per minute"."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import WorkflowCompilationError
from ..query import Env
from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import FieldSpec, Takes
from .filtering import operations_chain

__all__ = ["DataAggregatorBlock"]

_UNIT_SECONDS = {"seconds": 1, "minutes": 60, "hours": 3600}


def _items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | set | tuple) else [value]


def _numbers(values: list[Any]) -> list[Any]:
    return [v for v in values if v is not None]


# Each mode: the values seen in the interval (one per run) -> the result.
_MODES: dict[str, Callable[[list[Any]], Any]] = {
    "sum": lambda vs: sum(_numbers(vs)),
    "avg": lambda vs: sum(_numbers(vs)) / len(_numbers(vs)) if _numbers(vs) else None,
    "max": lambda vs: max(_numbers(vs), default=None),
    "min": lambda vs: min(_numbers(vs), default=None),
    "count": lambda vs: sum(len(v) if hasattr(v, "__len__") else 1 for v in vs),
    "distinct": lambda vs: list(dict.fromkeys(i for v in vs for i in _items(v))),
    "count_distinct": lambda vs: len({i for v in vs for i in _items(v)}),
    "values_counts": lambda vs: dict(Counter(i for v in vs for i in _items(v))),
    "values_difference": lambda vs: max(_numbers(vs)) - min(_numbers(vs)) if _numbers(vs) else None,
}
_KINDS = {"distinct": "list_of_values", "values_counts": "dictionary"}


@dataclass(frozen=True, kw_only=True)
class DataAggregatorSettings(BlockSettings):
    data: list[str] = setting(FieldSpec(takes=Takes.ENTRIES))
    data_operations: Any = setting(FieldSpec(default=None))
    aggregation_mode: Any = setting(FieldSpec())
    interval_unit: Any = setting(FieldSpec(default="seconds"))
    interval: int = setting(FieldSpec(type="integer", minimum=1))


class DataAggregatorBlock(Block):
    """Aggregates each ``data`` entry (after its ``data_operations``) with its
    ``aggregation_mode`` list. The reference keeps every value's running state; here the
    interval's values are kept and reduced when it ends, which for the intervals this is
    used with (a value per frame for a minute or so) is the same thing, simpler."""

    type_ids = ("roboflow_core/data_aggregator@v1",)
    Settings: ClassVar[type[BlockSettings]] = DataAggregatorSettings
    outputs = {"*": "*"}  # named by the configuration: outputs_of

    @classmethod
    def outputs_of(cls, given: dict[str, Any]) -> dict[str, str]:
        modes = given.get("aggregation_mode")
        if not isinstance(modes, dict):
            return {}
        return {
            f"{name}_{mode}": _KINDS.get(mode, "float")
            for name, listed in modes.items()
            if isinstance(listed, list)
            for mode in listed
            if isinstance(mode, str)
        }

    def __init__(self, name: str, config: DataAggregatorSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        names = list(config.data)
        modes = config.aggregation_mode
        if not isinstance(modes, dict):
            raise WorkflowCompilationError(f"step '{name}': aggregation_mode must be an object")
        self._modes: list[tuple[str, str]] = []
        for entry, listed in modes.items():
            if entry not in names:
                raise WorkflowCompilationError(
                    f"step '{name}': aggregation_mode: {entry!r} is not in data"
                )
            for mode in listed if isinstance(listed, list) else [listed]:
                if mode not in _MODES:
                    raise WorkflowCompilationError(
                        f"step '{name}': aggregation_mode: {mode!r} is not one of "
                        f"{', '.join(_MODES)}"
                    )
                self._modes.append((entry, mode))
        operations = config.data_operations or {}
        if not isinstance(operations, dict):
            raise WorkflowCompilationError(f"step '{name}': data_operations must be an object")
        self._chains = {
            entry: operations_chain(name, f"data_operations.{entry}", listed)
            for entry, listed in operations.items()
        }
        unit = config.interval_unit
        if unit not in (*_UNIT_SECONDS, "runs"):
            raise WorkflowCompilationError(
                f"step '{name}': interval_unit must be seconds, minutes, hours or runs, "
                f"got {unit!r}"
            )
        interval = config.interval
        self._runs_per_flush = interval if unit == "runs" else None
        self._seconds = interval * _UNIT_SECONDS.get(unit, 0)
        self._values: dict[str, list[Any]] = {entry: [] for entry in names}
        self._runs = 0
        self._started = time.monotonic()

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        env = Env(facts=frame.facts)
        for entry, value in inputs["data"].items():
            chain = self._chains.get(entry)
            self._values[entry].append(chain(value, env) if chain else value)
        self._runs += 1
        if self._runs_per_flush is not None:
            due = self._runs >= self._runs_per_flush
        else:
            due = time.monotonic() - self._started >= self._seconds
        if not due:
            return {f"{entry}_{mode}": None for entry, mode in self._modes}
        result = {
            f"{entry}_{mode}": _MODES[mode](self._values[entry]) for entry, mode in self._modes
        }
        self._values = {entry: [] for entry in self._values}
        self._runs = 0
        self._started = time.monotonic()
        return result
