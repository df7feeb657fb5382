"""StreamConfig: the same fields and defaults as inference-sdk's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["StreamConfig"]


@dataclass
class StreamConfig:
    """What a session asks the server for: outputs on the video track and the data channel,
    realtime or every frame, ICE servers; inference-sdk's fields and defaults."""

    stream_output: list[str] | None = field(default_factory=list)
    """Workflow outputs rendered onto the returned video track (the first one is used);
    ``[]``: no video comes back; None (our extension): the workflow's first image output."""
    data_output: list[str] = field(default_factory=list)
    """Workflow outputs sent on the data channel; ``["*"]`` for all of them."""
    realtime_processing: bool = True
    """True: the server drops frames to keep up. False: every frame, paced by our ACKs."""
    declared_fps: float | None = None
    """Nominal fps for sources that cannot tell (sources that can take precedence)."""
    turn_server: dict[str, str] | None = None
    """``{"urls": ..., "username": ..., "credential": ...}``, used by both peers."""
    video_codec: Literal["vp8", "h264"] | None = None
    """Ours: the codec our offer prefers for the video both ways (None: aiortc's order, VP8
    first); the server follows it unless it is set to prefer another."""
    ice_transport_policy: Literal["all", "relay"] = "all"
    """Ours: ``relay`` makes our peer use only ``turn_server``'s relayed candidates (it never
    exposes a host address); a TURN server that gives none fails the session at once."""
    workflow_parameters: dict[str, Any] = field(default_factory=dict)
    requested_plan: str | None = None
    requested_region: str | None = None
    processing_timeout: int | None = None
    """Session lifetime in seconds (the server caps it)."""
