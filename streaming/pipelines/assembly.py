"""What a pipeline's sources are made of, as the manager starts them: each source's metrics
series, the events and recording of the pipeline, each source's compiled workflow."""

from __future__ import annotations

from sources.hub import SourceHub
from sources.kinds import PUBLISHED_SCHEME

from ..config import Settings
from ..egress import EgressPolicy
from ..errors import InvalidRequest
from ..events import EventRecorder
from ..events.announcing import Mail
from ..events.describer import EventDescriber
from ..inference.registry import ModelRegistry
from ..language import Providers
from ..mail_relay import refused_recipients, relay_server
from ..metrics import Metrics, SourceMetrics
from ..protocol.messages import WorkflowConfiguration
from ..workflows.blocks.base import BuildContext
from ..workflows.engine import CompiledWorkflow
from ..workflows.library import WorkflowLibrary
from ..workflows.runner import compile_config
from ..workflows.spec import WorkflowSpec
from .models import InitialisePipelinePayload, SourceReference
from .recording import Recording, SourceTriggers
from .substreams import ScaledEvents

__all__ = ["PipelineAssembly"]


class PipelineAssembly:
    """Makes the parts of a pipeline's sources; owns nothing it makes (the manager and the
    pipeline close them)."""

    def __init__(
        self,
        settings: Settings,
        models: ModelRegistry,
        hub: SourceHub,
        library: WorkflowLibrary,
        metrics: Metrics | None,
        events: EventRecorder | None,
        language: Providers | None = None,
    ) -> None:
        self._settings, self._models, self._hub = settings, models, hub
        self._library, self._metrics, self._events = library, metrics, events
        # Each source's workflow passes it when compiled (its webhook URLs), whatever
        # started the pipeline: the API, a WHIP publisher, a restart, a Ray actor.
        self.egress = EgressPolicy(settings.allowed_networks)
        self._language = language
        self._fallback_language: Providers | None = None

    def describer(
        self, payload: InitialisePipelinePayload, pipeline_id: str
    ) -> EventDescriber | None:
        """The pipeline's event descriptions (``payload.describe``); None: not asked for.
        Refused (400) where events are not stored or the provider is not configured."""
        config = payload.describe
        if config is None:
            return None
        if self._events is None:
            raise InvalidRequest(
                "describe: descriptions are stored on events, and this server keeps none "
                "(VISIONSTREAM_STORE_EVENTS is false)"
            )
        if config.provider not in self._settings.vlm.providers:
            known = ", ".join(sorted(self._settings.vlm.providers)) or "none"
            raise InvalidRequest(
                f"describe: no provider named {config.provider!r} "
                f"(VISIONSTREAM_VLM_PROVIDERS names: {known})"
            )
        language = self._language or self._own_language()
        return EventDescriber(
            config,
            language,
            self._events,  # type: ignore[arg-type]
            pin=self.egress.pin,
            pipeline_id=pipeline_id,
            mail=self._mail(config.email_to),
        )

    def _mail(self, to: list[str]) -> Mail | None:
        """Descriptions e-mailed through the server's relay; refused (400) where there is
        none, or it does not send to ``to``."""
        if not to:
            return None
        smtp = self._settings.smtp
        relay = relay_server(smtp)
        if relay is None:
            raise InvalidRequest(
                "describe.email_to sends through this server's mail relay, and none is set: "
                "set VISIONSTREAM_SMTP_HOST and VISIONSTREAM_SMTP_SENDER"
            )
        refused = refused_recipients(smtp, to)
        if refused is not None:
            raise InvalidRequest(f"describe.email_to: {refused}")
        return Mail(relay[0], relay[1], to, smtp.min_interval_s)

    def _own_language(self) -> Providers:
        """Providers for this process, where the app gave none (a Ray pipeline actor)."""
        if self._fallback_language is None:
            self._fallback_language = Providers(self._settings.vlm, pin=self.egress.pin)
        return self._fallback_language

    def series(self, pipeline_id: str, source: SourceReference) -> SourceMetrics | None:
        """The source's analytics series; None without metrics."""
        if self._metrics is None:
            return None
        return SourceMetrics(self._metrics, pipeline_id, source.source_id, _path(source.reference))

    def recording(
        self, payload: InitialisePipelinePayload, pipeline_id: str
    ) -> tuple[EventRecorder | None, Recording | None]:
        """What the pipeline's events go through, and what its cameras record: recording
        around events puts a tee in front of the event store."""
        config = payload.sink_configuration.record
        if config is None:
            return self._events, None
        triggers = SourceTriggers(self._events) if config.mode == "events" else None
        settings = self._settings
        free = settings.recordings_min_free_mb << 20
        recording = Recording(config, settings.sink_dir, pipeline_id, free, triggers)
        return triggers or self._events, recording

    async def workflow(
        self,
        spec: WorkflowSpec,
        config: WorkflowConfiguration,
        pipeline_id: str,
        reference: SourceReference,
        metrics: SourceMetrics | None,
        events: EventRecorder | None,
    ) -> CompiledWorkflow:
        """One source's workflow: blocks may keep per-stream state (trackers)."""
        if reference.detect is not None and events is not None:  # boxes in the main's pixels
            events = ScaledEvents(events, self._hub, str(reference.reference), reference.detect)
        stream = {"pipeline": pipeline_id, "source": str(reference.source_id)}
        settings = self._settings
        context = BuildContext(
            self._models,
            metrics,
            stream,
            settings.sink_dir,
            events,
            settings,
            self._library.stored,
            language=self._language,
            live=True,
        )
        return await compile_config(config, spec, context, egress=self.egress)


def _path(reference: str | int) -> str:
    """How a source's frames count: a WHIP publisher's stream, or a pipeline's source."""
    return "whip" if str(reference).startswith(PUBLISHED_SCHEME) else "pipeline"
