"""inference-sdk workflow specifications: parse, compile once per session, run per frame."""

from .engine import CompiledWorkflow, compile_workflow
from .reach import workflow_urls
from .spec import WorkflowSpec, parse_spec

__all__ = ["CompiledWorkflow", "WorkflowSpec", "compile_workflow", "parse_spec", "workflow_urls"]
