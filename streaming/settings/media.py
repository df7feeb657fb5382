"""Sessions' media: connecting, the video sent back, the data channel, uploads and frames."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings

__all__ = ["MediaSettings"]


class MediaSettings(BaseSettings):
    """Sessions' media: connecting, the video sent back, the data channel, uploads and frames. A
    part of ``Settings`` (``VISIONSTREAM_<NAME>``)."""

    max_remote_candidates: int = Field(default=48, ge=1)
    """ICE candidates one offer may carry (a browser on a busy machine offers a dozen or
    two); more is answered 400 before any is parsed."""
    connect_timeout_s: float = Field(default=30.0, gt=0)
    """A peer that has not connected by then is closed and its slot freed."""
    ice_gathering_timeout_s: float = Field(default=5.0, gt=0)
    """Longest wait for the server's ICE gathering before the offer fails (504)."""
    release_frames: Literal["auto", "always", "never"] = "auto"
    """Follow each returned VP8 frame with a 3-byte hidden one, so receivers that hold a frame
    until the next begins (aiortc: every inference-sdk program) show it at once; ``auto``: for
    peers whose offer aiortc made, other than our own client (``rtc/release.py``)."""
    video_kbps_per_megapixel: int = Field(default=3000, ge=0)
    """Cap on the returned video's VP8 bitrate, per megapixel of frame (920 kbps at 640x480,
    230 kbps at 320x240); below it the bitrate follows what the receiver estimates (aiortc:
    500 kbps to 1.5 Mbps). 0: no cap. Server-wide, set at start (``rtc/encoder.py``)."""
    whip_idle_timeout_s: float = Field(default=10.0, gt=0)
    """A WHIP publisher that sends no video for this long is treated as gone: its pipeline
    source stops and its peer closes (one killed without a goodbye stays "connected" to
    ICE for much longer)."""
    video_start_kbps: int = Field(default=500, ge=50)
    """Where the returned video's bitrate starts (VP8 and H.264); the receiver's REMB then
    moves it between ``video_min_kbps`` and ``video_max_kbps``."""
    video_min_kbps: int = Field(default=250, ge=50)
    """Lowest bitrate of the returned video, whatever the receiver's REMB says."""
    video_max_kbps: int = Field(default=1500, ge=50)
    """Highest bitrate of the returned video (also capped by ``video_kbps_per_megapixel``)."""
    video_codec: Literal["auto", "vp8", "h264"] = "auto"
    """The returned video's codec: ``auto`` follows the client's offer (its first codec we
    have: VP8 from Chrome, Firefox and aiortc, H.264 from Safari); ``vp8`` or ``h264`` is
    chosen whenever the offer has it. One m-line carries both directions, so the client's
    video is received in the same codec."""
    video_receive_max_kbps: int = Field(default=1000, ge=0)
    """Highest bitrate the server's REMB lets a client send its video at (0: aiortc's
    estimate, unbounded). A client on the same machine or LAN would otherwise be raised to
    its encoder's maximum, and every packet costs the server Python time."""
    ack_window: int = Field(default=8, ge=1)
    """Processed-but-unacknowledged frames allowed in non-realtime mode once ACKs flow."""
    input_queue_frames: int = Field(default=120, ge=1)
    """Bound of the non-realtime input FIFO; overflow drops the oldest frame and reports it."""
    output_queue_frames: int = Field(default=4, ge=1)
    """Bound of the non-realtime outbound video queue (the processor waits when full)."""
    datachannel_high_water_bytes: int = Field(default=4 * 1024 * 1024, ge=65536)
    """Above this many buffered bytes the sender waits for the channel to drain."""
    datachannel_low_water_bytes: int = Field(default=1024 * 1024, ge=0)
    """The channel's ``bufferedAmountLowThreshold``: sending resumes below it."""
    datachannel_drain_timeout_s: float = Field(default=120.0, gt=0)
    """Longest wait for a congested channel before the rest of a message is abandoned."""
    max_upload_bytes: int = Field(default=2 * 1024**3, ge=1)
    """Largest uploaded video file; checked on the first chunk and on every byte after."""
    upload_dir: Path | None = None
    """Base directory of uploads (default ``<tmp>/visionstream-uploads-<uid>``); each server
    writes into a private ``server-<pid>`` directory there and, at start, removes those of
    servers that were killed."""
    upload_idle_timeout_s: float = Field(default=30.0, gt=0)
    """An upload with no chunk for this long is abandoned (its file deleted, the client told)."""
    max_frame_pixels: int = Field(default=3840 * 2160, ge=64 * 64)
    """Largest video frame a client's track may send (width x height); larger frames are
    dropped and the client told once."""
    decode_queue_frames: int = Field(default=8, ge=1)
    """Decoded frames an uploaded file's reader runs ahead; when full, decoding pauses."""
    jpeg_quality: int = Field(default=80, ge=1, le=100)
    """Quality of JPEG images serialized into data-channel results."""
    gzip_level: int = Field(default=6, ge=1, le=9)
    """gzip level of data-channel results that carry data outputs."""

    @model_validator(mode="after")
    def _bitrates_in_order(self) -> MediaSettings:
        if not self.video_min_kbps <= self.video_start_kbps <= self.video_max_kbps:
            raise ValueError(
                "video bitrates must be ordered: video_min_kbps <= video_start_kbps <= "
                f"video_max_kbps (got {self.video_min_kbps}, {self.video_start_kbps}, "
                f"{self.video_max_kbps})"
            )
        return self
