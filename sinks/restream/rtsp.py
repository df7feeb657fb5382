"""A source's restream over RTSP (RFC 2326) for VLC, NVRs and Home Assistant: DESCRIBE,
SETUP, PLAY and TEARDOWN, with RTP (H.264, RFC 6184, packetized by aiortc) interleaved on the
RTSP connection itself.

Only TCP: a SETUP asking for UDP is answered 461, on which FFmpeg, GStreamer and VLC ask
again for TCP. RTP over UDP would send to whatever ports a player names, and crosses NAT
badly. Every request is bounded in size; a player whose connection stays full for
``stall_s`` is dropped; nobody else waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from fractions import Fraction
from urllib.parse import urlsplit

import av
from aiortc.codecs.h264 import H264Encoder
from aiortc.rtp import RtpPacket

from .encoding import RTP_CLOCK, EncodedFrame
from .restream import Restream, RestreamFull, Subscription

__all__ = ["RtspRefused", "RtspServer"]

log = logging.getLogger(__name__)

_MAX_REQUEST = 8192
_PAYLOAD_TYPE = 96
_TIME_BASE = Fraction(1, RTP_CLOCK)
_METHODS = "OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN, GET_PARAMETER"
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    454: "Session Not Found",
    455: "Method Not Valid in This State",
    461: "Unsupported Transport",
    501: "Not Implemented",
    503: "Service Unavailable",
}


class RtspRefused(Exception):
    """What ``resolve`` raises for a path it will not play: the status and why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


Resolve = Callable[[str, str], Awaitable[Restream]]
"""A request's path and query to the restream it plays (``RtspRefused`` otherwise)."""


@dataclass
class _Request:
    method: str
    uri: str
    headers: dict[str, str] = field(default_factory=dict)


class RtspServer:
    """The RTSP server of every restream of a server, on one port."""

    def __init__(
        self, host: str, port: int, resolve: Resolve, stall_s: float, send_buffer: int
    ) -> None:
        """``send_buffer``: the kernel's buffer for each player's connection, in bytes (about
        a second of video): a player that stops reading is noticed once it is full."""
        self._host, self._port = host, port
        self._resolve = resolve
        self._stall_s = stall_s
        self._send_buffer = send_buffer
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("socket")
        if peer is not None:  # else autotuning lets a stalled player hold megabytes
            peer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer)
        connection = _Connection(reader, writer, self._resolve, self._stall_s)
        try:
            await connection.run()
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            self._connections.discard(task)
            await connection.close()

    async def close(self) -> None:
        """Idempotent: no new connection, every player's closed."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if server is not None:
            await server.wait_closed()


class _Connection:
    """One player's RTSP connection: its requests, and once it plays, its RTP."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        resolve: Resolve,
        stall_s: float,
    ) -> None:
        self._reader, self._writer = reader, writer
        self._resolve = resolve
        self._stall_s = stall_s
        self._restream: Restream | None = None
        self._session: str | None = None
        self._channel = 0
        self._sender: asyncio.Task[None] | None = None
        self._subscription: Subscription | None = None

    async def run(self) -> None:
        while (request := await self._request()) is not None:
            status, headers, body = await self._answer(request)
            self._respond(request, status, headers, body)
            if status == 200 and request.method == "PLAY":
                self._play()
            if request.method == "TEARDOWN" or status in (400, 401, 403):
                return

    async def _request(self) -> _Request | None:
        """The next request; RTCP the player interleaves is read and ignored."""
        while (first := await self._reader.read(1)) == b"$":
            _channel, length = struct.unpack("!BH", await self._reader.readexactly(3))
            await self._reader.readexactly(length)
        if not first:
            return None
        head = first + await self._reader.readuntil(b"\r\n\r\n")
        if len(head) > _MAX_REQUEST:
            return None
        lines = head.decode("utf-8", "replace").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("RTSP/"):
            return None
        request = _Request(parts[0].upper(), parts[1])
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                request.headers[name.strip().lower()] = value.strip()
        length = request.headers.get("content-length", "0")
        if length.isascii() and length.isdigit() and 0 < int(length) <= _MAX_REQUEST:
            await self._reader.readexactly(int(length))
        return request

    async def _answer(self, request: _Request) -> tuple[int, dict[str, str], bytes]:
        if request.method in ("OPTIONS", "GET_PARAMETER"):
            return 200, {"Public": _METHODS}, b""
        if request.method == "DESCRIBE":
            return await self._describe(request)
        if request.method == "SETUP":
            return self._setup(request)
        if request.method == "PLAY":
            if self._session is None or self._restream is None:
                return 455, {}, b""
            return 200, {"Range": "npt=0.000-"}, b""
        if request.method == "TEARDOWN":
            return 200, {}, b""
        return 501, {"Public": _METHODS}, b""

    async def _describe(self, request: _Request) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(request.uri)
        try:
            self._restream = await self._resolve(parts.path, parts.query)
        except RtspRefused as refused:
            log.info("RTSP %s refused: %s", parts.path, refused)
            return refused.status, {}, b""
        control = parts._replace(path=parts.path.rstrip("/") + "/trackID=0").geturl()
        sdp = (
            "v=0\r\no=- 0 0 IN IP4 0.0.0.0\r\ns=visionstream\r\nt=0 0\r\n"
            f"m=video 0 RTP/AVP {_PAYLOAD_TYPE}\r\nc=IN IP4 0.0.0.0\r\n"
            f"a=rtpmap:{_PAYLOAD_TYPE} H264/{RTP_CLOCK}\r\n"
            f"a=fmtp:{_PAYLOAD_TYPE} packetization-mode=1\r\n"
            f"a=control:{control}\r\n"
        ).encode()
        base = {"Content-Base": request.uri, "Content-Type": "application/sdp"}
        return 200, base, sdp

    def _setup(self, request: _Request) -> tuple[int, dict[str, str], bytes]:
        if self._restream is None:
            return 455, {}, b""
        transport = request.headers.get("transport", "")
        if "RTP/AVP/TCP" not in transport.upper():
            return 461, {}, b""
        for part in transport.split(";"):
            name, _, value = part.partition("=")
            first = value.split("-")[0]
            if name.strip() == "interleaved" and first.isascii() and first.isdigit():
                self._channel = min(int(first), 254)
        self._session = self._session or secrets.token_hex(8)
        interleaved = f"{self._channel}-{self._channel + 1}"
        return 200, {"Transport": f"RTP/AVP/TCP;unicast;interleaved={interleaved}"}, b""

    def _respond(
        self, request: _Request, status: int, headers: dict[str, str], body: bytes
    ) -> None:
        lines = [f"RTSP/1.0 {status} {_REASONS.get(status, 'Error')}"]
        lines.append(f"CSeq: {request.headers.get('cseq', '0')}")
        if self._session is not None:
            lines.append(f"Session: {self._session};timeout=60")
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines.append(f"Content-Length: {len(body)}")
        self._writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)

    def _play(self) -> None:
        if self._sender is not None or self._restream is None:
            return
        try:
            self._subscription = self._restream.subscribe("h264")
        except RestreamFull as full:
            log.info("RTSP player refused: %s", full)
            self._writer.close()
            return
        self._sender = asyncio.get_running_loop().create_task(
            self._send(self._subscription), name="rtsp sender"
        )

    async def _send(self, subscription: Subscription) -> None:
        """RTP of every access unit, until the player leaves or falls too far behind."""
        packer = H264Encoder()
        ssrc = secrets.randbits(32)
        sequence = secrets.randbits(16)
        try:
            while (frame := await subscription.next()) is not None:
                for payload, marker in _payloads(packer, frame):
                    rtp = RtpPacket(_PAYLOAD_TYPE, marker, sequence, frame.pts & 0xFFFFFFFF, ssrc)
                    rtp.payload = payload
                    data = rtp.serialize()
                    header = struct.pack("!cBH", b"$", self._channel, len(data))
                    self._writer.write(header + data)
                    sequence = (sequence + 1) & 0xFFFF
                async with asyncio.timeout(self._stall_s):
                    await self._writer.drain()
        except (ConnectionError, TimeoutError):
            subscription.close("dropped: the player stopped reading")
        finally:
            subscription.close("the player left")
            self._writer.close()

    async def close(self) -> None:
        """Idempotent."""
        if self._subscription is not None:
            self._subscription.close("the player left")
        sender, self._sender = self._sender, None
        if sender is not None:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()


def _payloads(packer: H264Encoder, frame: EncodedFrame) -> list[tuple[bytes, int]]:
    """The access unit as RTP payloads (STAP-A, FU-A), the marker on the last."""
    packet = av.Packet(frame.data)
    packet.pts, packet.time_base = frame.pts, _TIME_BASE
    payloads, _timestamp = packer.pack(packet)
    return [(payload, int(i == len(payloads) - 1)) for i, payload in enumerate(payloads)]
