"""AsyncWebRTCSession: one streaming session on the caller's event loop.

The blocking ``WebRTCSession`` runs this same object on a loop thread of its own.

Flow: source (video track | upload | server-pulled URL) -> server; back come the processed
video track (-> ``video()`` frames) and result messages on the ``inference`` channel
(reassembled, gunzipped -> handlers, ``results()`` pairs, ACKs when the request asked for
non-realtime processing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Coroutine
from dataclasses import dataclass
from enum import Enum
from typing import Any

from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription

from sources import SourceError

from ..protocol.messages import SIGNALING_PATH, IceServer
from ..rtc.codecs import negotiated_video_codec, preferring
from ..rtc.ice import build_configuration, candidate_types, relay_problem
from ..rtc.jitter import releasing_on_marker
from ..rtc.reach import connection_problem, hopeless
from ..rtc.track import received_frames
from ..tasks import Closer, TaskOwner
from .config import StreamConfig
from .errors import SessionStartError
from .handlers import Handlers, call_handler
from .receiver import ResultReceiver
from .returned import Frame, Result, Returned
from .signaling import offer_request, post_offer
from .sources import StreamSource

__all__ = ["AsyncWebRTCSession", "SessionStats", "VideoBytes"]

log = logging.getLogger(__name__)


@dataclass
class SessionStats:
    """Counters of one client session, for programs and the ``stream`` command's status line."""

    frames_received: int = 0
    """Frames that came back (video track or data channel)."""
    messages_received: int = 0
    malformed_messages: int = 0
    """Chunks or messages that could not be read (logged, then skipped)."""
    messages_dropped: int = 0
    """Result messages dropped, oldest first, because the program's handlers fell
    ``inbox_messages`` behind (realtime sessions only: with ACKs the server waits)."""
    acks_sent: int = 0


@dataclass(frozen=True)
class VideoBytes:
    """RTP payload bytes of the session's video, from WebRTC statistics: a rate is the
    difference of two readings over the time between them."""

    sent: int = 0
    """Sent to the server (this side's counter)."""
    received: int = 0
    """Sent back by the server, as of its last RTCP sender report (every second or so)."""


class SessionState(Enum):
    """NEW until ``start`` connected; OPEN while streaming; CLOSED for good."""

    NEW = "new"
    OPEN = "open"
    CLOSED = "closed"


class AsyncWebRTCSession:
    """Use ``async with`` (starts on entry, closes on exit), or call ``start``/``close``."""

    def __init__(
        self,
        *,
        api_url: str,
        api_key: str | None,
        source: StreamSource,
        workflow_config: dict[str, Any],
        image_input: str,
        config: StreamConfig,
        connect_timeout: float = 30.0,
        request_timeout: float = 90.0,
        frame_buffer: int = 8,
        release_on_marker: bool = True,
        inbox_messages: int = 256,
    ) -> None:
        """``inbox_messages``: result messages a realtime session holds while handlers are
        busy; past that the oldest are dropped and counted in ``stats.messages_dropped`` (the
        completion message, always the newest, is never among them). A session that sends
        ACKs drops none: the server's ACK window bounds what it sends ahead."""
        self.url = api_url.rstrip("/") + SIGNALING_PATH
        self._api_key = api_key
        self.source = source
        self._workflow_config = workflow_config
        self._image_input = image_input
        self.config = config
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._release_on_marker = release_on_marker
        self.stats = SessionStats()
        self.termination_reason: str | None = None
        self.completed = False
        """The server said the stream is over (``processing_complete``): not a lost link."""
        self._returned = Returned(frame_buffer)
        self.pairer = self._returned.pairer
        self._handlers = Handlers()
        self._receiver = ResultReceiver(
            self.stats, self._handlers, self._returned, config.stream_output or [],
            inbox_messages, self._completed,
        )  # fmt: skip
        self._pc: RTCPeerConnection | None = None
        self._tasks = TaskOwner("client-session", self._on_task_failure)
        self._closer = Closer(self.close, "client-session:close")
        self._state = SessionState.NEW
        self._start_lock = asyncio.Lock()
        self._state_changed = asyncio.Event()
        self._closed = asyncio.Event()
        self.receives_video = False
        self.video_codec: str | None = None
        """The video codec the server answered with (``VP8``, ``H264``), once connected."""
        self.candidate_types: dict[str, set[str]] = {"local": set(), "remote": set()}
        """The ICE candidate types (host, srflx, relay) each side offered, once connected:
        only ``relay`` on either side means every packet goes through a TURN relay."""

    # ------------------------------------------------------------------ handlers

    def on_frame(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        """``handler(frame, metadata)`` for each returned frame, called by ``run()``."""
        self._handlers.frame.append(handler)
        return handler

    @property
    def frame_handlers(self) -> tuple[Callable[..., Any], ...]:
        return tuple(self._handlers.frame)

    def on_data(self, field: str | Callable[..., Any] | None = None) -> Any:
        """``@on_data``, ``@on_data()`` (whole ``serialized_output_data``) or
        ``@on_data("name")`` (one output); handlers take ``(value)`` or ``(value, metadata)``."""
        if callable(field):
            self._handlers.add_data(field)
            return field

        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            self._handlers.add_data(handler, field)
            return handler

        return register

    def on_error(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        """``handler(errors)`` or ``handler(errors, metadata)`` for frames the server reported
        errors for (they are also in ``metadata.errors``)."""
        self._handlers.add_error(handler)
        return handler

    # ----------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> AsyncWebRTCSession:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._state is SessionState.CLOSED

    async def start(self) -> None:
        """Connect; idempotent. A failure raises one ``SessionStartError`` after cleanup."""
        async with self._start_lock:
            if self._state is SessionState.CLOSED:
                raise RuntimeError("this session is closed")
            if self._state is SessionState.OPEN:
                return
            try:
                # Receivers made while connecting are this session's (streaming/rtc/).
                with releasing_on_marker() if self._release_on_marker else contextlib.nullcontext():
                    await self._connect()
            except BaseException as exc:
                await self.close()
                if isinstance(exc, SessionStartError | asyncio.CancelledError):
                    raise
                if not isinstance(exc, Exception):
                    raise
                if isinstance(exc, SourceError):  # the source's fault, said in its words
                    raise SessionStartError(str(exc), url=self.url) from exc
                raise SessionStartError(
                    f"cannot start a session with {self.url}: {type(exc).__name__}: {exc}",
                    url=self.url,
                ) from exc
            self._state = SessionState.OPEN

    async def close(self) -> None:
        """Idempotent; safe from handlers and from any of the session's own tasks."""
        if self._state is SessionState.CLOSED:
            await self._closed.wait()
            return
        self._state = SessionState.CLOSED
        await self._tasks.close()
        try:
            await self.source.aclose()
        finally:
            if self._pc is not None:
                await self._pc.close()
            await self._returned.end()
            self._closed.set()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        if self._state is SessionState.CLOSED:
            coro.close()
            return
        self._tasks.spawn(coro)

    def _on_task_failure(self, name: str, exc: BaseException) -> None:
        # A session whose reader or dispatcher died would only look alive: end it, so the
        # program's loops over frames and results finish instead of waiting forever.
        self._closer()

    # ---------------------------------------------------------------- connecting

    async def _connect(self) -> None:
        ice = [IceServer.model_validate(self.config.turn_server)] if self.config.turn_server else []
        configuration = build_configuration([], ice, policy=self.config.ice_transport_policy)
        pc = RTCPeerConnection(configuration)
        self._pc = pc
        pc.on("connectionstatechange", self._on_connection_state)
        pc.on("track", self._on_track)
        channel = pc.createDataChannel("inference")
        channel.on("message", self._receiver.receive)
        self._receiver.channel = channel
        await self.source.attach(pc, self._spawn)
        if self.config.video_codec is not None:
            for transceiver in pc.getTransceivers():
                if transceiver.kind == "video":
                    transceiver.setCodecPreferences(preferring(self.config.video_codec))
        await pc.setLocalDescription(await pc.createOffer())
        if problem := await relay_problem(configuration, pc.localDescription.sdp):
            raise SessionStartError(f"cannot connect to {self.url}: {problem}", url=self.url)
        request = offer_request(
            pc.localDescription.sdp, self.config, self.source, self._workflow_config,
            self._image_input, self._api_key,
        )  # fmt: skip
        self._receiver.send_acks = request.send_acks
        self._receiver.video_in_messages = request.video_in_messages
        self.receives_video = request.receives_video
        self._returned.receives_video = request.receives_video
        answer = await post_offer(
            self.url, request.body, timeout=self._request_timeout,
            releases_on_marker=self._release_on_marker,
        )  # fmt: skip
        try:
            await pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], answer["type"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise SessionStartError(
                f"{self.url} answered with an unusable SDP answer: {exc}", url=self.url
            ) from None
        self._spawn(self._receiver.run())
        await self._wait_connected(pc)
        self.candidate_types = {
            "local": candidate_types(pc.localDescription.sdp),
            "remote": candidate_types(pc.remoteDescription.sdp),
        }
        self.video_codec = negotiated_video_codec(pc.remoteDescription.sdp)
        await self.source.start(self._spawn)

    async def _wait_connected(self, pc: RTCPeerConnection) -> None:
        async def connected() -> None:
            while pc.connectionState not in ("connected", "failed", "closed"):
                self._state_changed.clear()
                await self._state_changed.wait()

        # Hopeless from the start (the server offered no address this machine reaches):
        # said at once, not when the connect timeout ends.
        local, remote = pc.localDescription.sdp, pc.remoteDescription.sdp
        if why := hopeless(local, remote, self.url):
            raise SessionStartError(f"cannot connect to {self.url}: {why}", url=self.url)
        why = connection_problem(local, remote, self.url)
        try:
            await asyncio.wait_for(connected(), self._connect_timeout)
        except TimeoutError:
            raise SessionStartError(
                f"no WebRTC connection to the server at {self.url} within "
                f"{self._connect_timeout:g} s: {why}",
                url=self.url,
            ) from None
        if pc.connectionState != "connected":
            raise SessionStartError(
                f"the WebRTC connection to the server at {self.url} {pc.connectionState} "
                f"while connecting: {why}",
                url=self.url,
            )

    async def _on_connection_state(self) -> None:
        self._state_changed.set()
        if self._pc is not None and self._pc.connectionState in ("failed", "closed"):
            await self._returned.end()

    # ------------------------------------------------------------------ receiving

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "video":
            self._spawn(self._read_video(track))

    async def _read_video(self, track: MediaStreamTrack) -> None:
        async for frame in received_frames(track):
            self.stats.frames_received += 1
            if not await self._returned.frame(frame):
                return

    def _completed(self, reason: str | None) -> None:
        """The server said the stream is over: what is still coming back ends it."""
        self.completed = True
        self.termination_reason = reason
        log.info("server finished the stream (%s)", reason or "end of source")
        self._spawn(self._returned.end_after_tail())

    # ------------------------------------------------------------------ consuming

    async def video_bytes(self) -> VideoBytes:
        """Video bytes so far each way (``VideoBytes``); zeros before ``start``."""
        pc = self._pc
        if pc is None or pc.connectionState == "closed":
            return VideoBytes()
        sent = received = 0
        for stats in (await pc.getStats()).values():
            if getattr(stats, "kind", None) != "video":
                continue
            if stats.type == "outbound-rtp":
                sent += stats.bytesSent
            elif stats.type == "remote-outbound-rtp":
                received += stats.bytesSent
        return VideoBytes(sent, received)

    async def video(self) -> AsyncGenerator[Frame, None]:
        """``(frame, metadata)`` for each returned frame until the stream ends.

        ``metadata`` is the frame's result-message metadata when that message already
        arrived; otherwise what the frame itself carries (``pts`` always matches)."""
        await self.start()
        while (item := await self._returned.frames.get()) is not None:
            yield item

    async def results(self) -> AsyncGenerator[Result, None]:
        """``(frame, data, metadata)``: each returned frame with its own result message,
        paired by pts within one 90 kHz tick. ``frame`` is None for sessions without video."""
        await self.start()
        while (item := await self._returned.results.get()) is not None:
            yield item

    async def run(self) -> None:
        """Calls the ``on_frame`` handlers for each frame until the stream ends; then closes."""
        try:
            async for frame, metadata in self.video():
                for handler in self.frame_handlers:
                    await call_handler(handler, frame, metadata)
        finally:
            await self.close()

    async def wait(self, timeout: float | None = None) -> None:
        """Until the stream ends; ``TimeoutError`` after ``timeout`` seconds."""
        await self.start()
        try:
            await asyncio.wait_for(self._returned.ended.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"the stream did not end within {timeout:g} s") from None
