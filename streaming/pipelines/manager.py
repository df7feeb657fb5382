"""PipelineManager: the server's monitoring pipelines, by id, kept across restarts."""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Awaitable, Callable, Container
from concurrent.futures import Executor
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import cv2
from pydantic import ValidationError

from sources.hub import SourceHub
from sources.kinds import PUBLISHED_SCHEME

from ..config import Settings
from ..errors import Conflict, NotFound, StreamingError, TooManySessions
from ..events import EventRecord, EventRecorder
from ..events.describer import EventDescriber
from ..inference.registry import ModelRegistry
from ..language import Providers
from ..metrics import Metrics, SourceMetrics
from ..tasks import TaskOwner
from ..watching import WatchedPipeline
from ..workflows import parse_spec
from ..workflows.library import WorkflowLibrary
from .assembly import PipelineAssembly
from .models import (
    ConsumePayload,
    InitialisePipelinePayload,
    resolve_references,
)
from .pipeline import Pipeline
from .store import PipelineStore

__all__ = ["PipelineManager", "PipelineNotFound", "Pipelines"]

log = logging.getLogger(__name__)

Started = Callable[[str, InitialisePipelinePayload], Awaitable[None]]
"""Told of each pipeline ``restore`` started again: its id and request."""


class PipelineNotFound(NotFound):
    """No pipeline with that id."""

    code = "pipeline_not_found"


class Pipelines(Protocol):
    """What ``/inference_pipelines/*`` and the server's lifespan ask of the pipelines,
    wherever they run: this process (``PipelineManager``) or Ray actors across a cluster
    (``streaming.cluster.pipelines``)."""

    def __len__(self) -> int:
        """Pipelines this worker runs itself."""

    async def initialise(
        self, payload: InitialisePipelinePayload, pipeline_id: str | None = None
    ) -> str: ...

    async def add_source(
        self, pipeline_id: str, reference: str | int, *, sub_stream: str | None = None
    ) -> int:
        """Starts one more source on a running pipeline (``sub_stream``: its sub-stream,
        decoded instead); returns its id."""

    async def remove_source(self, pipeline_id: str, source_id: int) -> None: ...

    async def listing(self) -> list[dict[str, Any]]:
        """Every pipeline of the deployment: ``pipeline_id`` and the ``node`` it runs on."""

    async def status(self, pipeline_id: str) -> dict[str, Any]: ...

    async def pause(self, pipeline_id: str) -> None: ...

    async def resume(self, pipeline_id: str) -> None: ...

    async def terminate(self, pipeline_id: str) -> None: ...

    async def consume(self, pipeline_id: str, payload: ConsumePayload) -> dict[str, list[Any]]:
        """``outputs`` and ``frames_metadata``: one slot per source, the next result's filled."""

    async def watched(self, pipeline_id: str) -> WatchedPipeline:
        """The pipeline a WebRTC session shows."""

    async def restore(
        self,
        check: Callable[[InitialisePipelinePayload], Awaitable[None]],
        stopping: Callable[[], bool],
        started: Started | None = None,
    ) -> None: ...

    async def close_all(self) -> None: ...

    async def set_describing(self, pipeline_id: str, enabled: bool) -> dict[str, Any]:
        """Switches a pipeline's event descriptions on or off; their counts."""

    async def describe_event(
        self, pipeline_id: str, event: dict[str, Any], snapshot: Path
    ) -> dict[str, Any]:
        """Describes a stored event of the pipeline now (its ``snapshot``, a JPEG); the
        fields to write onto it."""


class PipelineManager:
    """The server's monitoring pipelines, by id: started, limited in number, terminated.

    Each started pipeline's request is saved in ``store`` and forgotten when the pipeline is
    terminated; ``close_all`` (the server stopping) stops pipelines but keeps their requests,
    which the next server on the same store starts again (``restore``)."""

    def __init__(
        self,
        settings: Settings,
        models: ModelRegistry,
        hub: SourceHub,
        executor: Executor,
        library: WorkflowLibrary,
        store: PipelineStore | None = None,
        metrics: Metrics | None = None,
        events: EventRecorder | None = None,
        language: Providers | None = None,
    ) -> None:
        self._settings = settings
        self._parts = PipelineAssembly(settings, models, hub, library, metrics, events, language)
        self._store = store or PipelineStore(None)
        self._library = library
        self._hub = hub
        self._executor = executor
        self._analytics: dict[str, list[SourceMetrics]] = {}
        """Per pipeline, each source's analytics series (removed when it stops)."""
        self._pipelines: dict[str, Pipeline] = {}
        self._starting = 0
        self._timers = TaskOwner("pipelines")
        """Consumption timeouts, one per pipeline that has one."""

    def __len__(self) -> int:
        return len(self._pipelines)

    def _describer(self, pipeline_id: str) -> EventDescriber:
        describer = self.get(pipeline_id).describer
        if describer is None:
            raise Conflict(
                f"pipeline {pipeline_id} describes no events: start it with 'describe' "
                "(a provider and a prompt)"
            )
        return describer

    async def set_describing(self, pipeline_id: str, enabled: bool) -> dict[str, Any]:
        describer = self._describer(pipeline_id)
        await asyncio.to_thread(describer.switch, enabled)  # said on MQTT too, where it is
        return describer.stats()

    async def describe_event(
        self, pipeline_id: str, event: dict[str, Any], snapshot: Path
    ) -> dict[str, Any]:
        describer = self._describer(pipeline_id)
        image = await asyncio.to_thread(cv2.imread, str(snapshot))
        if image is None:
            raise Conflict(f"the snapshot of event {event['id']} is no image")
        record = EventRecord(
            event["kind"],
            event["pipeline"],
            event["source"],
            event["step"],
            class_name=event["class_name"],
        )
        return await asyncio.to_thread(describer.describe_now, record, image)

    def get(self, pipeline_id: str) -> Pipeline:
        pipeline = self._pipelines.get(pipeline_id)
        if pipeline is None:
            raise PipelineNotFound(f"Could not find InferencePipeline with id={pipeline_id}.")
        return pipeline

    async def initialise(
        self,
        payload: InitialisePipelinePayload,
        pipeline_id: str | None = None,
        *,
        published: Container[str] = (),
        keep: bool = True,
    ) -> str:
        """Starts a pipeline (under ``pipeline_id`` when restoring one) and saves its request
        (unless not ``keep``: a WHIP publisher's, which a restart cannot bring back); returns
        its id. ``published``: stream URLs of this server's publishers it may read."""
        settings = self._settings
        if len(self._pipelines) + self._starting >= settings.max_pipelines:
            raise TooManySessions(
                f"{settings.max_pipelines} pipelines are running (VISIONSTREAM_MAX_PIPELINES)"
            )
        video = payload.video_configuration
        references = resolve_references(
            video.video_reference, settings.allow_local_sources, published, video.sub_streams
        )
        config = payload.processing_configuration
        specification = self._library.specification(config)
        self._starting += 1
        pipeline_id = pipeline_id or str(uuid.uuid4())
        analytics = [m for r in references if (m := self._parts.series(pipeline_id, r)) is not None]
        events, recording = self._parts.recording(payload, pipeline_id)
        describer = self._parts.describer(payload, pipeline_id)
        if describer is not None:  # every event of its sources' workflows goes past it
            events = describer.wrap(events)
        try:
            if describer is not None:
                await asyncio.to_thread(describer.open)
            spec = parse_spec(specification)
            # One compiled workflow per source: blocks may keep per-stream state (trackers).
            workflows = [
                await self._parts.workflow(
                    spec, config, pipeline_id, ref, analytics[i] if analytics else None, events
                )
                for i, ref in enumerate(references)
            ]
            pipeline = Pipeline(
                payload,
                references,
                workflows,
                hub=self._hub,
                executor=self._executor,
                sink_dir=settings.sink_dir,
                jpeg_quality=settings.jpeg_quality,
                pipeline_id=pipeline_id,
                source_metrics=analytics,
                events=events,
                recording=recording,
                pin=self._parts.egress.pin,
                describer=describer,
            )
            await pipeline.start()
        except BaseException:
            for series in analytics:
                series.close()
            if describer is not None:
                describer.close()
            raise
        finally:
            self._starting -= 1
        self._analytics[pipeline.pipeline_id] = analytics
        # Listed before the save awaits: whatever happens next, close_all finds it.
        self._pipelines[pipeline.pipeline_id] = pipeline
        if keep:
            await self._save(pipeline)
        if payload.consumption_timeout is not None:
            expiry = self._expire_unconsumed(pipeline, payload.consumption_timeout)
            self._timers.spawn(expiry, f"expire-{pipeline.pipeline_id[:8]}")
        log.info(
            "pipeline %s started on %s",
            pipeline.pipeline_id[:8],
            ", ".join(r.shown for r in references),
        )
        return pipeline.pipeline_id

    async def add_source(
        self,
        pipeline_id: str,
        reference: str | int,
        *,
        published: Container[str] = (),
        sub_stream: str | None = None,
    ) -> int:
        """Starts one more source on a running pipeline; returns its id. The stored request
        lists it (a restart starts it again, numbered afresh), unless ``published`` has it."""
        pipeline = self.get(pipeline_id)
        subs = {str(reference): sub_stream} if sub_stream is not None else None
        allow_local = self._settings.allow_local_sources
        (resolved,) = resolve_references(reference, allow_local, published, subs)
        source = replace(resolved, source_id=pipeline.next_source_id)
        series = self._parts.series(pipeline_id, source)
        config = pipeline.payload.processing_configuration
        try:
            spec = parse_spec(self._library.specification(config))
            workflow = await self._parts.workflow(
                spec, config, pipeline_id, source, series, pipeline.events
            )
            try:
                await pipeline.add_source(source, workflow, series)
            except BaseException:
                await asyncio.to_thread(workflow.close)
                raise
        except BaseException:
            if series is not None:
                series.close()
            raise
        if series is not None:
            self._analytics.setdefault(pipeline_id, []).append(series)
        await self._save(pipeline)
        return source.source_id

    async def remove_source(self, pipeline_id: str, source_id: int) -> None:
        """Stops one source of a running pipeline; the others go on."""
        pipeline = self.get(pipeline_id)
        slot = await pipeline.remove_source(source_id)
        if slot.metrics is not None:
            slot.metrics.close()
            series = self._analytics.get(pipeline_id, [])
            if slot.metrics in series:
                series.remove(slot.metrics)
        await self._save(pipeline)

    async def _save(self, pipeline: Pipeline) -> None:
        """The request as it now stands (its sources as they now are, but for publishers'
        streams, which end with the server), for a restart."""
        video = pipeline.payload.video_configuration
        video.video_reference, video.sub_streams = pipeline.references, pipeline.sub_streams
        payload = pipeline.payload.model_copy(deep=True)
        payload.video_configuration.video_reference = [
            r for r in pipeline.references if not str(r).startswith(PUBLISHED_SCHEME)
        ]
        if not payload.video_configuration.video_reference:
            return  # a publisher's own pipeline: nothing a restart could read
        try:
            await asyncio.to_thread(self._store.save, pipeline.pipeline_id, payload)
        except OSError as exc:  # the pipeline runs; only a restart would lose the change
            log.error("pipeline %s: request not saved: %s", pipeline.pipeline_id[:8], exc)

    async def listing(self) -> list[dict[str, Any]]:
        node = socket.gethostname()
        return [{"pipeline_id": pipeline_id, "node": node} for pipeline_id in self._pipelines]

    async def status(self, pipeline_id: str) -> dict[str, Any]:
        return self.get(pipeline_id).report()

    async def pause(self, pipeline_id: str) -> None:
        self.get(pipeline_id).pause()

    async def resume(self, pipeline_id: str) -> None:
        self.get(pipeline_id).resume()

    async def consume(self, pipeline_id: str, payload: ConsumePayload) -> dict[str, list[Any]]:
        return await self.get(pipeline_id).consume(payload)

    async def watched(self, pipeline_id: str) -> Pipeline:
        return self.get(pipeline_id)

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
        """Stops the pipeline for good: its request is forgotten too."""
        await self._stop(pipeline_id)
        await asyncio.to_thread(self._store.forget, pipeline_id)
        log.info("pipeline %s terminated", pipeline_id[:8])

    async def _stop(self, pipeline_id: str) -> None:
        pipeline = self.get(pipeline_id)
        del self._pipelines[pipeline_id]
        await pipeline.terminate()
        for series in self._analytics.pop(pipeline_id, []):
            series.close()

    async def restore(
        self,
        check: Callable[[InitialisePipelinePayload], Awaitable[None]],
        stopping: Callable[[], bool],
        started: Started | None = None,
    ) -> None:
        """Starts every stored pipeline again under its id, each request first validated and
        passed to ``check`` (the server's checks, e.g. where it may connect), and told to
        ``started`` once it runs (its pushes start). A request that is refused now is logged
        and forgotten; the others start. Ends early, keeping what is left, once
        ``stopping()`` (the server shutting down)."""
        for record in await asyncio.to_thread(self._store.stored):
            if stopping():
                log.info("pipelines not restarted: the server is shutting down")
                return
            short = record.pipeline_id[:8]
            try:
                payload = InitialisePipelinePayload.model_validate(record.request)
                await check(payload)
                await self.initialise(payload, record.pipeline_id)
                if started is not None:
                    await started(record.pipeline_id, payload)
            except (StreamingError, ValidationError) as exc:
                log.warning("pipeline %s not restarted, forgotten: %s", short, exc)
                await asyncio.to_thread(self._store.forget, record.pipeline_id)
                continue
            except Exception:  # not the request's fault (a model that failed to load): kept
                log.exception("pipeline %s not restarted; kept for the next start", short)
                continue
            log.info("pipeline %s restarted from its stored request", short)

    async def close_all(self) -> None:
        """The server stopping: every pipeline stops; their requests stay stored."""
        await self._timers.close()
        for pipeline_id in list(self._pipelines):
            await self._stop(pipeline_id)
            log.info("pipeline %s stopped with the server", pipeline_id[:8])
        self._store.close()
