"""The reference's query language (``roboflow_workflows`` ``core_steps/common/query_language``):
every operation, operand kind and comparator, wherever a block of ours takes them
(``detections_filter``, ``property_definition``, ``continue_if``, ``data_aggregator``)."""

from .compiler import BINARY, UNARY, Condition, QueryCompiler, named_chains
from .operations import OPERATIONS, Op
from .values import PROPERTIES, Env, QueryError, Row

__all__ = [
    "BINARY",
    "OPERATIONS",
    "PROPERTIES",
    "UNARY",
    "Condition",
    "Env",
    "Op",
    "QueryCompiler",
    "QueryError",
    "Row",
    "named_chains",
]
