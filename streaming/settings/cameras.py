"""Cameras and monitoring pipelines: reading, reconnecting, decoding, how many."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from .prefix import ProductSettings

__all__ = ["CameraSettings", "DecodeSettings"]


class DecodeSettings(ProductSettings):
    """How cameras are decoded (``VISIONSTREAM_DECODE_*``)."""

    model_config = SettingsConfigDict(env_prefix="VISIONSTREAM_DECODE_", extra="ignore")

    hwaccel: Literal["none", "cuda", "vaapi", "qsv", "videotoolbox", "d3d11va", "drm"] = "none"
    """Decode cameras on this device through FFmpeg's hwaccel (NVDEC is ``cuda``). Where it
    cannot be opened, a camera says so once (a warning, its stats' ``decoder``) and decodes
    in software."""
    threads: int = Field(default=1, ge=0, le=64)
    """Decoder threads per camera: 1 (one core per camera at most: a box watching many
    cameras spreads them over its cores), 0 for FFmpeg's choice (about one per core)."""

    def opening_fields(self) -> dict[str, Any]:
        """What ``sources.kinds.Opening`` takes of these."""
        return {
            "hwaccel": None if self.hwaccel == "none" else self.hwaccel,
            "decoder_threads": self.threads,
        }


class CameraSettings(BaseSettings):
    """Cameras and monitoring pipelines: reading, reconnecting, decoding, how many. A part of
    ``Settings`` (``VISIONSTREAM_<NAME>``)."""

    rtsp_read_timeout: float = Field(default=5.0, gt=0)
    """A camera that sends nothing for this long is treated as disconnected (and reconnected)."""
    camera_first_frame_s: float = Field(default=15.0, gt=0)
    """How long a session that names a camera (``rtsp_url``, ``mjpeg_url``) waits for its
    first frame before answering 502. A camera that refuses the connection fails at once;
    this covers one that connects and is slow to send (a loaded server or camera)."""
    rtsp_max_backoff: float = Field(default=10.0, gt=0)
    """Longest wait between reconnection attempts to a camera (the wait doubles up to it)."""
    allow_local_sources: bool = False
    """Let pipelines read local files and device indexes (the server's own disk and cameras)."""
    max_pipelines: int = Field(default=8, ge=1)
    """Concurrent monitoring pipelines; one more is answered 429."""
    decode: DecodeSettings = Field(default_factory=DecodeSettings)
    """How cameras are decoded: ``VISIONSTREAM_DECODE_*``."""
