"""App factory: one ServerState per app; models prepared in the background at start."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI

from sources import CaptureFactory
from sources.hub import SourceHub
from sources.kinds import Opening, opener

from ..config import Settings
from ..egress import EgressPolicy
from ..events import EventRecorder
from ..events.writer import event_writer
from ..inference.backends import SessionOpener, open_session
from ..inference.default_model import DEFAULT_MODEL_ID, ensure_default_model
from ..inference.manifest import MANIFEST_FILE
from ..inference.model import DetectionModel
from ..inference.registry import ModelRegistry
from ..language import Providers
from ..memory import MemoryTrimmer
from ..metrics import Metrics
from ..peer.publisher import Publishers
from ..peer.sessions import SessionRegistry
from ..pipelines import PipelineManager, Pipelines, PipelineStore
from ..restreams import Restreams
from ..rtc import BitrateLimits, install_for_server
from ..rtc.reach import unreachable_server
from ..storage import private_directories
from ..tasks import TaskOwner
from ..workflows.library import WorkflowLibrary
from . import routes
from .access_log import install_access_log_masking
from .auth import ApiKeyGuard
from .docs import add_docs
from .handlers import install_error_handlers
from .page import PageMount, web_root
from .routes import pipelines, v2
from .shutdown import drain
from .state import Deployment, ServerState
from .uploads import UploadDirectory

__all__ = ["PipelineFactory", "PipelineParts", "create_app"]


@dataclass(frozen=True)
class PipelineParts:
    """What the app's pipelines may use of it: the pipelines in this process use them all,
    the Ray deployment's (actors, each with its own) only the settings and the library."""

    settings: Settings
    models: ModelRegistry
    hub: SourceHub
    executor: Executor
    library: WorkflowLibrary
    metrics: Metrics
    events: EventRecorder | None
    language: Providers | None = None


PipelineFactory = Callable[[PipelineParts], Pipelines]
"""Builds the app's pipelines from its parts."""

log = logging.getLogger("visionstream")


_API_DESCRIPTION = """\
Real-time video inference over WebRTC, wire-compatible with the published `inference-sdk`.
A browser, a Python program or a camera sends video; every frame runs through a workflow
(detection, tracking, analytics) and comes back annotated, with its results on a data
channel. The same workflows run on single images over HTTP, and on cameras as monitoring
pipelines with events and recordings.

Every route but `/healthz`, `/readyz` and the page needs the API key when the server has one
(`VISIONSTREAM_API_KEY`): `Authorization: Bearer KEY`, or `api_key` in the body or query.
Errors are JSON: `{"message": ...}` with the HTTP status (and a stable `code`).
"""

_API_AREAS = [
    {"name": "webrtc", "description": "Sessions: video in, annotated video and results out."},
    {"name": "WHIP and WHEP", "description": "Publishing to pipelines, watching them (RFC 9725)."},
    {"name": "pipelines", "description": "Monitoring pipelines on cameras and files."},
    {"name": "restream", "description": "A pipeline source's annotated video: HLS, MJPEG, JPEG."},
    {"name": "events", "description": "What pipelines saw: events, snapshots, recordings."},
    {"name": "workflows", "description": "Workflows: listed, described, validated, run on images."},
    {"name": "inference", "description": "One model on images (inference-sdk's `infer`)."},
    {"name": "models", "description": "The models directory: listed, loaded, unloaded."},
    {"name": "KServe V2", "description": "The KServe V2 / Triton protocol on our models."},
    {"name": "health", "description": "Liveness, readiness, metrics and the server's info."},
]
"""The API's areas, in the order the docs show them (each router is tagged with one)."""


async def _prepare_models(state: ServerState) -> None:
    settings = state.settings
    # The one line a newcomer waits for: where to point the browser.
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    host = f"[{host}]" if ":" in host else host
    url = f"http://{host}:{settings.port}"
    try:
        if settings.prepare_default_model and settings.default_model == DEFAULT_MODEL_ID:
            await asyncio.to_thread(ensure_default_model, settings.models_dir, log.info)
        log.info("loading and warming up %s", settings.default_model)
        model = await asyncio.to_thread(state.models.get, settings.default_model)
    except Exception as exc:
        state.startup_error = f"default model unavailable: {exc}" + (
            f". With a network: visionstream models pull. Offline: copy "
            f"{settings.models_dir / DEFAULT_MODEL_ID} from a machine that has it, or add your "
            "own ONNX file (visionstream models add FILE --name NAME ...) and start with "
            "VISIONSTREAM_DEFAULT_MODEL=NAME"
            if settings.default_model == DEFAULT_MODEL_ID
            else ""
        )
        log.error("%s", state.startup_error)
        state.prepared.set()
        model = await _wait_for_model(state, url)
        state.startup_error = None
    state.ready.set()
    state.prepared.set()
    if state.listening is not None:
        await state.listening.wait()
    log.info("ready: %s (%s on %s)", url, model.name, model.session.device)


async def _wait_for_model(state: ServerState, url: str) -> DetectionModel:
    """The default model, once it is in the models directory and loads: looked for every
    ``model_recheck_s`` (a failed load is said once per new reason)."""
    settings = state.settings
    directory = settings.models_dir / settings.default_model
    log.warning(
        "not ready: %s answers /healthz and its page, and 503 to streams, pipelines and "
        "inference, until %s loads; it looks for it in %s every %g s",
        url,
        settings.default_model,
        directory,
        settings.model_recheck_s,
    )
    said = state.startup_error
    while True:
        await asyncio.sleep(settings.model_recheck_s)
        if not (directory / MANIFEST_FILE).is_file():
            continue
        try:
            return await asyncio.to_thread(state.models.get, settings.default_model)
        except Exception as exc:
            if (why := f"default model unavailable: {exc}") != said:
                log.error("%s", why)
            said = state.startup_error = why


async def _restore_after(preparing: asyncio.Task[None], state: ServerState) -> None:
    # After the default model is loaded: pipelines using it then start without a second load.
    # A server stopped before it was ready keeps its stored pipelines as they are.
    await asyncio.gather(preparing, return_exceptions=True)
    if state.ready.is_set():
        await pipelines.restore_pipelines(state)


def local_pipelines(parts: PipelineParts) -> Pipelines:
    """Pipelines in this process, kept in the data directory across restarts."""
    settings = parts.settings
    store = PipelineStore(settings.data_dir / "pipelines" if settings.persist_pipelines else None)
    return PipelineManager(
        settings,
        parts.models,
        parts.hub,
        parts.executor,
        parts.library,
        store,
        parts.metrics,
        parts.events,
        parts.language,
    )


@dataclass(frozen=True)
class _Parts:
    """What a deployment plugs into the app: ``create_app``'s keyword arguments."""

    deployment: Deployment | None
    pipeline_factory: PipelineFactory
    model_opener: SessionOpener
    capture_factory: CaptureFactory | None


def _build_state(settings: Settings, metrics: Metrics, parts: _Parts) -> ServerState:
    registry = ModelRegistry(settings, metrics, parts.model_opener)
    executor = ThreadPoolExecutor(settings.workflow_threads, thread_name_prefix="workflow")
    publishers = Publishers(settings.max_sessions)
    opening = Opening(
        read_timeout=settings.rtsp_read_timeout,
        max_backoff=settings.rtsp_max_backoff,
        capture_factory=parts.capture_factory,
        published=publishers.open,
        pin=EgressPolicy(settings.allowed_networks).pin,
        **settings.decode.opening_fields(),
    )
    hub = SourceHub(opener(opening))
    library = WorkflowLibrary(settings.workflows_dir, settings.default_model)
    trimmer = MemoryTrimmer(settings.malloc_trim)
    events = event_writer(settings, metrics)
    language = Providers(
        settings.vlm, pin=EgressPolicy(settings.allowed_networks).pin, usage=metrics
    )
    pipelines = parts.pipeline_factory(
        PipelineParts(settings, registry, hub, executor, library, metrics, events, language)
    )
    state = ServerState(
        settings=settings,
        models=registry,
        sessions=SessionRegistry(
            settings.max_sessions, metrics, settings.max_sessions_per_address, trimmer
        ),
        metrics=metrics,
        executor=executor,
        hub=hub,
        publishers=publishers,
        pipelines=pipelines,
        restreams=Restreams(settings, pipelines, EgressPolicy(settings.allowed_networks).pin),
        workflows=library,
        uploads=UploadDirectory(settings.upload_dir),
        egress=EgressPolicy(settings.allowed_networks),
        auth=ApiKeyGuard(settings.api_key, settings.auth_failures_per_minute, auth=settings.auth),
        trimmer=trimmer,
        events=events,
        language=language,
        deployment=parts.deployment,
    )
    if (deployment := parts.deployment) is not None:
        state.sessions.on_change = lambda: deployment.report(state.load())
    return state


def _lifespan(
    settings: Settings, metrics: Metrics, parts: _Parts
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Builds the app's state at start (models prepared and pipelines restored in the
    background, as tasks of the app's own owner) and closes all of it at the end."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        private_directories(settings)  # before anything is written there
        state = _build_state(settings, metrics, parts)
        # DrainingServer (visionstream serve) marks the app before serving it.
        state.listening = asyncio.Event() if getattr(app.state, "binds_http", False) else None
        app.state.server = state
        if parts.deployment is None:  # a Ray node's replicas would each claim the RTSP port
            await state.restreams.start()
        startup = TaskOwner("server")
        preparing = startup.spawn(_prepare_models(state), "prepare_models")
        assert preparing is not None  # a new owner is not closing
        startup.spawn(_restore_after(preparing, state), "restore_pipelines")
        try:
            yield
        finally:
            await startup.close()
            await drain(state)  # done already when a signal started the shutdown
            await state.restreams.close()  # players told before their pipelines end
            await state.publishers.close_all()  # their pipeline sources stop first
            await state.pipelines.close_all()
            await asyncio.to_thread(state.hub.close)
            state.executor.shutdown(wait=True, cancel_futures=True)
            if state.events is not None:  # last: what sessions and pipelines said is written
                await asyncio.to_thread(state.events.close)
            state.models.close()
            if state.language is not None:
                state.language.close()
            state.uploads.close()
            state.trimmer.close()

    return lifespan


def create_app(
    settings: Settings | None = None,
    *,
    install_rtc: bool = True,
    deployment: Deployment | None = None,
    pipeline_factory: PipelineFactory = local_pipelines,
    model_opener: SessionOpener = open_session,
    capture_factory: CaptureFactory | None = None,
) -> FastAPI:
    """The server's app. ``install_rtc=False`` leaves aiortc and aioice as they are: for an
    app embedded in a process whose own peers must keep aiortc's behaviour (in-process
    tests); the server then answers frames one frame later and offers every interface.
    ``deployment`` shows the workers this app is one of in ``/healthz`` and ``/metrics``
    (a Ray deployment's replicas), ``model_opener`` runs its models (the Ray deployment's:
    maybe in a model deployment), ``pipeline_factory`` builds
    its pipelines (the Ray deployment's: actors across the cluster), and ``capture_factory``
    opens local devices (OpenCV's ``VideoCapture``; tests inject a capture)."""
    settings = settings or Settings()
    if install_rtc:
        # ICE on the configured addresses, frames released on their marker packet, VP8
        # without the denoiser: process-wide, which the server's process is for.
        limits = BitrateLimits(
            settings.video_start_kbps * 1000,
            settings.video_min_kbps * 1000,
            settings.video_max_kbps * 1000,
        )
        install_for_server(
            settings.ice_host_addresses,
            settings.video_kbps_per_megapixel,
            limits,
            settings.video_receive_max_kbps * 1000,
        )
        if unreachable := unreachable_server(settings.ice_host_addresses, settings.ice_servers):
            log.warning("%s", unreachable)
    metrics = Metrics()

    parts = _Parts(deployment, pipeline_factory, model_opener, capture_factory)
    lifespan = _lifespan(settings, metrics, parts)

    # Docs are ours (server/docs.py): offline assets, behind the API key.
    app = FastAPI(
        title="visionstream",
        description=_API_DESCRIPTION,
        openapi_tags=_API_AREAS,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    install_error_handlers(app)
    for router in routes.ROUTERS:  # in the order they are matched (routes/__init__.py)
        app.include_router(router)
    app.add_exception_handler(v2.V2Failure, v2.failure_response)
    install_access_log_masking()
    add_docs(app)
    root = web_root()
    if root is not None:  # last: the page's files answer only paths no route claimed
        app.router.routes.append(PageMount(root))
    else:
        log.warning("the browser page's files are missing; GET / will be 404")
    return app
