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
from dataclasses import dataclass
from typing import Any, ClassVar

import supervision as sv

from ...errors import WorkflowCompilationError
from ..query import Env, Op, QueryCompiler
from .base import Block, BlockSettings, BuildContext, FrameState, setting
from .fields import DETECTION_KINDS, DETECTIONS, FieldSpec, Takes

__all__ = [
    "DetectionsFilterBlock",
    "DetectionsTransformationBlock",
    "PropertyDefinitionBlock",
    "operations_chain",
]


@dataclass(frozen=True, kw_only=True)
class DetectionsFilterSettings(BlockSettings):
    operations: Any = setting(FieldSpec())
    operations_parameters: list[str] = setting(FieldSpec(default=None, takes=Takes.ENTRIES))


class DetectionsFilterBlock(Block):
    """The detections left after ``operations`` (as the reference, any operations: most often
    one ``DetectionsFilter``, whose statement each detection must hold)."""

    type_ids = ("roboflow_core/detections_filter@v1", "DetectionsFilter")
    passes_kind = "predictions"
    inputs = {"predictions": FieldSpec(DETECTION_KINDS, takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = DetectionsFilterSettings
    outputs = {"predictions": DETECTIONS}

    def __init__(self, name: str, config: DetectionsFilterSettings, context: BuildContext) -> None:
        super().__init__(name, config, context)
        names: list[str] = config.operations_parameters or []
        compiler = QueryCompiler(name, "operations", names, "operations_parameters")
        operations = config.operations
        if not isinstance(operations, list) or not operations:
            raise compiler.fail("must be a non-empty list")
        self._chain = compiler.chain(operations)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        started = time.perf_counter()
        env = Env(inputs.get("operations_parameters") or {}, frame.facts)
        detections = self._chain(inputs["predictions"], env)
        if not isinstance(detections, sv.Detections):
            raise WorkflowCompilationError(
                f"step '{self.name}': operations must end with detections, "
                f"not {type(detections).__name__}"
            )
        frame.add_time("analytics", started)
        return {"predictions": detections}


class DetectionsTransformationBlock(DetectionsFilterBlock):
    """The detections through ``operations`` (the same query language: sort, select,
    offset, rename classes, filter ...), the reference's name for what a filter does
    when its operations do more than filter."""

    type_ids = ("roboflow_core/detections_transformation@v1", "DetectionsTransformation")
    passes_kind = "predictions"


@dataclass(frozen=True, kw_only=True)
class PropertyDefinitionSettings(BlockSettings):
    operations: Any = setting(FieldSpec())


class PropertyDefinitionBlock(Block):
    """``roboflow_core/property_definition@v1``: a value computed from another step's output
    by any chain of the query language's operations."""

    type_ids = (
        "roboflow_core/property_definition@v1",
        "PropertyDefinition",
        "PropertyExtraction",
    )
    inputs = {"data": FieldSpec(takes=Takes.FRAME)}
    Settings: ClassVar[type[BlockSettings]] = PropertyDefinitionSettings
    outputs = {"output": "*"}

    def __init__(
        self, name: str, config: PropertyDefinitionSettings, context: BuildContext
    ) -> None:
        super().__init__(name, config, context)
        self._chain = operations_chain(name, "operations", config.operations)

    def run(self, inputs: dict[str, Any], frame: FrameState) -> dict[str, Any]:
        return {"output": self._chain(inputs["data"], Env(facts=frame.facts))}


def operations_chain(step: str, field: str, operations: Any) -> Op:
    """The reference's operations list as one function of ``(value, env)``."""
    return QueryCompiler(step, field).chain(operations)
