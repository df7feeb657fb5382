"""Typed messages: the signaling request/answer, result messages and control messages."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

__all__ = [
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
    urls: list[str]
    """One URL or a list (both forms are sent by clients)."""
    username: str | None = None
    credential: str | None = None

    @field_validator("urls", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


class WebRTCConfig(_Lenient):
    iceServers: list[IceServer] = Field(default_factory=list)


class WebRTCOffer(_Lenient):
    type: str
    sdp: str


class WorkflowConfiguration(_Lenient):
    type: Literal["WorkflowConfiguration"] = "WorkflowConfiguration"
    workflow_specification: dict[str, Any] | None = None
    workspace_name: str | None = None
    workflow_id: str | None = None
    workflow_version_id: str | None = None
    image_input_name: str = "image"
    workflows_parameters: dict[str, Any] | None = None
    disable_sinks: bool = False
    video_metadata_input_name: str = "video_metadata"


class WebRTCWorkerRequest(_Lenient):
    """Body of ``POST /initialise_webrtc_worker`` (reference §1.1)."""

    api_key: str | None = None
    workflow_configuration: WorkflowConfiguration
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

    def ice_servers(self) -> list[IceServer]:
        if self.webrtc_turn_config is not None:  # legacy single-TURN form wins, as upstream
            return [self.webrtc_turn_config]
        return list(self.webrtc_config.iceServers) if self.webrtc_config else []


class InitializeWebRTCResponse(BaseModel):
    status: Literal["success"] = "success"
    context: dict[str, str | None] = Field(
        default_factory=lambda: {"request_id": None, "pipeline_id": None}
    )
    sdp: str
    type: str


@dataclass
class VideoMetadata:
    """``video_metadata`` of a result message; ``extra`` holds our timing keys."""

    frame_id: int
    received_at: datetime
    pts: int | None = None
    time_base: float | None = None
    declared_fps: float | None = None
    measured_fps: float | None = None
    width: int | None = None
    height: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "frame_id": self.frame_id,
            "received_at": self.received_at.isoformat(),
            "pts": self.pts,
            "time_base": self.time_base,
            "declared_fps": self.declared_fps,
            "measured_fps": self.measured_fps,
            "width": self.width,
            "height": self.height,
        }
        out.update(self.extra)
        return out


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
    def completion(cls, frames_processed: int, reason: str | None) -> ResultMessage:
        return cls(
            video_metadata={
                "frame_id": frames_processed,
                "received_at": datetime.now().isoformat(),
                "pts": None,
                "time_base": None,
                "declared_fps": None,
                "measured_fps": None,
                "width": None,
                "height": None,
            },
            processing_complete=True,
            termination_reason=reason,
        )


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
