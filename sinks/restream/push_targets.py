"""How a push connects, by the target URL's scheme: ``PUSH_SCHEMES``, one entry each.

- ``rtmp://``, ``rtmps://``: FLV over RTMP (nginx-rtmp, MediaMTX, YouTube, Twitch), FFmpeg's.
- ``rtsp://``, ``rtsps://``: RTSP ANNOUNCE and RECORD over TCP (MediaMTX, go2rtc), FFmpeg's.
- ``srt://``: MPEG-TS over SRT through Haivision's ``srt-live-transmit`` (the FFmpeg inside
  PyAV's wheels has no libsrt), fed over UDP on loopback.

Every target connects to the address the egress policy checked (``Pin``), within a timeout.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import av

from ..pinning import Pin, pinned_url
from .encoding import EncodedFrame, add_h264_stream, muxed
from .push import Target, TargetOpener

__all__ = ["PUSH_SCHEMES", "push_opener"]

_TIMEOUT_US = "5000000"
"""How long FFmpeg waits on a target that stops answering before the push reconnects."""
_SETPRIV = shutil.which("setpriv")
_DIE_WITH_PARENT = [_SETPRIV, "--pdeathsig", "KILL"] if _SETPRIV else []


class FfmpegTarget:
    """A muxer writing to a network URL (FLV to RTMP, RTSP's RECORD, MPEG-TS to UDP)."""

    def __init__(
        self, url: str, format: str, options: dict[str, str], keyframe: EncodedFrame
    ) -> None:
        self._container: Any = av.open(url, "w", format=format, options=options)
        try:
            self._stream = add_h264_stream(self._container, keyframe)
        except Exception:
            self._container.close()
            raise
        self._origin = keyframe.pts

    def write(self, frame: EncodedFrame) -> None:
        muxed(self._container, self._stream, frame, self._origin)

    def close(self) -> None:
        container, self._container = self._container, None
        if container is not None:
            container.close()


class SrtTarget:
    """MPEG-TS to ``srt-live-transmit``, which calls the SRT target and relays it there."""

    def __init__(self, url: str, keyframe: EncodedFrame, timeout_s: float = 5.0) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self._lines: deque[str] = deque(maxlen=10)
        self._connected = threading.Event()
        self._process = subprocess.Popen(
            [*_DIE_WITH_PARENT, "srt-live-transmit", "-a", "no", f"udp://127.0.0.1:{port}", url],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        threading.Thread(target=self._follow, name="srt push relay", daemon=True).start()
        self._muxer: FfmpegTarget | None = None
        try:
            if not self._connected.wait(timeout_s):
                raise ConnectionError(f"SRT target did not connect: {self._said()}")
            # Seven TS packets a datagram: what one SRT message carries whole.
            relay = f"udp://127.0.0.1:{port}?pkt_size=1316"
            self._muxer = FfmpegTarget(relay, "mpegts", {}, keyframe)
        except BaseException:
            self.close()
            raise

    def _follow(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            if "Media path" in line:
                continue  # it echoes the URL, passphrase and all
            self._lines.append(line.strip())
            if "SRT target connected" in line:
                self._connected.set()
        self._connected.set()

    def _said(self) -> str:
        return "; ".join(self._lines) or "no answer"

    def write(self, frame: EncodedFrame) -> None:
        if self._process.poll() is not None:
            raise ConnectionError(f"the SRT connection ended: {self._said()}")
        assert self._muxer is not None
        self._muxer.write(frame)

    def close(self) -> None:
        if self._muxer is not None:
            self._muxer.close()
            self._muxer = None
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(2)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


@dataclass(frozen=True)
class PushScheme:
    about: str
    open: Callable[[str, EncodedFrame], Target]


def _rtmp(url: str, keyframe: EncodedFrame) -> Target:
    return FfmpegTarget(url, "flv", {"rw_timeout": _TIMEOUT_US}, keyframe)


def _rtsp(url: str, keyframe: EncodedFrame) -> Target:
    options = {"rtsp_transport": "tcp", "timeout": _TIMEOUT_US}
    return FfmpegTarget(url, "rtsp", options, keyframe)


PUSH_SCHEMES: dict[str, PushScheme] = {
    "rtmp": PushScheme("RTMP (FLV)", _rtmp),
    "rtmps": PushScheme("RTMP over TLS", _rtmp),
    "rtsp": PushScheme("RTSP ANNOUNCE/RECORD over TCP", _rtsp),
    "rtsps": PushScheme("RTSP over TLS", _rtsp),
    "srt": PushScheme("MPEG-TS over SRT (srt-live-transmit)", SrtTarget),
}


def push_opener(url: str, pin: Pin | None) -> TargetOpener:
    """How to connect to ``url`` each time: its host resolved and checked then (``pin``)."""
    scheme = PUSH_SCHEMES[urlsplit(url).scheme.lower()]

    def opened(keyframe: EncodedFrame) -> Target:
        target = pinned_url(url, pin)[0] if pin is not None else url
        return scheme.open(target, keyframe)

    return opened
