"""A protocol-level aiortc client: sends frames we make, collects results and returned frames.

The inference-sdk client is tested as-is elsewhere; this one exists for what that client
cannot do on purpose: send hostile control messages and uploads, skip the video track, hold
sessions.
"""

from __future__ import annotations

import asyncio
import fractions
import json
from collections.abc import Iterable
from typing import Any

import av
import httpx
import numpy as np
from aiortc import MediaStreamTrack, RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from streaming.protocol.chunking import Reassembler, maybe_gunzip

CLOCK = fractions.Fraction(1, 90000)
STEP = 3000  # 30 fps on the RTP clock


def loopback_peer() -> RTCPeerConnection:
    """A peer with no ICE servers: given none at all, aiortc falls back to a public STUN
    server, and tests send nothing beyond 127.0.0.1."""
    return RTCPeerConnection(RTCConfiguration(iceServers=[]))


async def data_channel_offer() -> str:
    """A loopback peer's offer with only the results channel (the peer closed after)."""
    pc = loopback_peer()
    pc.createDataChannel("inference")
    await pc.setLocalDescription(await pc.createOffer())
    sdp = pc.localDescription.sdp
    await pc.close()
    return sdp


class QueuedVideoTrack(MediaStreamTrack):
    """Sends queued images at most at 30 fps on the RTP clock, as aiortc's own tracks pace.

    Note aiortc's receiver releases a frame only when the next one arrives, so the server
    sees frame k once frame k+1 was sent.
    """

    kind = "video"

    def __init__(self) -> None:
        super().__init__()
        self._queue: asyncio.Queue[np.ndarray | None] = asyncio.Queue()
        self._pts = 0
        self._due = 0.0

    def send(self, image: np.ndarray | None) -> None:
        self._queue.put_nowait(image)

    async def drained(self) -> None:
        """Until the encoder has taken every queued image (a sender keeps pace with it)."""
        await self._queue.join()

    async def recv(self) -> av.VideoFrame:
        image = await self._queue.get()
        self._queue.task_done()
        if image is None:
            self.stop()
            raise MediaStreamError
        loop = asyncio.get_running_loop()
        # Media pacing (a burst of frames overflows loopback UDP buffers), not a wait.
        await asyncio.sleep(max(0.0, self._due - loop.time()))
        self._due = max(self._due, loop.time()) + float(STEP * CLOCK)
        frame = av.VideoFrame.from_ndarray(image, format="bgr24")
        frame.pts, frame.time_base = self._pts, CLOCK
        self._pts += STEP
        return frame


class LoopbackPeer:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.pc = loopback_peer()
        self.track: QueuedVideoTrack | None = None
        self.results: list[dict[str, Any]] = []
        self.frames: list[av.VideoFrame] = []
        self._changed = asyncio.Condition()
        self._reassembler = Reassembler()
        self.channel = None
        self.upload_channel = None
        self.upload_echoes: list[bytes | str] = []
        self.connected = asyncio.Event()
        self._tasks: set[asyncio.Future] = set()

    async def offer_body(
        self, video: bool = True, channel: bool = True, upload: bool = False, **fields: Any
    ) -> dict:
        if upload:
            self.upload_channel = self.pc.createDataChannel("video_upload")
            self.upload_channel.on("message", self.upload_echoes.append)
        if video:
            self.track = QueuedVideoTrack()
            self.pc.addTrack(self.track)
        if channel:
            self.channel = self.pc.createDataChannel("inference")
            self.channel.on("message", self._on_message)
        self.pc.on("track", self._on_track)
        self.pc.on("connectionstatechange", self._on_state)
        await self.pc.setLocalDescription(await self.pc.createOffer())
        body = {
            "workflow_configuration": {
                "type": "WorkflowConfiguration",
                "workflow_specification": fields.pop("spec"),
                "image_input_name": "image",
                "workflows_parameters": {},
            },
            "webrtc_offer": {"type": "offer", "sdp": self.pc.localDescription.sdp},
            "stream_output": ["annotated"],
            "data_output": ["predictions"],
        }
        body.update(fields)
        return body

    async def connect(self, headers: dict | None = None, **fields: Any) -> httpx.Response:
        body = await self.offer_body(**fields)
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(
                self.base_url + "/initialise_webrtc_worker", json=body, headers=headers or {}
            )
        if response.status_code == 200:
            answer = response.json()
            await self.pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], answer["type"]))
        return response

    async def _on_state(self) -> None:
        if self.pc.connectionState == "connected":
            self.connected.set()

    def _on_track(self, track: MediaStreamTrack) -> None:
        async def read() -> None:
            try:
                while True:
                    frame = await track.recv()
                    async with self._changed:
                        self.frames.append(frame)
                        self._changed.notify_all()
            except MediaStreamError:
                pass

        self._tasks.add(asyncio.ensure_future(read()))

    def _on_message(self, message: bytes | str) -> None:
        assert isinstance(message, bytes), "the server only sends binary chunks"
        done = self._reassembler.add(message)
        if done is None:
            return
        _, payload = done
        result = json.loads(maybe_gunzip(payload))
        result["_gzipped"] = payload[:2] == b"\x1f\x8b"
        self.results.append(result)
        self._tasks.add(asyncio.ensure_future(self._notify()))

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate, timeout: float = 30) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(predicate), timeout)

    async def end_video(self) -> None:
        """Stop sending video; the RTCP BYE tells the server its source ended."""
        for sender in self.pc.getSenders():
            if sender.track is self.track:
                await sender.stop()

    async def send_upload(self, messages: Iterable[bytes | str]) -> None:
        """Send on ``video_upload`` once it is open, keeping aiortc's queue short."""
        channel = self.upload_channel
        assert channel is not None
        changed = asyncio.Event()
        for event in ("open", "bufferedamountlow", "close"):
            channel.on(event, changed.set)
        channel.bufferedAmountLowThreshold = 1 << 18
        for message in messages:
            while channel.readyState == "connecting" or (
                channel.readyState == "open" and channel.bufferedAmount > 1 << 20
            ):
                changed.clear()
                await changed.wait()
            if channel.readyState != "open":
                return
            channel.send(message)

    def send_control(self, message: str | bytes | dict) -> None:
        assert self.channel is not None
        self.channel.send(json.dumps(message) if isinstance(message, dict) else message)

    async def close(self) -> None:
        await self.pc.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
