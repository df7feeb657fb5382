"""Client(api_url, api_key).webrtc.stream(...): inference-sdk's entry points, our session."""

from __future__ import annotations

from typing import Any

from ..config import ClientSettings
from .blocking import WebRTCSession
from .config import StreamConfig
from .errors import InvalidParameterError
from .session import AsyncWebRTCSession
from .sources import PipelineSource, StreamSource

__all__ = ["Client", "WebRTCClient"]


def workflow_config(workflow: str | dict[str, Any], workspace: str | None) -> dict[str, Any]:
    """A specification dict, or a workflow id that needs its workspace (as inference-sdk)."""
    if isinstance(workflow, dict):
        return {"workflow_specification": workflow}
    if isinstance(workflow, str):
        if not workspace:
            raise InvalidParameterError(
                "workspace is required when workflow is an id string "
                f"(workflow={workflow!r}); pass workspace=... or a specification dict"
            )
        return {"workflow_id": workflow, "workspace_name": workspace}
    raise InvalidParameterError(
        f"workflow must be an id string or a specification dict, not {type(workflow).__name__}"
    )


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value


class WebRTCClient:
    """``client.webrtc``: starts sessions against one server (``stream``, ``astream``)."""

    def __init__(
        self,
        api_url: str,
        api_key: str | None = None,
        *,
        connect_timeout: float = 30.0,
        request_timeout: float = 90.0,
        release_on_marker: bool = True,
    ) -> None:
        self.api_url = api_url
        self.api_key = api_key
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.release_on_marker = release_on_marker

    def stream(
        self,
        source: StreamSource,
        *,
        workflow: str | dict[str, Any] | None = None,
        image_input: str = "image",
        workspace: str | None = None,
        config: StreamConfig | None = None,
    ) -> WebRTCSession:
        """A session that starts on first use; see ``WebRTCSession``."""
        return WebRTCSession(
            self.astream(
                source,
                workflow=workflow,
                image_input=image_input,
                workspace=workspace,
                config=config,
            )
        )

    def astream(
        self,
        source: StreamSource,
        *,
        workflow: str | dict[str, Any] | None = None,
        image_input: str = "image",
        workspace: str | None = None,
        config: StreamConfig | None = None,
    ) -> AsyncWebRTCSession:
        """The same session for code already on an event loop: ``async with ... as session``."""
        if not isinstance(source, StreamSource):
            raise InvalidParameterError(
                f"source must be a StreamSource (WebcamSource, ManualSource, ...), "
                f"not {type(source).__name__}"
            )
        if workflow is None and not isinstance(source, PipelineSource):
            raise InvalidParameterError("workflow is required (except to watch a pipeline)")
        return AsyncWebRTCSession(
            api_url=self.api_url,
            api_key=self.api_key,
            source=source,
            # A watched pipeline already runs its workflow: none is sent.
            workflow_config={} if workflow is None else workflow_config(workflow, workspace),
            image_input=image_input,
            config=config or StreamConfig(),
            connect_timeout=self.connect_timeout,
            request_timeout=self.request_timeout,
            release_on_marker=self.release_on_marker,
        )


class Client:
    """``Client("http://127.0.0.1:9001").webrtc.stream(source=..., workflow=...)``.

    What is not given comes from ``ClientSettings`` (``VISIONSTREAM_API_URL``,
    ``VISIONSTREAM_API_KEY``, ...). ``release_on_marker=False`` leaves our connections'
    receivers as aiortc makes them (see ``streaming.rtc``)."""

    def __init__(
        self,
        api_url: str | None = None,
        api_key: str | None = None,
        *,
        connect_timeout: float | None = None,
        request_timeout: float | None = None,
        release_on_marker: bool | None = None,
    ) -> None:
        settings = ClientSettings()
        key = settings.api_key.get_secret_value() if settings.api_key is not None else None
        self.api_url = api_url or settings.api_url
        self.api_key = api_key if api_key is not None else key
        self.webrtc = WebRTCClient(
            self.api_url,
            self.api_key,
            connect_timeout=_given(connect_timeout, settings.connect_timeout_s),
            request_timeout=_given(request_timeout, settings.request_timeout_s),
            release_on_marker=_given(release_on_marker, settings.release_on_marker),
        )
