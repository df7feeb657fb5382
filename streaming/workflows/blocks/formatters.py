"""Shaping values for what comes next: the first value a branch produced, else a default
(``first_non_empty_or_default``: after flow control, one of several branches ran)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .base import ANY, Block, BlockSettings, FieldSpec, FrameState

__all__ = ["FirstNonEmptyOrDefaultBlock"]


@dataclass(frozen=True, kw_only=True)
class FirstNonEmptySettings(BlockSettings):
    data: int
    default: Any


class FirstNonEmptyOrDefaultBlock(Block):
    """The first of ``data``'s values that is there (not None: its step ran and gave
    one), else ``default``."""

    type_ids = ("roboflow_core/first_non_empty_or_default@v1", "FirstNonEmptyOrDefault")
    fields = {
        "data": FieldSpec(listed=True, type="list"),
        "default": FieldSpec(default=None),
    }
    Settings: ClassVar[type[BlockSettings]] = FirstNonEmptySettings
    outputs = {"output": ANY}
    accepts_empty = True

    def __init__(self, name: str, config: FirstNonEmptySettings, context: Any) -> None:
        super().__init__(name, config, context)
        self.default = config.default

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return {"output": next((v for v in inputs["data"] if v is not None), self.default)}
