"""PeerWorker: one WebRTC session — its peer connection, its tasks, and their teardown.

Flow: the session's one video source -> reader task -> FrameBuffer -> session loop (ACK gate
-> FrameProcessor in a worker thread) -> OutboundVideoTrack + ResultChannel. The source is the
client's video track (buffer: latest | bounded FIFO) or a file uploaded on ``video_upload``,
written to disk and decoded on a thread (buffer: latest at native rate | bounded and waiting,
so decoding pauses instead of dropping). The worker owns every task it starts; ``close`` is
idempotent, cancels them, awaits them and deletes the upload.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any

from aiortc import RTCDataChannel, RTCPeerConnection, RTCSessionDescription

from sources.hub import SourceHub

from ..errors import InvalidOffer
from ..metrics import Metrics
from ..protocol.messages import (
    ResultMessage,
    WebRTCOffer,
    WebRTCWorkerRequest,
)
from ..protocol.notices import NoticeCode
from ..protocol.upload import UPLOAD_CHANNEL
from ..rtc.codecs import add_video_track, negotiated_video_codec
from ..rtc.ice import build_configuration
from ..rtc.offer import answer_offer, check_offer_sdp, is_sent, track_peer_connection
from ..rtc.release import releases_frames
from ..tasks import Closer, TaskOwner
from ..watching import WatchedPipeline
from ..workflows.runner import FrameFacts
from .ack import AckGate
from .control import ControlChannel
from .inputs import SessionInput
from .notices import Notices
from .processor import FrameJob, FrameProcessor
from .result_channel import ResultChannel
from .session_config import SessionConfig
from .tracks import OutboundVideoTrack

__all__ = ["PeerWorker"]

log = logging.getLogger(__name__)

_FIRST_RESULT_CHANNEL_WAIT_S = 2.0
_COMPLETION_FLUSH_S = 2.0
# After one of the session's tasks failed: time to tell the client before closing anyway.
_FAILURE_GOODBYE_S = 6.0


class PeerWorker:
    """One WebRTC session: its peer connection, its lifecycle (deadlines, teardown) and the
    session loop; its input, control channel and notices are parts it owns."""

    def __init__(
        self,
        config: SessionConfig,
        request: WebRTCWorkerRequest,
        processor: FrameProcessor,
        executor: Executor,
        metrics: Metrics,
        on_closed: Callable[[PeerWorker], None],
        session_id: str | None = None,
    ) -> None:
        self.session_id = session_id or uuid.uuid4().hex
        self._config = config
        self._request = request
        self._processor = processor
        self._executor = executor
        self._metrics = metrics
        self._on_closed = on_closed
        realtime = request.webrtc_realtime_processing
        self.realtime = realtime
        self._acks = AckGate(config.ack_window, enabled=not realtime)
        self._results = ResultChannel(
            config.datachannel_high_water_bytes,
            config.datachannel_low_water_bytes,
            config.datachannel_drain_timeout_s,
        )
        self._out_track: OutboundVideoTrack | None = None
        self._pc: RTCPeerConnection | None = None
        self._tasks = TaskOwner(f"session-{self.session_id[:8]}", self._on_task_failure)
        self._closer = Closer(self.close, f"session-{self.session_id[:8]}:close")
        self._ender = Closer(self._end_after_failure, f"session-{self.session_id[:8]}:fail")
        self._completion_sent = False
        self._data_expected = True
        """The offer has a data-channel section; a WHEP player's has none: nothing is sent."""
        self._notices = Notices()
        self._input = SessionInput(
            self.session_id[:8], realtime, config.input, metrics,
            self._notices, self._spawn,
        )  # fmt: skip
        self._control = ControlChannel(
            self.session_id[:8], processor, self._acks, self._notices, metrics, self._spawn,
            self._on_flood,
        )  # fmt: skip
        self._termination_reason: str | None = None
        self._last_send_ms = 0.0
        self.frames_processed = 0
        self._closing = False
        self.closed = asyncio.Event()

    # ----------------------------------------------------------------- lifecycle

    async def start(
        self, offer: WebRTCOffer, user_agent: str = "", caller: str = ""
    ) -> RTCSessionDescription:
        """Apply the offer, gather ICE, start the session; returns the complete answer.
        ``user_agent`` (the request's) tells our own client, which releases frames itself;
        ``caller`` is the client's address (its own loopback candidates are its to offer)."""
        if offer.type != "offer":
            raise InvalidOffer(f"webrtc_offer.type must be 'offer', got '{offer.type}'")
        check_offer_sdp(offer.sdp)
        sdp = self._config.candidates.screen(offer.sdp, caller, "webrtc_offer.sdp")
        self._data_expected = any(line.startswith("m=application") for line in sdp.splitlines())
        config = self._config
        servers = self._request.ice_servers() if config.allow_client_ice_servers else []
        ice = build_configuration(
            config.ice_servers, servers, username=config.ice_username,
            credential=config.ice_credential, policy=config.ice_policy,
        )  # fmt: skip
        pc = RTCPeerConnection(ice)
        self._pc = pc
        track_peer_connection(pc)
        pc.on("connectionstatechange", self._on_connection_state)
        pc.on("track", self._input.on_track)
        pc.on("datachannel", self._on_datachannel)
        if self._processor.selection.stream_output is not None:
            if any(line.startswith("m=video") for line in sdp.splitlines()):
                self._out_track = OutboundVideoTrack(
                    "latest" if self.realtime else "wait", self._config.output_queue_frames
                )
                add_video_track(pc, self._out_track, config.video_codec)
            else:  # aiortc cannot answer a track with no m-line to carry it
                self._notices.report(
                    NoticeCode.OUTPUT_SWITCH_IGNORED,
                    "stream_output ignored: the offer has no video section to carry it",
                )
        await answer_offer(pc, sdp, ice, config.ice_gathering_timeout_s, "webrtc_offer.sdp")
        self._drop_track_nobody_receives(pc)
        self._control.video_out = self._out_track is not None
        if self._out_track is not None:
            self._out_track.release_held_frames = releases_frames(
                self._config.release_frames, sdp, pc.localDescription.sdp, user_agent
            )
        self._spawn(self._session_loop())
        self._spawn(self._expire_at_deadline())
        self._spawn(self._expire_unless_connected())
        return pc.localDescription

    async def attach_camera(self, hub: SourceHub, url: str, wait_s: float) -> None:
        """Make a camera (read through the hub, shared) this session's source; before
        ``start``. Raises ``SourceUnavailable`` naming the masked URL if it gives no frame."""
        await self._input.attach_camera(hub, url, wait_s)

    def attach_pipeline(self, pipeline: WatchedPipeline, source_id: int) -> None:
        """Show a running pipeline's results for one of its sources (before ``start``)."""
        self._input.attach_pipeline(pipeline, source_id)

    async def source_ended(self, why: str) -> None:
        """The watched source stopped for good (the pipeline says so itself; a WHIP
        publisher's end is told here too): the session ends once, saying ``why``."""
        await self._input.source_ended(why)

    def _drop_track_nobody_receives(self, pc: RTCPeerConnection) -> None:
        # A client that does not receive video never pulls the track; waiting on it would
        # stall a non-realtime session forever.
        if self._out_track is None or is_sent(pc, self._out_track):
            return
        self._out_track.stop()
        self._out_track = None

    async def close(self) -> None:
        """Idempotent; safe to call from any of the worker's own tasks."""
        if self._closing:
            await self.closed.wait()
            return
        self._closing = True
        self._control.ended = True
        await self._tasks.close()
        await self._input.close()
        await self._acks.close()
        if self._processor.workflow is not None:  # the session's own (a watched pipeline's is not)
            await asyncio.to_thread(self._processor.workflow.close)
        if self._out_track is not None:
            await self._out_track.finish()
            self._out_track.stop()
        if self._pc is not None:
            await self._pc.close()
        self._on_closed(self)
        self.closed.set()
        log.info("session %s closed after %d frames", self.session_id[:8], self.frames_processed)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any] | None:
        return self._tasks.spawn(coro)

    def _on_task_failure(self, name: str, exc: BaseException) -> None:
        # A bug of ours, not the peer's: say so without our internals, end the session now.
        task = name.partition(":")[2]
        message = (
            f"internal error in {task} ({type(exc).__name__}); the session ends, see the server log"
        )
        self._notices.report(NoticeCode.INTERNAL_ERROR, message)
        self._termination_reason = NoticeCode.INTERNAL_ERROR
        self._ender()

    async def _end_after_failure(self) -> None:
        await self._tasks.close()  # what is left of the session stops here
        try:
            async with asyncio.timeout(_FAILURE_GOODBYE_S):
                await self._finish(self.frames_processed)
        except Exception:  # the goodbye is best effort: the peer may be the broken part
            log.warning("session %s: no completion sent after a failure", self.session_id[:8])
        await self.close()

    async def terminate(self, reason: str) -> None:
        """End the session from the server's side: the client's completion message says
        ``reason``; the session closes once it is sent."""
        await self._terminate(reason)

    async def _terminate(self, reason: str | None) -> None:
        """End processing: the session loop sends the completion message and closes."""
        self._termination_reason = reason
        self._control.ended = True
        await self._input.current().close(discard=True)
        await self._acks.close()

    async def _expire_at_deadline(self) -> None:
        lifetime = self._config.lifetime_s(self._request)
        if lifetime > 0:
            await asyncio.sleep(lifetime)  # a timer: nothing else can tell us the time is up
        log.info("session %s reached its deadline", self.session_id[:8])
        await self._terminate("timeout_reached")

    async def _expire_unless_connected(self) -> None:
        await asyncio.sleep(self._config.connect_timeout_s)
        if self._pc is not None and self._pc.connectionState != "connected":
            log.info("session %s never connected; closing", self.session_id[:8])
            self._spawn_close()

    def _spawn_close(self) -> None:
        if not self._closing:
            self._closer()  # not one of self._tasks: close() must not cancel the task running it

    # ------------------------------------------------------------ peer callbacks

    async def _on_connection_state(self) -> None:
        assert self._pc is not None
        state = self._pc.connectionState
        if state == "connected":
            codec = negotiated_video_codec(self._pc.localDescription.sdp) or "no video"
            log.info("session %s connected (%s)", self.session_id[:8], codec)
        else:
            log.debug("session %s connection %s", self.session_id[:8], state)
        if state in ("failed", "closed"):
            self._spawn_close()

    def _on_datachannel(self, channel: RTCDataChannel) -> None:
        if channel.label == UPLOAD_CHANNEL:
            self._input.on_upload_channel(channel)
            return
        self._results.attach(channel)
        channel.on("message", self._control.on_message)

    def _on_flood(self) -> None:
        self._termination_reason = NoticeCode.CONTROL_MESSAGE_FLOOD
        self._spawn(self._terminate(self._termination_reason))

    async def _session_loop(self) -> None:
        loop = asyncio.get_running_loop()
        source = await self._input.buffer()
        frame_id = 0
        while await self._acks.wait_turn(frame_id + 1):
            item = await source.get()
            if item is None:
                break
            frame_id += 1
            queue_wait_ms = (time.perf_counter() - item.received_mono) * 1000
            facts = FrameFacts(
                "webrtc",
                frame_id,
                item.received_at,
                fps=item.fps or self._request.declared_fps,  # a file's own rate wins
                from_file=item.from_file,
            )
            job = FrameJob(
                frame=item.frame,
                facts=facts,
                queue_wait_ms=queue_wait_ms,
                errors=self._notices.for_frame(
                    None if self.realtime else source.dropped, source.capacity
                ),
                extra_metadata={
                    "previous_send_ms": round(self._last_send_ms, 3),
                    "dropped_frames": source.dropped,
                },
                render=self._out_track is not None,
                outputs=item.outputs,
            )
            processed = await loop.run_in_executor(self._executor, self._processor.process, job)
            self.frames_processed = frame_id
            self._metrics.frames_processed.labels("session").inc()
            self._metrics.stage_ms.labels("queue_wait").observe(queue_wait_ms)
            for stage, ms in processed.stage_ms.items():
                self._metrics.stage_ms.labels(stage).observe(ms)
            if self._out_track is not None and processed.video_frame is not None:
                await self._out_track.publish(processed.video_frame)
            if not self._data_expected:
                continue
            if frame_id == 1:
                await self._results.wait_attached(_FIRST_RESULT_CHANNEL_WAIT_S)
            sent_at = time.perf_counter()
            if not await self._results.send(frame_id, processed.payload):
                self._metrics.messages_dropped.inc()
            self._last_send_ms = (time.perf_counter() - sent_at) * 1000
        await self._finish(frame_id)

    async def _finish(self, frames: int) -> None:
        if self._completion_sent:
            return
        self._completion_sent = True
        reason = self._termination_reason
        if self._out_track is not None:
            await self._out_track.finish()
        if not self._data_expected:  # a player: the video ending is all it hears; no goodbye
            self._spawn_close()
            return
        await self._results.wait_attached(_FIRST_RESULT_CHANNEL_WAIT_S)
        last_id = frames
        if errors := self._notices.at_end():
            last_id += 1
            await self._results.send(last_id, ResultMessage.notice(frames, errors).to_json())
        completion = ResultMessage.completion(frames, reason).to_json()
        # Header id one past the last message's: ids never collide.
        await self._results.send(last_id + 1, completion)
        await self._results.flush(_COMPLETION_FLUSH_S)
        if reason is not None:
            # Only the deadline path closes from the server side; after a normal end of
            # stream the client closes when it sees processing_complete.
            self._spawn_close()
