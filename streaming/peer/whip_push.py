"""A restream pushed over WHIP (RFC 9725) to a WebRTC server (MediaMTX, go2rtc, Janus, a
platform's ingest): a send-only peer whose video is the restream's own H.264 access units,
packetized by aiortc without encoding again.

A push ``Target`` (``sinks/restream/push.py``): its calls block, on the push's thread, while
the peer lives on an event loop of its own (a thread beside it), so a slow WHIP server never
holds the server's loop. The WHIP endpoint and every ICE candidate of its answer pass the
egress policy (the server connects to them); the offer is H.264 only, packetization mode 1.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from fractions import Fraction
from typing import Any

import av
import httpx
from aiortc import RTCConfiguration, RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.mediastreams import MediaStreamTrack

from sinks.pinning import Pin, PinnedTransport
from sinks.restream.encoding import RTP_CLOCK, EncodedFrame

from ..rtc.candidates import CandidateScreen
from ..rtc.offer import track_peer_connection

__all__ = ["WhipTarget"]

_TIME_BASE = Fraction(1, RTP_CLOCK)
_QUEUED = 30
"""Access units waiting for the peer at most (3 s at 10 fps); older ones are dropped."""


class _PacketTrack(MediaStreamTrack):
    """The restream's access units as aiortc takes pre-encoded video: ``av.Packet``s."""

    kind = "video"

    def __init__(self) -> None:
        super().__init__()
        self._packets: collections.deque[av.Packet] = collections.deque(maxlen=_QUEUED)
        self._ready = asyncio.Event()

    def put(self, frame: EncodedFrame) -> None:
        packet = av.Packet(frame.data)
        packet.pts, packet.time_base = frame.pts, _TIME_BASE
        self._packets.append(packet)
        self._ready.set()

    async def recv(self) -> Any:
        while not self._packets:
            self._ready.clear()
            await self._ready.wait()
        return self._packets.popleft()


class WhipTarget:
    """One WHIP publication of a restream; ``write`` raises once the peer has failed."""

    def __init__(
        self,
        url: str,
        token: str | None,
        pin: Pin | None,
        screen: CandidateScreen,
        timeout_s: float = 10.0,
    ) -> None:
        self._url, self._token, self._pin, self._screen = url, token, pin, screen
        self._timeout_s = timeout_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="whip push", daemon=True
        )
        self._thread.start()
        self._pc: RTCPeerConnection | None = None
        self._track: _PacketTrack | None = None
        self._resource: str | None = None
        try:
            self._connect()
        except BaseException:
            self.close()
            raise

    def _call(self, coroutine: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def _http(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """A request to the WHIP server (on the push's thread), to the address the egress
        policy checked."""
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        transport: httpx.BaseTransport = httpx.HTTPTransport()
        if self._pin is not None:
            transport = PinnedTransport(self._pin, transport)
        with httpx.Client(transport=transport, timeout=self._timeout_s) as client:
            headers.update(kwargs.pop("headers", {}))
            return client.request(method, url, headers=headers, **kwargs)

    def _connect(self) -> None:
        offer = self._call(self._offer(), self._timeout_s)
        answer = self._http(
            "POST", self._url, content=offer.encode(), headers={"Content-Type": "application/sdp"}
        )
        if answer.status_code != 201:
            raise ConnectionError(f"the WHIP server answered {answer.status_code}")
        location = answer.headers.get("location")
        self._resource = str(httpx.URL(self._url).join(location)) if location else None
        sdp = self._screen.screen(answer.text, "", "the WHIP server's answer")
        self._call(self._answered(sdp), self._timeout_s)

    async def _offer(self) -> str:
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self._pc = pc
        track_peer_connection(pc)
        self._track = _PacketTrack()
        transceiver = pc.addTransceiver(self._track, direction="sendonly")
        capabilities = RTCRtpSender.getCapabilities("video")
        h264 = [
            codec
            for codec in capabilities.codecs
            if codec.mimeType.lower() == "video/h264"
            and codec.parameters.get("packetization-mode") == "1"
        ]
        transceiver.setCodecPreferences(h264)
        await pc.setLocalDescription(await pc.createOffer())  # gathers every candidate
        return str(pc.localDescription.sdp)

    async def _answered(self, sdp: str) -> None:
        assert self._pc is not None
        await self._pc.setRemoteDescription(RTCSessionDescription(sdp, "answer"))

    def write(self, frame: EncodedFrame) -> None:
        pc = self._pc
        if pc is None or pc.connectionState in ("failed", "closed"):
            raise ConnectionError("the WHIP peer connection ended")
        track = self._track
        assert track is not None
        self._loop.call_soon_threadsafe(track.put, frame)

    def close(self) -> None:
        """Idempotent: the resource deleted (as WHIP asks), the peer closed, its loop ended."""
        if self._loop.is_closed():
            return
        resource, self._resource = self._resource, None
        if resource is not None:
            with contextlib.suppress(httpx.HTTPError):  # the server is gone already
                self._http("DELETE", resource)
        try:
            if self._pc is not None and self._thread.is_alive():
                self._call(self._pc.close(), self._timeout_s)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()
