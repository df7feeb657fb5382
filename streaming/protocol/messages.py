"""Typed messages: the signaling request/answer, result messages and control messages."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from .notices import Notice, NoticeCode

__all__ = [
    "SIGNALING_PATH",
    "ControlMessage",
    "IceServer",
    "InitializeWebRTCResponse",
    "ResultMessage",
    "VideoMetadata",
    "WebRTCConfig",
    "WebRTCOffer",
    "WebRTCWorkerRequest",
    "WorkflowConfiguration",
    "parse_control_message",
]

MAX_CONTROL_MESSAGE_BYTES = 64 * 1024


class _Lenient(BaseModel):
    # The reference server ignores unknown keys; clients send extras (manual_mode, ...).
    model_config = ConfigDict(extra="ignore")


class IceServer(_Lenient):
    """A STUN/TURN server as clients send it (``urls`` one string or a list)."""

    urls: list[str]
    """One URL or a list (both forms are sent by clients)."""
    username: str | None = None
    credential: str | None = None

    @field_validator("urls", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


class WebRTCConfig(_Lenient):
    """The request's ``webrtc_config``: ICE servers for the server's peer."""

    iceServers: list[IceServer] = Field(default_factory=list)


class WebRTCOffer(_Lenient):
    """The client's SDP offer."""

    type: str
    sdp: str


class WorkflowConfiguration(_Lenient):
    """The workflow a session or pipeline runs: a specification, or a workspace and id."""

    type: Literal["WorkflowConfiguration"] = "WorkflowConfiguration"
    workflow_specification: dict[str, Any] | None = None
    workspace_name: str | None = None
    workflow_id: str | None = None
    workflow_version_id: str | None = None
    image_input_name: str = "image"
    workflows_parameters: dict[str, Any] | None = None
    disable_sinks: bool = False
    video_metadata_input_name: str = "video_metadata"


SIGNALING_PATH = "/initialise_webrtc_worker"
"""Where a client POSTs its offer (``WebRTCWorkerRequest``) to start a session."""


class WebRTCWorkerRequest(_Lenient):
    """Body of ``POST /initialise_webrtc_worker`` (reference §1.1)."""

    api_key: str | None = None
    workflow_configuration: WorkflowConfiguration | None = None
    """Required, except when watching a pipeline (whose workflow already runs)."""
    webrtc_offer: WebRTCOffer
    webrtc_config: WebRTCConfig | None = None
    webrtc_turn_config: IceServer | None = None
    webrtc_realtime_processing: bool = True
    stream_output: list[str | None] | None = None
    data_output: list[str | None] | None = None
    declared_fps: float | None = Field(default=None, gt=0)
    rtsp_url: str | None = None
    mjpeg_url: str | None = None
    processing_timeout: int | None = Field(default=None, ge=0)
    processing_session_started: datetime | None = None
    requested_plan: str | None = None
    requested_region: str | None = None
    is_preview: bool = False
    pipeline_id: str | None = None
    """Ours: watch this running pipeline's output instead of running a workflow."""
    pipeline_source_id: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _workflow_or_pipeline(self) -> WebRTCWorkerRequest:
        if self.workflow_configuration is None and not self.pipeline_id:
            raise ValueError("workflow_configuration is required (or pipeline_id, to watch one)")
        return self

    def ice_servers(self) -> list[IceServer]:
        if self.webrtc_turn_config is not None:  # legacy single-TURN form wins, as upstream
            return [self.webrtc_turn_config]
        return list(self.webrtc_config.iceServers) if self.webrtc_config else []


def _empty_context() -> dict[str, str | None]:
    return {"request_id": None, "pipeline_id": None}


class InitializeWebRTCResponse(BaseModel):
    """The answer to ``POST /initialise_webrtc_worker``: the SDP answer (the reference's shape)."""

    status: Literal["success"] = "success"
    context: dict[str, str | None] = Field(default_factory=lambda: _empty_context())
    sdp: str
    type: str
    connect_timeout_s: float | None = None
    """Ours: how long the server waits for this peer to connect before it closes it (a
    client that is still connecting then can say it failed, and why)."""


@dataclass
class VideoMetadata:
    """``video_metadata`` of a result message, as the server writes it and the client reads it.

    The first seven fields are inference-sdk's ``VideoMetadata``; the rest are ours (extra
    keys are ignored by that client). ``errors`` travels beside ``video_metadata`` on the
    wire and is attached here on the client side.
    """

    frame_id: int
    received_at: datetime
    pts: int | None = None
    time_base: float | None = None
    declared_fps: float | None = None
    measured_fps: float | None = None
    errors: list[str] = field(default_factory=list)
    width: int | None = None
    height: int | None = None
    queue_wait_ms: float | None = None
    """Time the frame waited in the server's input buffer."""
    inference_ms: float | None = None
    processing_ms: float | None = None
    """Conversion, workflow, output frame and serialization together."""
    stage_ms: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def error_codes(self) -> list[NoticeCode | str]:
        """The stable code of each entry of ``errors``, in order (ours; empty from servers
        that send none); codes this client does not know stay strings."""
        codes = self.extra.get("error_codes")
        return [NoticeCode.parse(str(c)) for c in codes] if isinstance(codes, list) else []

    _WIRE_KEYS = (
        "frame_id",
        "pts",
        "time_base",
        "declared_fps",
        "measured_fps",
        "width",
        "height",
        "queue_wait_ms",
        "inference_ms",
        "processing_ms",
    )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {key: getattr(self, key) for key in self._WIRE_KEYS}
        out["received_at"] = self.received_at.isoformat()
        if self.stage_ms:
            out["stage_ms"] = self.stage_ms
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], errors: list[str] | None = None) -> VideoMetadata:
        """Raises ``ValueError`` (or ``KeyError``/``TypeError``) on a malformed dict."""
        rest = dict(data)
        known = {key: rest.pop(key, None) for key in cls._WIRE_KEYS}
        if not isinstance(known["frame_id"], int):
            raise ValueError(f"video_metadata.frame_id must be an integer: {known['frame_id']!r}")
        received_at = datetime.fromisoformat(rest.pop("received_at"))
        stage_ms = rest.pop("stage_ms", None) or {}
        return cls(
            received_at=received_at,
            errors=list(errors or []),
            stage_ms=dict(stage_ms),
            extra=rest,
            **known,
        )


@dataclass
class ResultMessage:
    """One ``WebRTCOutput`` (reference §2.3): every key is always present."""

    video_metadata: dict[str, Any]
    serialized_output_data: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)
    processing_complete: bool = False
    termination_reason: str | None = None

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "serialized_output_data": self.serialized_output_data,
                "video_metadata": self.video_metadata,
                "errors": self.errors,
                "processing_complete": self.processing_complete,
                "termination_reason": self.termination_reason,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, raw: str | bytes) -> ResultMessage:
        """A message as a client reads it; ``ValueError`` naming what is wrong. Fields the
        protocol does not name are ignored; ``video_metadata`` is checked by ``metadata``."""
        message = json.loads(raw)
        if not isinstance(message, dict):
            raise ValueError(f"a result message must be a JSON object, not {message!r:.40}")
        metadata = message.get("video_metadata")
        if not isinstance(metadata, dict):
            raise ValueError("a result message needs a video_metadata object")
        data = message.get("serialized_output_data")
        if data is not None and not isinstance(data, dict):
            raise ValueError("serialized_output_data must be an object or null")
        errors = message.get("errors") or []
        if not isinstance(errors, list):
            raise ValueError("errors must be a list")
        reason = message.get("termination_reason")
        return cls(
            video_metadata=metadata,
            serialized_output_data=data,
            errors=[str(e) for e in errors],
            processing_complete=bool(message.get("processing_complete")),
            termination_reason=None if reason is None else str(reason),
        )

    def metadata(self) -> VideoMetadata:
        """``video_metadata`` typed, with ``errors`` attached; ``ValueError`` (or
        ``KeyError``/``TypeError``) when it is malformed."""
        return VideoMetadata.from_dict(self.video_metadata, self.errors)

    @classmethod
    def completion(cls, frames_processed: int, reason: str | None) -> ResultMessage:
        return cls(
            video_metadata=_frameless_metadata(frames_processed),
            processing_complete=True,
            termination_reason=reason,
        )

    @classmethod
    def notice(cls, frames_processed: int, notices: list[Notice]) -> ResultMessage:
        """Errors that belong to no frame (a refused upload, an unreadable file).

        Sent as an ordinary message just before the completion: inference-sdk reads no
        errors from the completion message, so there they would reach nobody.
        """
        metadata = _frameless_metadata(frames_processed)
        metadata.update(error_codes(notices))
        return cls(video_metadata=metadata, errors=[n.message for n in notices])


def error_codes(notices: list[Notice]) -> dict[str, Any]:
    """``video_metadata``'s ``error_codes`` (beside ``errors``, entry for entry), when any:
    an extra key, which inference-sdk ignores."""
    return {"error_codes": [n.code for n in notices]} if notices else {}


def _frameless_metadata(frames_processed: int) -> dict[str, Any]:
    return {
        "frame_id": frames_processed,
        "received_at": datetime.now().isoformat(),
        "pts": None,
        "time_base": None,
        "declared_fps": None,
        "measured_fps": None,
        "width": None,
        "height": None,
    }


class ControlMessage(_Lenient):
    """Client -> server message on the ``inference`` channel (reference §2.4)."""

    ack: StrictInt | None = Field(default=None, ge=0)
    stream_output: list[str | None] | None = None
    data_output: list[str | None] | None = None


def parse_control_message(raw: str | bytes) -> ControlMessage:
    """Parse one control message; raises ``ValueError`` with a message fit for ``errors``."""
    if len(raw) > MAX_CONTROL_MESSAGE_BYTES:
        raise ValueError(
            f"control message of {len(raw)} bytes exceeds {MAX_CONTROL_MESSAGE_BYTES} bytes"
        )
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"control message is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"control message must be a JSON object, got {type(data).__name__}")
    try:
        return ControlMessage.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(f"control message rejected: {problems}") from None
