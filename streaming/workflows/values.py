"""What a step's field is bound to once compiled: a constant, a per-frame value, or an object
(or list) of either; and ``Unset``, a workflow input the run has not given a value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import WorkflowCompilationError

__all__ = ["Const", "Entries", "Ref", "Source", "Unset"]


@dataclass(frozen=True)
class Ref:
    """A per-frame value: the frame image, video metadata, a batch input's value, or a step
    output (``*`` = all)."""

    step: str | None
    name: str


@dataclass(frozen=True)
class Const:
    value: Any


@dataclass(frozen=True)
class Entries:
    """An object field whose entries are each resolved per frame (``Takes.ENTRIES``)."""

    entries: dict[str, Ref | Const]
    listed: bool = False
    """A list field (``Takes.LIST``): the block gets the values in order."""


Source = Ref | Const | Entries


@dataclass(frozen=True)
class Unset:
    """A workflow input with no value: no ``default_value``, and the run gave none (or the
    definition is only being validated). The reference validates a definition without its
    inputs; a run that needs the value fails with ``error``, naming the input."""

    name: str
    type: str
    kinds: tuple[str, ...]

    def error(self, where: str | None = None) -> WorkflowCompilationError:
        """The reference's words for it (``RuntimeInputError``), and who needed it."""
        needed = f" ({where} needs it)" if where else ""
        return WorkflowCompilationError(
            f"Detected runtime parameter `{self.name}` defined as `{self.type}` (of kind "
            f"`{list(self.kinds)}`), but value is not provided{needed}: give it in the run's "
            "inputs (workflows_parameters for a stream)"
        )
