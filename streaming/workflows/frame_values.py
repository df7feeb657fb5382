"""One frame's values while a compiled plan runs: each output at its dimension (nested lists
below the frame's, ``batches.py``), where each step ran, and each flow-control step's
verdicts; and a value read at one element, as the reference gives it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .batches import MASKED, at, unmasked
from .values import Const, Entries, Source

__all__ = ["FrameValues"]


@dataclass
class FrameValues:
    """One frame's values while the plan runs: each output at its dimension (nested lists
    below the frame's), where each step ran, and each flow-control step's verdicts."""

    levels: dict[str | None, int]
    values: dict[tuple[str | None, str], Any] = field(default_factory=dict)
    ran: dict[str, Any] = field(default_factory=dict)
    verdicts: dict[str, Any] = field(default_factory=dict)
    produced: dict[str, list[str]] = field(default_factory=dict)

    def whole(self, source: Source) -> Any:
        """A value with all its elements (nested lists for a value below the frame's)."""
        if isinstance(source, Const):
            return source.value
        if isinstance(source, Entries):
            values = {key: self.whole(entry) for key, entry in source.entries.items()}
            return list(values.values()) if source.listed else values
        return self.at(source, ())

    def at(self, source: Source, index: tuple[int, ...]) -> Any:
        """The value at one element (``index`` into the nesting); a value above it is the
        element's ancestor's (the frame's image for a crop), one below it the list of the
        element's children. ``MASKED`` where what it comes from did not run."""
        if isinstance(source, Const):
            return source.value
        if isinstance(source, Entries):  # its values as they are, MASKED included
            entries = {key: self.at(entry, index) for key, entry in source.entries.items()}
            return list(entries.values()) if source.listed else entries
        depth = max(self.levels[source.step] - 1, 0)  # a value of the whole run: as it is
        if source.step is None or source.name != "*":
            return at(self.values[(source.step, source.name)], index, depth)
        if not index and depth > 0:  # the whole of a step below the frame: every output
            outputs = {k: self.values[(source.step, k)] for k in self.produced[source.step]}
            return _per_element(outputs, self.ran[source.step], depth)
        if at(self.ran[source.step], index, depth) is not True:
            return MASKED
        return {
            k: at(self.values[(source.step, k)], index, depth) for k in self.produced[source.step]
        }

    def copy_step(self, other: FrameValues, step: str) -> None:
        """``step``'s outputs as ``other`` has them (a step run once for several frames)."""
        self.ran[step] = other.ran[step]
        self.produced[step] = other.produced[step]
        for output in other.produced[step]:
            self.values[(step, output)] = other.values[(step, output)]


def _per_element(outputs: dict[str, Any], ran: Any, depth: int) -> Any:
    """A step's outputs below the frame as the reference gives ``$steps.x.*``: a list per
    level of one dict of every output per element (all None where the step did not run)."""
    if depth == 0:
        if ran is not True:
            return dict.fromkeys(outputs)
        return {k: unmasked(v) for k, v in outputs.items()}
    if not isinstance(ran, list):  # what it would have run on did not exist
        return []
    return [
        _per_element(
            {k: v[i] if isinstance(v, list) else MASKED for k, v in outputs.items()},
            ran[i],
            depth - 1,
        )
        for i in range(len(ran))
    ]
