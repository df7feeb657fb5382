"""What a session streams: local frames over a video track, a file upload, or a URL the
server pulls. Names, arguments and request fields are inference-sdk's."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import numpy as np
from aiortc import RTCDataChannel, RTCPeerConnection

from sources import CameraSource, FrameSource, ManualFrames
from sources.kinds import MJPEG_SCHEMES, RTSP_SCHEMES, has_scheme_and_host
from sources.webcam import CaptureFactory
from streaming.rtc.track import FrameSourceTrack

from ..protocol.upload import UPLOAD_CHANNEL, iter_upload_chunks, upload_chunk_count
from .config import StreamConfig
from .errors import InvalidParameterError

__all__ = [
    "FrameSourceStream",
    "MJPEGSource",
    "ManualSource",
    "RTSPSource",
    "StreamSource",
    "UploadProgressCallback",
    "VideoFileSource",
    "WebcamSource",
]

log = logging.getLogger(__name__)

UploadProgressCallback = Callable[[int, int], None]
"""(uploaded chunks, total chunks)"""

Spawn = Callable[[Coroutine[Any, Any, Any]], None]


class StreamSource(ABC):
    """One per session: prepares the peer connection, adds its request fields, and cleans up."""

    @abstractmethod
    async def attach(self, pc: RTCPeerConnection, spawn: Spawn) -> None:
        """Add the tracks, transceivers or channels this source needs, before the offer;
        work that outlives the call goes through ``spawn`` (owned by the session)."""

    @abstractmethod
    def request_fields(self, config: StreamConfig) -> dict[str, Any]:
        """Fields merged over the request body built from ``config``."""

    async def start(self, spawn: Spawn) -> None:  # noqa: B027 - optional hook
        """Called once connected."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Idempotent."""


class FrameSourceStream(StreamSource):
    """Any ``sources.FrameSource`` sent as the session's video track.

    ``open`` runs in a thread (opening a camera blocks) when the session starts.
    """

    def __init__(self, open: Callable[[], FrameSource]) -> None:
        self._open = open
        self.frames: FrameSource | None = None
        self.track: FrameSourceTrack | None = None

    async def attach(self, pc: RTCPeerConnection, spawn: Spawn) -> None:
        self.frames = await asyncio.to_thread(self._open)
        self.track = FrameSourceTrack(self.frames)
        sender = pc.addTrack(self.track)
        # When the source runs out, only stopping the sender sends the RTCP BYE that tells
        # the server the stream ended (aiortc does not when the track alone ends).
        self.track.on("ended", lambda: spawn(sender.stop()))

    def request_fields(self, config: StreamConfig) -> dict[str, Any]:
        fps = self.frames.fps if self.frames is not None else None
        return {"declared_fps": fps} if fps else {}

    async def aclose(self) -> None:
        if self.track is not None:
            await self.track.aclose()
        elif self.frames is not None:
            self.frames.close()


class WebcamSource(FrameSourceStream):
    """A local camera through OpenCV, read on its own thread; declares the camera's fps.

    ``capture_factory`` replaces ``cv2.VideoCapture`` (tests inject a capture there).
    """

    def __init__(
        self,
        device_id: int = 0,
        resolution: tuple[int, int] | None = None,
        *,
        capture_factory: CaptureFactory | None = None,
    ) -> None:
        super().__init__(lambda: CameraSource(device_id, resolution, capture_factory))
        self.device_id = device_id
        self.resolution = resolution


class ManualSource(FrameSourceStream):
    """Frames the program hands in with ``send``; when sending outpaces the connection the
    oldest queued frames are dropped (10 are kept, as in inference-sdk).

    Unlike inference-sdk, ``send`` before the session has started is not an error: the frame
    waits in the same bounded mailbox and goes out once the session runs, so a program may
    start a consumer thread and send at once without racing it.
    """

    def __init__(self, queue_size: int = 10) -> None:
        self._mailbox = ManualFrames(queue_size)
        super().__init__(lambda: self._mailbox)

    def request_fields(self, config: StreamConfig) -> dict[str, Any]:
        return {"manual_mode": True}

    def send(self, frame: np.ndarray) -> None:
        """Thread-safe; queues before the session starts. RuntimeError once it closed."""
        self._mailbox.send(frame)

    @property
    def dropped(self) -> int:
        return self._mailbox.dropped


def _check_url(url: str, schemes: tuple[str, ...], what: str) -> str:
    if not has_scheme_and_host(url, schemes):
        raise InvalidParameterError(
            f"invalid {what} URL: it must look like {schemes[0]}://host/path "
            f"(schemes: {', '.join(schemes)})"
        )
    return url


class _ServerPulled(StreamSource):
    field_name = ""

    def __init__(self, url: str) -> None:
        self.url = url

    async def attach(self, pc: RTCPeerConnection, spawn: Spawn) -> None:
        # Nothing to send; the server's processed video comes back on this transceiver.
        pc.addTransceiver("video", direction="recvonly")

    def request_fields(self, config: StreamConfig) -> dict[str, Any]:
        return {self.field_name: self.url}


class RTSPSource(_ServerPulled):
    """The server pulls this RTSP stream (credentials in the URL stay out of our logs)."""

    field_name = "rtsp_url"

    def __init__(self, url: str) -> None:
        super().__init__(_check_url(url, RTSP_SCHEMES, "RTSP"))


class MJPEGSource(_ServerPulled):
    """The server pulls this MJPEG-over-HTTP stream."""

    field_name = "mjpeg_url"

    def __init__(self, url: str) -> None:
        super().__init__(_check_url(url, MJPEG_SCHEMES, "MJPEG"))


class PipelineSource(_ServerPulled):
    """Watch a monitoring pipeline running on the server (our extension): its annotated frames
    and results, without running the workflow a second time or opening the camera again."""

    def __init__(self, pipeline_id: str, source_id: int = 0) -> None:
        if not pipeline_id:
            raise InvalidParameterError("pipeline_id is required")
        super().__init__(pipeline_id)
        self.source_id = source_id

    def request_fields(self, config: StreamConfig) -> dict[str, Any]:
        return {"pipeline_id": self.url, "pipeline_source_id": self.source_id}


_UPLOAD_HIGH_WATER = 256 * 1024
_UPLOAD_LOW_WATER = 64 * 1024


class VideoFileSource(StreamSource):
    """Uploads a local file on the ``video_upload`` channel; the server decodes and processes it.

    With ``use_datachannel_frames`` (the default) rendered frames come back as JPEG inside the
    result messages (every frame, in order); otherwise on a video track.
    ``realtime_processing=False`` (the default) processes every frame as fast as the server
    can, paced by our ACKs.
    """

    def __init__(
        self,
        path: str | Path,
        on_upload_progress: UploadProgressCallback | None = None,
        use_datachannel_frames: bool = True,
        realtime_processing: bool = False,
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise InvalidParameterError(f"video file not found: {self.path}")
        self.size = self.path.stat().st_size
        if self.size == 0:
            raise InvalidParameterError(f"video file is empty: {self.path}")
        self.on_upload_progress = on_upload_progress
        self.use_datachannel_frames = use_datachannel_frames
        self.realtime_processing = realtime_processing
        self.total_chunks = upload_chunk_count(self.size)
        self.uploaded_chunks = 0
        self._channel: RTCDataChannel | None = None

    async def attach(self, pc: RTCPeerConnection, spawn: Spawn) -> None:
        self._channel = pc.createDataChannel(UPLOAD_CHANNEL)
        if not self.use_datachannel_frames:
            pc.addTransceiver("video", direction="recvonly")

    def request_fields(self, config: StreamConfig) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "webrtc_realtime_processing": self.realtime_processing,
            "video_file_upload": True,
        }
        if self.use_datachannel_frames:
            data_output = list(config.data_output)
            data_output += [n for n in config.stream_output or [] if n and n not in data_output]
            fields["stream_output"] = []
            fields["data_output"] = data_output
        return fields

    async def start(self, spawn: Spawn) -> None:
        spawn(self._upload())

    async def _upload(self) -> None:
        channel = self._channel
        assert channel is not None
        changed = asyncio.Event()
        for event in ("open", "bufferedamountlow", "close"):
            channel.on(event, changed.set)
        channel.bufferedAmountLowThreshold = _UPLOAD_LOW_WATER
        while channel.readyState == "connecting":
            changed.clear()
            await changed.wait()
        with self.path.open("rb") as file:
            for chunk in iter_upload_chunks(file, self.size):
                while channel.readyState == "open" and channel.bufferedAmount > _UPLOAD_HIGH_WATER:
                    changed.clear()
                    await changed.wait()
                if channel.readyState != "open":
                    log.warning("upload of %s stopped: the channel closed", self.path.name)
                    return
                channel.send(chunk)
                self.uploaded_chunks += 1
                if self.on_upload_progress is not None:
                    self.on_upload_progress(self.uploaded_chunks, self.total_chunks)
