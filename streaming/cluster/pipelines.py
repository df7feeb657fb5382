"""Pipelines on Ray: each one a detached actor named by its pipeline id, which Ray restarts
elsewhere when its node dies; any replica serves ``/inference_pipelines/*`` for all of them.

An actor hosts the embedded server's own ``PipelineManager`` with this one pipeline (no
store: Ray keeps the actor, and its constructor's arguments, across restarts). A restart runs
the constructor again with the same id and request: the sources reconnect and results flow
again after the camera's reconnect time. The replica that took the request validates it first
(the same checks as the embedded server) and inlines a named workflow, so every node runs the
same specification whatever its workflow directory holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayTaskError

from sources.hub import SourceHub
from sources.kinds import Opening, opener

from ..config import Settings
from ..egress import EgressPolicy
from ..errors import NotReady, TooManySessions
from ..events.writer import event_writer
from ..inference.registry import ModelRegistry
from ..metrics import Metrics
from ..pipelines import InitialisePipelinePayload, PipelineManager, PipelineNotFound
from ..pipelines.models import ConsumePayload, resolve_references
from ..pipelines.status import PipelineStatus
from ..storage import private_process
from ..tasks import TaskOwner
from ..watching import Ended, PipelineResult, Watcher
from ..workflows.library import WorkflowLibrary
from ..workflows.runner import OutputNames
from .directory import METRICS_PERIOD_S, directory
from .models import deployed_models, session_opener
from .names import NAMESPACE
from .resources import actor_resources

__all__ = ["ClusterPipelines", "PipelineActor"]

log = logging.getLogger(__name__)

# Pipeline ids are UUIDs; the namespace's other actors (the worker directory) are not.
_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# A call to an actor that is being restarted waits for it; these bound how long a request
# does before it answers what it knows.
_CALL_S = 10.0
_WATCH_POLL_S = 2.0
# Placing the actor, loading its model and subscribing to its cameras; beyond this no node
# can take it (its resources are not free anywhere) and the request says so.
_START_S = 120.0


class PipelineNotPlaced(NotReady):
    """No node of the cluster has the resources a pipeline's actor asks for."""

    code = "pipeline_not_placed"


class PipelineRestarting(NotReady):
    """The pipeline's actor is being restarted (its node died): it exists, and answers again
    once it runs elsewhere. ``status`` and ``consume`` answer with what they know instead."""

    code = "pipeline_restarting"

    @property
    def headers(self) -> dict[str, str] | None:
        return {"Retry-After": "2"}


def raised(error: RayTaskError) -> BaseException:
    """What an actor's method raised (Ray wraps it, with the actor's traceback in its text):
    our own errors keep their status and message; anything else stays Ray's."""
    cause = error.cause
    return cause if isinstance(cause, Exception) else error


@ray.remote(max_restarts=-1)
class PipelineActor:
    """One pipeline, run by a ``PipelineManager`` of its own in this actor's process."""

    def __init__(self, settings: Settings, pipeline_id: str, request: dict[str, Any]) -> None:
        # An async actor: this runs on the actor's event loop, which runs every method too.
        private_process(settings)  # this process is the server's: its evidence is private
        self._id = pipeline_id
        self._node = ray.get_runtime_context().get_node_id()
        self._executor = ThreadPoolExecutor(settings.workflow_threads, "workflow")
        opening = Opening(
            read_timeout=settings.rtsp_read_timeout,
            max_backoff=settings.rtsp_max_backoff,
            pin=EgressPolicy(settings.allowed_networks).pin,
            **settings.decode.opening_fields(),
        )
        self._hub = SourceHub(opener(opening))
        self._metrics = Metrics()
        # The cluster's event store (VISIONSTREAM_EVENTS_URL: PostgreSQL every node reaches).
        self._events = event_writer(settings, self._metrics)
        self._models = ModelRegistry(
            settings, self._metrics, session_opener(deployed_models(settings))
        )
        self._manager = PipelineManager(
            settings,
            self._models,
            self._hub,
            self._executor,
            WorkflowLibrary(None, settings.default_model),
            metrics=self._metrics,
            events=self._events,
        )
        self._latest: PipelineResult | None = None
        self._sequence = 0
        self._ended: dict[int, str] = {}  # the sources that stopped, and why
        self._changed = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._started: asyncio.Future[None] = loop.create_future()
        self._tasks = TaskOwner(f"pipeline-actor-{pipeline_id[:8]}")
        self._tasks.spawn(self._run(request), "run")
        # Its sources' series (frames, reconnects, counts) reach the cluster's /metrics
        # through the directory, as the replicas' do.
        self._tasks.spawn(self._report_metrics(), "report_metrics")

    async def _run(self, request: dict[str, Any]) -> None:
        try:
            payload = InitialisePipelinePayload.model_validate(request)
            await self._manager.initialise(payload, self._id)
        except BaseException as exc:
            self._started.set_exception(exc)
            raise
        self._started.set_result(None)
        pipeline = self._manager.get(self._id)
        pipeline.watch(self._keep_latest, self._keep_ended)
        log.info("pipeline %s runs on node %s", self._id[:8], self._node[:8])
        # A consumption timeout terminates the pipeline inside the manager: the actor goes too.
        await pipeline.wait_terminated()
        if len(self._manager) == 0:
            if self._events is not None:  # what the pipeline said is written before it goes
                await asyncio.to_thread(self._events.close)
            ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    async def _report_metrics(self) -> None:
        directory_actor = directory()
        while True:
            await asyncio.sleep(METRICS_PERIOD_S)  # a period, not a wait for something
            exposition = self._metrics.render().decode()
            directory_actor.report_metrics.remote(f"pipeline-{self._id[:8]}", exposition)

    def _keep_latest(self, result: PipelineResult) -> None:
        self._latest = result
        self._sequence += 1
        self._changed.set()

    def _keep_ended(self, source_id: int | None, why: str) -> None:
        if source_id is not None:
            self._ended[source_id] = why
            self._changed.set()

    async def started(self) -> None:
        """Once the pipeline runs; raises why it could not start."""
        await asyncio.shield(self._started)

    async def node(self) -> str:
        return self._node

    async def status(self) -> dict[str, Any]:
        await asyncio.shield(self._started)  # a restarted actor: once its pipeline runs again
        return await self._manager.status(self._id)

    async def manage(self, method: str, *args: Any) -> Any:
        """The manager's ``method`` on this pipeline (``pause``, ``resume``,
        ``remove_source``, ``set_describing``, ``describe_event``), once it started."""
        await asyncio.shield(self._started)
        return await getattr(self._manager, method)(self._id, *args)

    async def consume(self, payload: ConsumePayload) -> dict[str, list[Any]]:
        await asyncio.shield(self._started)
        return await self._manager.consume(self._id, payload)

    async def add_source(self, reference: str | int, sub_stream: str | None = None) -> int:
        """The new source's id."""
        await asyncio.shield(self._started)
        return await self._manager.add_source(self._id, reference, sub_stream=sub_stream)

    async def request(self) -> dict[str, Any]:
        await asyncio.shield(self._started)
        return self._manager.get(self._id).payload.model_dump(mode="json", exclude_unset=True)

    async def source_ids(self) -> list[int]:
        await asyncio.shield(self._started)
        return self._manager.get(self._id).source_ids

    async def outputs(self) -> OutputNames:
        """What a viewer selects from: the workflow stays here, and so do its models."""
        await asyncio.shield(self._started)
        return OutputNames.of(self._manager.get(self._id).outputs)

    async def next_result(
        self, after: int, wait_s: float
    ) -> tuple[int, PipelineResult | None, dict[int, str]]:
        """The latest result once it is newer than ``after`` (a result count), waiting up to
        ``wait_s``; a watcher that falls behind gets the newest, as a realtime viewer should.
        Also the sources that stopped, and why (a viewer of one of them ends)."""
        if self._sequence <= after:
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wait_s)
        latest = self._latest if self._sequence > after else None
        return self._sequence, latest, dict(self._ended)

    async def terminate(self) -> None:
        """Stops the pipeline (sinks flushed); the caller then removes the actor."""
        with contextlib.suppress(PipelineNotFound):
            await self._manager.terminate(self._id)
        await asyncio.to_thread(self._hub.close)
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._models.close()


def _unheard(source_id: int | None, why: str) -> None:
    """A watcher that does not ask when sources stop."""


class RemotePipeline:
    """A pipeline actor as a WebRTC session watches it (``WatchedPipeline``): its results
    polled from the actor, newest first, across the actor's restarts. The workflow runs in
    the actor only: a viewer gets its output names, and compiles (and loads) nothing."""

    def __init__(
        self, pipeline_id: str, actor: Any, outputs: OutputNames, source_ids: list[int]
    ) -> None:
        self.pipeline_id = pipeline_id
        self.outputs = outputs
        self.source_ids = source_ids
        self._actor = actor
        self._tasks = TaskOwner(f"watch-{pipeline_id[:8]}")

    def camera_feed(self, source_id: int) -> None:
        """A camera's packets stay in its actor: no copy of them restreamed from here."""
        return None

    def watch(self, watcher: Watcher, ended: Ended | None = None) -> Callable[[], None]:
        task = self._tasks.spawn(self._poll(watcher, ended or _unheard), "poll")

        def stop() -> None:
            if task is not None:
                task.cancel()

        return stop

    async def _poll(self, watcher: Watcher, ended: Ended) -> None:
        seen = 0
        told: set[int] = set()
        while True:
            try:
                sequence, result, stopped = await self._actor.next_result.remote(
                    seen, _WATCH_POLL_S
                )
            except RayActorError:
                # Unreachable for now (Ray restarts it elsewhere), or terminated for good.
                if not await self._exists():
                    ended(None, f"pipeline {self.pipeline_id} was terminated")
                    return
                await asyncio.sleep(_WATCH_POLL_S / 4)  # a pause between polls, not a wait
                continue
            except Exception as exc:  # the session shows what it has; nothing to retry
                log.warning("pipeline %s: watching ended: %s", self.pipeline_id[:8], exc)
                ended(None, f"watching pipeline {self.pipeline_id} failed: {exc}")
                return
            for source_id, why in stopped.items():
                if source_id not in told:
                    told.add(source_id)
                    ended(source_id, why)
            if sequence < seen:  # a restarted actor counts from 0 again
                seen = 0
                continue
            seen = sequence
            if result is not None:
                watcher(result)

    async def _exists(self) -> bool:
        try:
            await asyncio.to_thread(ray.get_actor, self.pipeline_id, namespace=NAMESPACE)
        except ValueError:
            return False
        return True


class ClusterPipelines:
    """``Pipelines`` for a Ray Serve replica: every pipeline of the cluster, none of them in
    this process. A replica stopping leaves them running."""

    def __init__(self, settings: Settings, library: WorkflowLibrary) -> None:
        self._settings = settings
        self._library = library
        self._options = actor_resources(settings.ray_pipeline_resources)

    def __len__(self) -> int:
        return 0

    async def _names(self) -> list[str]:
        actors = await asyncio.to_thread(ray.util.list_named_actors, all_namespaces=True)
        return [a["name"] for a in actors if a["namespace"] == NAMESPACE and _ID.match(a["name"])]

    async def _actor(self, pipeline_id: str) -> Any:
        if _ID.match(pipeline_id):
            with contextlib.suppress(ValueError):
                return await asyncio.to_thread(ray.get_actor, pipeline_id, namespace=NAMESPACE)
        raise PipelineNotFound(f"Could not find InferencePipeline with id={pipeline_id}.")

    async def _call(self, pipeline_id: str, method: str, *args: Any, wait_s: float = 0.0) -> Any:
        """``method`` of the pipeline's actor; ``wait_s``: the call's own wait (a long poll)
        on top of the usual bound. ``PipelineNotFound`` once it is gone for good;
        ``PipelineRestarting`` while Ray moves it (its node died): a pipeline that moves
        exists, and a program polling it must not take it for deleted."""
        bound = wait_s + _CALL_S
        for attempt in range(2):
            actor = await self._actor(pipeline_id)  # not found: gone for good
            try:
                return await asyncio.wait_for(getattr(actor, method).remote(*args), bound)
            except RayTaskError as exc:  # the actor raised: our own error, with its status
                raise raised(exc) from None
            except ActorUnavailableError:  # unreachable for now: Ray is restarting it
                raise PipelineRestarting(f"pipeline {pipeline_id} is restarting") from None
            except RayActorError:
                # Calls in flight when its node died fail so too. A call made now waits for
                # the restarted actor, and fails at once if it was terminated.
                if attempt:
                    break
            except TimeoutError:
                raise PipelineRestarting(
                    f"pipeline {pipeline_id} did not answer within {bound:g} s (restarting)"
                ) from None
        raise PipelineNotFound(f"Could not find InferencePipeline with id={pipeline_id}.")

    async def initialise(
        self, payload: InitialisePipelinePayload, pipeline_id: str | None = None
    ) -> str:
        settings = self._settings
        if len(await self._names()) >= settings.max_pipelines:
            raise TooManySessions(
                f"{settings.max_pipelines} pipelines are running (VISIONSTREAM_MAX_PIPELINES)"
            )
        video = payload.video_configuration
        resolve_references(
            video.video_reference, settings.allow_local_sources, sub_streams=video.sub_streams
        )
        config = payload.processing_configuration
        inline = config.model_copy(
            update={"workflow_specification": self._library.specification(config)}
        )
        request = payload.model_copy(update={"processing_configuration": inline}).model_dump(
            mode="json", exclude={"api_key"}, exclude_unset=True
        )
        pipeline_id = pipeline_id or str(uuid.uuid4())
        actor = PipelineActor.options(  # type: ignore[attr-defined]
            name=pipeline_id, namespace=NAMESPACE, lifetime="detached", **self._options
        ).remote(settings, pipeline_id, request)
        failure: BaseException | None = None
        try:
            await asyncio.wait_for(actor.started.remote(), _START_S)
        except RayTaskError as exc:
            failure = raised(exc)
        except TimeoutError:
            failure = PipelineNotPlaced(
                f"pipeline not started within {_START_S:g} s: no node has "
                f"{settings.ray_pipeline_resources} free (VISIONSTREAM_RAY_PIPELINE_RESOURCES)"
            )
        if failure is not None:
            ray.kill(actor, no_restart=True)
            raise failure
        return pipeline_id

    async def listing(self) -> list[dict[str, Any]]:
        async def placement(pipeline_id: str) -> dict[str, Any]:
            node = None
            with contextlib.suppress(PipelineNotFound, PipelineRestarting, GetTimeoutError):
                node = await self._call(pipeline_id, "node")
            return {"pipeline_id": pipeline_id, "node": node}  # None: restarting

        return list(await asyncio.gather(*(placement(p) for p in await self._names())))

    async def status(self, pipeline_id: str) -> dict[str, Any]:
        try:
            return dict(await self._call(pipeline_id, "status"))
        except PipelineRestarting:
            return PipelineStatus.restarting_report()

    async def pause(self, pipeline_id: str) -> None:
        await self._call(pipeline_id, "manage", "pause")

    async def set_describing(self, pipeline_id: str, enabled: bool) -> dict[str, Any]:
        return dict(await self._call(pipeline_id, "manage", "set_describing", enabled))

    async def describe_event(
        self, pipeline_id: str, event: dict[str, Any], snapshot: Path
    ) -> dict[str, Any]:
        return dict(await self._call(pipeline_id, "manage", "describe_event", event, snapshot))

    async def resume(self, pipeline_id: str) -> None:
        await self._call(pipeline_id, "manage", "resume")

    async def consume(self, pipeline_id: str, payload: ConsumePayload) -> dict[str, list[Any]]:
        try:
            return dict(
                await self._call(pipeline_id, "consume", payload, wait_s=payload.wait_seconds)
            )
        except PipelineRestarting:  # nothing new while it moves, as when a camera stalls
            return {"outputs": [], "frames_metadata": []}

    async def add_source(
        self, pipeline_id: str, reference: str | int, sub_stream: str | None = None
    ) -> int:
        """In the pipeline's actor, on its node. (An actor Ray restarts starts from the
        request it was made with: added sources are lost then.)"""
        return int(await self._call(pipeline_id, "add_source", reference, sub_stream))

    async def remove_source(self, pipeline_id: str, source_id: int) -> None:
        await self._call(pipeline_id, "manage", "remove_source", source_id)

    async def terminate(self, pipeline_id: str) -> None:
        actor = await self._actor(pipeline_id)
        with contextlib.suppress(RayActorError, TimeoutError):
            await asyncio.wait_for(actor.terminate.remote(), _CALL_S)
        ray.kill(actor, no_restart=True)
        log.info("pipeline %s terminated", pipeline_id[:8])

    async def watched(self, pipeline_id: str) -> RemotePipeline:
        outputs = await self._call(pipeline_id, "outputs")
        source_ids = list(await self._call(pipeline_id, "source_ids"))
        return RemotePipeline(pipeline_id, await self._actor(pipeline_id), outputs, source_ids)

    async def restore(
        self,
        check: Callable[[InitialisePipelinePayload], Awaitable[None]],
        stopping: Callable[[], bool],
        started: Callable[[str, InitialisePipelinePayload], Awaitable[None]] | None = None,
    ) -> None:
        """Nothing to restore: Ray keeps the actors."""

    async def close_all(self) -> None:
        """A replica stopping leaves the cluster's pipelines running."""
