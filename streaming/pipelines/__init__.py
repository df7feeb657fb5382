"""Headless monitoring pipelines (inference-sdk's ``inference_pipelines`` API)."""

from ..watching import PipelineResult
from .manager import PipelineManager, PipelineNotFound, Pipelines
from .models import InitialisePipelinePayload
from .pipeline import Pipeline
from .store import PipelineStore

__all__ = [
    "InitialisePipelinePayload",
    "Pipeline",
    "PipelineManager",
    "PipelineNotFound",
    "PipelineResult",
    "PipelineStore",
    "Pipelines",
]
