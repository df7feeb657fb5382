"""PipelineManager: the server's monitoring pipelines, by id."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor

from sources.hub import SourceHub

from ..config import Settings
from ..errors import NotFound, TooManySessions
from ..inference.registry import ModelRegistry
from ..workflows import compile_workflow, parse_spec
from ..workflows.blocks.base import BuildContext
from ..workflows.library import WorkflowLibrary
from .models import InitialisePipelinePayload, resolve_references
from .pipeline import Pipeline

__all__ = ["PipelineManager", "PipelineNotFound"]

log = logging.getLogger(__name__)


class PipelineNotFound(NotFound):
    """No pipeline with that id."""

    code = "pipeline_not_found"


class PipelineManager:
    """The server's monitoring pipelines, by id: started, limited in number, terminated."""

    def __init__(
        self,
        settings: Settings,
        models: ModelRegistry,
        hub: SourceHub,
        executor: Executor,
        library: WorkflowLibrary,
    ) -> None:
        self._settings = settings
        self._library = library
        self._models = models
        self._hub = hub
        self._executor = executor
        self._pipelines: dict[str, Pipeline] = {}
        self._starting = 0
        self._timers: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._pipelines)

    def ids(self) -> list[str]:
        return list(self._pipelines)

    def get(self, pipeline_id: str) -> Pipeline:
        pipeline = self._pipelines.get(pipeline_id)
        if pipeline is None:
            raise PipelineNotFound(f"Could not find InferencePipeline with id={pipeline_id}.")
        return pipeline

    async def initialise(self, payload: InitialisePipelinePayload) -> Pipeline:
        settings = self._settings
        if len(self._pipelines) + self._starting >= settings.max_pipelines:
            raise TooManySessions(
                f"{settings.max_pipelines} pipelines are running (STREAMING_MAX_PIPELINES)"
            )
        references = resolve_references(
            payload.video_configuration.video_reference, settings.allow_local_sources
        )
        config = payload.processing_configuration
        specification = self._library.specification(config)
        self._starting += 1
        try:
            spec = parse_spec(specification)
            # One compiled workflow per source: blocks may keep per-stream state (trackers).
            workflows = [
                await asyncio.to_thread(
                    compile_workflow,
                    spec,
                    BuildContext(self._models),
                    image_input_name=config.image_input_name,
                    video_metadata_input_name=config.video_metadata_input_name,
                    parameters=config.workflows_parameters,
                )
                for _ in references
            ]
            pipeline = Pipeline(
                payload,
                references,
                workflows,
                hub=self._hub,
                executor=self._executor,
                sink_dir=settings.sink_dir,
                jpeg_quality=settings.jpeg_quality,
            )
            await pipeline.start()
        finally:
            self._starting -= 1
        self._pipelines[pipeline.pipeline_id] = pipeline
        if payload.consumption_timeout is not None:
            timer = asyncio.create_task(
                self._expire_unconsumed(pipeline, payload.consumption_timeout)
            )
            self._timers.add(timer)
            timer.add_done_callback(self._timers.discard)
        log.info(
            "pipeline %s started on %s",
            pipeline.pipeline_id[:8],
            ", ".join(r.shown for r in references),
        )
        return pipeline

    async def _expire_unconsumed(self, pipeline: Pipeline, timeout: float) -> None:
        """The reference's ``consumption_timeout``: terminate once nobody has consumed a
        result for ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        while pipeline.pipeline_id in self._pipelines:
            due = pipeline.last_consumed + timeout
            if loop.time() >= due:
                log.info("pipeline %s: not consumed for %gs", pipeline.pipeline_id[:8], timeout)
                await self.terminate(pipeline.pipeline_id)
                return
            await asyncio.sleep(due - loop.time())  # a deadline: nothing else says time is up

    async def terminate(self, pipeline_id: str) -> None:
        pipeline = self.get(pipeline_id)
        del self._pipelines[pipeline_id]
        await pipeline.terminate()
        log.info("pipeline %s terminated", pipeline_id[:8])

    async def close_all(self) -> None:
        for timer in list(self._timers):
            timer.cancel()
        await asyncio.gather(*self._timers, return_exceptions=True)
        for pipeline_id in list(self._pipelines):
            await self.terminate(pipeline_id)
