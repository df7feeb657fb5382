"""SessionInput: a session's one video source, whatever it is, as one FrameBuffer.

The source is the first of: the client's video track (buffer: latest | bounded FIFO), a
camera the server pulls through the hub (the same), a pipeline the session watches (frames
and outputs both), or a file uploaded on ``video_upload``, written to disk and decoded on a
thread (buffer: latest at native rate | bounded and waiting, so decoding pauses instead of
dropping). Every source fills its buffer through a ``FrameFeed`` (streaming/feed.py), as a
pipeline's sources do: frames from the hub's reader threads cross into the loop there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiortc import MediaStreamTrack, RTCDataChannel

from sources import FileSource, SourceError, SourceFrame
from sources.hub import SourceHub, Subscription

from ..buffering import BufferClosed, FrameBuffer
from ..config import Settings
from ..errors import InvalidRequest, SourceUnavailable
from ..feed import FedFrame, FrameFeed, Spawn
from ..metrics import Metrics
from ..protocol.notices import Notice, NoticeCode
from ..rtc.track import discard, received_frames
from ..watching import PipelineResult, WatchedPipeline
from .notices import Notices
from .upload import UploadError, UploadReceiver, UploadStatus

__all__ = ["InputLimits", "SessionInput"]

log = logging.getLogger(__name__)

UPLOAD_LABEL = "the uploaded video"


@dataclass(frozen=True)
class InputLimits:
    """The settings a session's input obeys, and nothing else of the server's."""

    input_queue_frames: int
    decode_queue_frames: int
    max_frame_pixels: int
    max_upload_bytes: int
    upload_idle_timeout_s: float
    upload_dir: Path | None = None

    @classmethod
    def of(cls, settings: Settings, upload_dir: Path | None) -> InputLimits:
        return cls(
            input_queue_frames=settings.input_queue_frames,
            decode_queue_frames=settings.decode_queue_frames,
            max_frame_pixels=settings.max_frame_pixels,
            max_upload_bytes=settings.max_upload_bytes,
            upload_idle_timeout_s=settings.upload_idle_timeout_s,
            upload_dir=upload_dir,
        )


class SessionInput:
    """Owns the session's source and the buffer the session loop reads; ``close`` stops the
    source, whichever it is (idempotent)."""

    def __init__(
        self,
        session: str,
        realtime: bool,
        limits: InputLimits,
        metrics: Metrics,
        notices: Notices,
        spawn: Spawn,
    ) -> None:
        self._session = session
        self.realtime = realtime
        self._limits = limits
        self._metrics = metrics
        self._notices = notices
        self._spawn = spawn
        # Created when the source appears: its kind decides the strategy.
        self._buffer: FrameBuffer[FedFrame] | None = None
        self._ready = asyncio.Event()
        self.attached = False
        """A source was chosen (the first one wins; later ones are refused or drained)."""
        self._upload: UploadReceiver | None = None
        self._file: FileSource | None = None
        self._camera: Subscription | None = None
        self._stop_watching: Callable[[], None] | None = None
        self._frame_too_large_reported = False
        self._source_ended = False
        self._closing = False

    # ------------------------------------------------------------ the session loop's side

    async def buffer(self) -> FrameBuffer[FedFrame]:
        """The buffer to read, once a source appeared (or the session ended without one)."""
        await self._ready.wait()
        return self.current()

    def current(self) -> FrameBuffer[FedFrame]:
        """The buffer; a session ending before it had one gets an empty one to close."""
        if self._buffer is None:
            return self._attach(FrameBuffer("latest"))
        return self._buffer

    async def end(self, why: Notice | None = None) -> None:
        """No more frames will come; ``why`` (if any) reaches the client after the last
        frame's result, just before the completion message."""
        if why is not None:
            self._notices.report_at_end(why)
        await self.current().close()

    async def source_ended(self, why: str) -> None:
        """The watched source stopped for good: the session ends, saying ``why`` once."""
        if not self._source_ended:
            self._source_ended = True
            log.info("session %s: %s", self._session, why)
            await self.end(Notice(NoticeCode.SOURCE_ENDED, why))

    async def close(self) -> None:
        """Stop the source and discard what is buffered; idempotent."""
        self._closing = True
        if self._buffer is not None:
            await self._buffer.close(discard=True)
        if self._camera is not None:
            self._camera.close()
        if self._stop_watching is not None:
            self._stop_watching()
        if self._file is not None:
            self._file.close()
        if self._upload is not None:
            self._upload.close()

    # ------------------------------------------------------------------------ sources

    async def attach_camera(self, hub: SourceHub, url: str, wait_s: float) -> None:
        """A camera (read through the hub, shared) is the source. Raises
        ``SourceUnavailable`` naming the masked URL if it gives no frame in ``wait_s``."""
        feed = self._live_feed()

        def deliver(frame: SourceFrame) -> None:  # on the hub's reader thread
            self._metrics.frames_received.inc()
            feed.from_thread(FedFrame.now(frame))

        try:
            subscription = hub.subscribe(url, deliver)
        except SourceError as exc:
            raise InvalidRequest(str(exc)) from None
        self._camera = subscription
        self.attached = True
        source = subscription.source.live() if subscription.source is not None else None
        if source is None:
            return
        try:
            # A camera that refuses or cannot be reached fails at once; one that connected
            # and then paused gets the whole wait to deliver its first frame.
            stats = await asyncio.to_thread(
                source.wait_for, lambda s: s.frames > 0 or s.failed_attempts > 0, wait_s
            )
        except TimeoutError:
            raise SourceUnavailable(f"no frame from {source.masked_url} in {wait_s:g} s") from None
        if stats.frames == 0:
            raise SourceUnavailable(stats.last_error or f"cannot read {source.masked_url}")
        log.info("session %s watches %s", self._session, source.masked_url)

    def attach_pipeline(self, pipeline: WatchedPipeline, source_id: int) -> None:
        """A running pipeline's results for one of its sources: frames and outputs come from
        the pipeline, so the workflow is not run a second time."""
        if source_id not in pipeline.source_ids:
            raise InvalidRequest(
                f"pipeline_source_id {source_id} is not a source of pipeline "
                f"{pipeline.pipeline_id} (its sources: {pipeline.source_ids})"
            )
        feed = self._live_feed()
        self.attached = True

        def watch(result: PipelineResult) -> None:  # on our loop, from the pipeline's task
            if result.source_id == source_id and not feed.buffer.closed:
                self._metrics.frames_received.inc()
                self._spawn(feed.put(FedFrame.now(result.frame, result.outputs)))

        def ended(stopped: int | None, why: str) -> None:  # on our loop too
            if stopped is None or stopped == source_id:
                self._spawn(self.source_ended(why))

        self._stop_watching = pipeline.watch(watch, ended)
        log.info("session %s watches pipeline %s", self._session, pipeline.pipeline_id[:8])

    def on_track(self, track: MediaStreamTrack) -> None:
        """A track the client sent: the first video track is the source; anything else is
        drained so aiortc's queue stays empty."""
        if track.kind == "video" and not self.attached:
            self.attached = True
            self._spawn(self._read_track(track, self._live_feed()))
        else:
            self._spawn(discard(track))

    def on_upload_channel(self, channel: RTCDataChannel) -> None:
        """The file arrives on ``channel``; once complete it becomes the source."""
        if self.attached:
            self._notices.report(
                NoticeCode.UPLOAD_IGNORED, "video_upload ignored: the session already has a source"
            )
            channel.close()
            return
        self.attached = True
        try:
            receiver = UploadReceiver(self._limits.max_upload_bytes, self._limits.upload_dir)
        except OSError as exc:
            log.error("session %s: cannot create an upload file: %s", self._session, exc)
            channel.close()
            self._spawn(
                self.end(
                    Notice(
                        NoticeCode.UPLOAD_UNAVAILABLE, "the server cannot store uploads right now"
                    )
                )
            )
            return
        self._upload = receiver
        progress = asyncio.Event()
        self._spawn(self._watch_upload(receiver, progress, channel))

        def on_message(message: str | bytes) -> None:
            progress.set()
            data = message.encode() if isinstance(message, str) else message
            try:
                status = receiver.feed(data)
            except UploadError as exc:
                log.info("session %s: upload refused: %s", self._session, exc)
                self._metrics.uploads_refused.inc()
                channel.remove_listener("message", on_message)
                channel.close()
                self._spawn(self.end(Notice(NoticeCode.UPLOAD_REFUSED, str(exc))))
                return
            if status is UploadStatus.KEEPALIVE:
                channel.send(message)
            elif status is UploadStatus.COMPLETE:
                self._metrics.upload_bytes.inc(receiver.bytes_received)
                self._spawn(self._play_upload(receiver))

        def on_close() -> None:
            if not (receiver.complete or receiver.failed or self._closing):
                incomplete = "the upload channel closed before the file was complete"
                self._spawn(self.end(Notice(NoticeCode.UPLOAD_INCOMPLETE, incomplete)))

        channel.on("message", on_message)
        channel.on("close", on_close)

    # ------------------------------------------------------------------------ buffers

    def _live_feed(self) -> FrameFeed:
        """For a source that cannot be paused (a client's track, a camera, a pipeline):
        realtime keeps the newest frame; otherwise a bounded FIFO that drops (and reports)
        the oldest."""
        if self.realtime:
            buffer: FrameBuffer[FedFrame] = FrameBuffer("latest")
        else:
            buffer = FrameBuffer("drop_oldest", self._limits.input_queue_frames)
        reason = "latest_frame_wins" if self.realtime else "input_queue_full"
        return self._feed(self._attach(buffer), reason)

    def _feed(
        self, buffer: FrameBuffer[FedFrame], drop_reason: str, count_received: bool = False
    ) -> FrameFeed:
        """``count_received``: frames count as received once put (a file's; the others are
        counted where they arrive, before anything may refuse them)."""
        dropped = self._metrics.frames_dropped.labels(drop_reason)
        received = self._metrics.frames_received

        def on_put(discarded: int) -> None:
            if count_received:
                received.inc()
            if discarded:
                dropped.inc(discarded)

        return FrameFeed(buffer, self._spawn, on_put=on_put)

    def _attach(self, buffer: FrameBuffer[FedFrame]) -> FrameBuffer[FedFrame]:
        self._buffer = buffer
        self._ready.set()
        return buffer

    # -------------------------------------------------------------------------- tasks

    async def _read_track(self, track: MediaStreamTrack, feed: FrameFeed) -> None:
        try:
            async for frame in received_frames(track):
                if feed.buffer.closed:
                    return  # the session is ending
                self._metrics.frames_received.inc()
                if frame.width * frame.height > self._limits.max_frame_pixels:
                    self._refuse_large_frame(frame.width, frame.height)
                    continue
                await feed.put(FedFrame.now(frame))
        finally:
            await feed.buffer.close()

    async def _watch_upload(
        self, receiver: UploadReceiver, progress: asyncio.Event, channel: RTCDataChannel
    ) -> None:
        """An upload that stops sending (a client that hangs halfway) is abandoned after
        ``upload_idle_timeout_s``: its file deleted, the session told why."""
        timeout = self._limits.upload_idle_timeout_s
        if await receiver.stalls(progress, timeout):
            log.info("session %s: upload stalled", self._session)
            channel.close()
            stalled = (
                f"the upload stalled: no chunk for {timeout:g} s "
                "(VISIONSTREAM_UPLOAD_IDLE_TIMEOUT_S)"
            )
            await self.end(Notice(NoticeCode.UPLOAD_STALLED, stalled))

    async def _play_upload(self, receiver: UploadReceiver) -> None:
        """Decode the uploaded file on a thread: at its own rate dropping late frames
        (realtime), or every frame, waiting whenever the session's buffer is full."""
        source = FileSource(receiver.path, self.realtime, UPLOAD_LABEL, defer_open=True)
        self._file = source  # close() closes it, even while it is being opened
        try:
            await asyncio.to_thread(source.open)
        except SourceError as exc:
            await self.end(Notice(NoticeCode.SOURCE_ERROR, str(exc)))
            return
        log.info(
            "session %s: uploaded video of %d bytes, %s frames at %s fps",
            self._session,
            receiver.bytes_received,
            source.frame_count or "unknown",
            f"{source.fps:g}" if source.fps else "unknown",
        )
        buffer: FrameBuffer[FedFrame] = (
            FrameBuffer("latest")
            if self.realtime
            else FrameBuffer("wait", self._limits.decode_queue_frames)
        )
        feed = self._feed(self._attach(buffer), "late_frame", count_received=True)
        try:
            error = await feed.play(source)
        except BufferClosed:
            return  # the session is ending
        await self.end(Notice(NoticeCode.SOURCE_ERROR, error) if error else None)

    def _refuse_large_frame(self, width: int, height: int) -> None:
        self._metrics.frames_dropped.labels("frame_too_large").inc()
        if not self._frame_too_large_reported:  # once: it is said, not repeated every frame
            self._frame_too_large_reported = True
            self._notices.report(
                NoticeCode.FRAME_TOO_LARGE,
                f"frames of {width}x{height} exceed VISIONSTREAM_MAX_FRAME_PIXELS "
                f"({self._limits.max_frame_pixels}) and are dropped; send a smaller size",
            )
