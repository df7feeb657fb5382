"""The settings one WebRTC session obeys (``SessionConfig``), and nothing else of the server's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..config import Settings
from ..protocol.messages import WebRTCWorkerRequest
from ..rtc.candidates import CandidateScreen
from ..rtc.codecs import VideoCodec
from ..rtc.ice import IcePolicy
from .inputs import InputLimits

__all__ = ["SessionConfig"]


@dataclass(frozen=True)
class SessionConfig:
    """The settings one session obeys, and nothing else of the server's."""

    ice_servers: tuple[str, ...]
    ice_username: str | None
    ice_credential: str | None
    ice_policy: IcePolicy
    video_codec: VideoCodec
    allow_client_ice_servers: bool
    ice_gathering_timeout_s: float
    connect_timeout_s: float
    session_timeout_s: float
    max_session_timeout_s: float
    ack_window: int
    output_queue_frames: int
    release_frames: str
    datachannel_high_water_bytes: int
    datachannel_low_water_bytes: int
    datachannel_drain_timeout_s: float
    input: InputLimits
    candidates: CandidateScreen

    @classmethod
    def of(cls, settings: Settings, upload_dir: Path | None = None) -> SessionConfig:
        return cls(
            ice_servers=tuple(settings.ice_servers),
            ice_username=settings.ice_username,
            ice_credential=(
                settings.ice_credential.get_secret_value() if settings.ice_credential else None
            ),
            ice_policy=settings.ice_transport_policy,
            video_codec=settings.video_codec,
            allow_client_ice_servers=settings.allow_client_ice_servers,
            ice_gathering_timeout_s=settings.ice_gathering_timeout_s,
            connect_timeout_s=settings.connect_timeout_s,
            session_timeout_s=settings.session_timeout_s,
            max_session_timeout_s=settings.max_session_timeout_s,
            ack_window=settings.ack_window,
            output_queue_frames=settings.output_queue_frames,
            release_frames=settings.release_frames,
            datachannel_high_water_bytes=settings.datachannel_high_water_bytes,
            datachannel_low_water_bytes=settings.datachannel_low_water_bytes,
            datachannel_drain_timeout_s=settings.datachannel_drain_timeout_s,
            input=InputLimits.of(settings, upload_dir),
            candidates=CandidateScreen.of(settings),
        )

    def lifetime_s(self, request: WebRTCWorkerRequest) -> float:
        """Seconds left to a session: what the request asks (else the default), at most
        the cap, counted from when the client says its session started."""
        lifetime = (
            request.processing_timeout
            if request.processing_timeout is not None
            else self.session_timeout_s
        )
        lifetime = min(lifetime, self.max_session_timeout_s)
        if request.processing_session_started is not None:
            started = request.processing_session_started
            if started.tzinfo is None:
                started = started.astimezone()
            lifetime -= (datetime.now(UTC) - started).total_seconds()
        return lifetime
