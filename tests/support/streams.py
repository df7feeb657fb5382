"""Streams FFmpeg reads, published on 127.0.0.1 by real servers: RTMP through nginx's RTMP
module (Debian's ``libnginx-mod-rtmp``), HLS from a local HTTP server, MPEG-TS over UDP, and
SRT from ``srt-live-transmit`` in listener mode (Debian's ``srt-tools``), fed that MPEG-TS.

The frames come from ``stream_publisher.py`` (a subprocess, so a test can kill it as a camera
dies), stamped with their index and send time like the RTSP camera's, so readers measure
latency from the pixels.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import sys
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .server import LoggedProcess, free_port, free_udp_port, wait_for

PUBLISHER = Path(__file__).with_name("stream_publisher.py")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
RTMP_MODULE = Path("/usr/lib/nginx/modules/ngx_rtmp_module.so")
HAVE_RTMP_SERVER = Path(NGINX).exists() and RTMP_MODULE.exists()
SRT_LIVE_TRANSMIT = shutil.which("srt-live-transmit") or "/usr/bin/srt-live-transmit"


class Publisher:
    """``stream_publisher.py KIND TARGET``: started at once, killed and restarted by tests.
    An SRT sender is two processes, killed and restarted together: ``srt-live-transmit``
    and the publisher feeding it MPEG-TS over UDP; as the listener, it is up once its
    ``srt_port`` is bound."""

    def __init__(
        self, kind: str, target: str, width: int, height: int, fps: int,
        srt_sender: list[str] | None = None, srt_port: int | None = None,
    ) -> None:  # fmt: skip
        self._playlist = Path(target) if kind == "hls" else None
        size = [str(value) for value in (width, height, fps)]
        self._command = [sys.executable, str(PUBLISHER), kind, target, *size]
        self._srt_sender, self._srt_port = srt_sender, srt_port
        self._processes: list[LoggedProcess] = []
        self.start()

    def start(self) -> None:
        """Publishes (again); returns once its output is open."""
        self.kill()
        if self._srt_sender is not None:
            self._processes.append(sender := LoggedProcess(self._srt_sender))
            port, pid = self._srt_port, sender.process.pid
            if port is not None:
                wait_for(lambda: _udp_bound(port, pid), 30, f"an SRT listener on {port}")
        self._processes.append(publisher := LoggedProcess(self._command))
        publisher.wait_for_output("SENDING", timeout=30)
        if self._playlist is not None:  # HLS is there for readers once a segment is listed
            playlist = self._playlist
            wait_for(lambda: ".ts" in _text(playlist), 30, f"a segment in {playlist}")

    def kill(self) -> None:
        """``kill -9``: the stream stops without a word, as a camera losing power would."""
        while self._processes:
            process = self._processes.pop()
            process.process.kill()
            process.stop()


class RTMPServer:
    """nginx with the RTMP module on a free loopback port, one process, no root needed."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        """``port``: the one a killed server listened on (a target coming back)."""
        self.port = port or free_port()
        config = directory / "nginx.conf"
        config.write_text(
            f"load_module {RTMP_MODULE};\n"
            "daemon off;\nmaster_process off;\n"
            f"pid {directory}/nginx.pid;\nerror_log stderr info;\n"
            "events { worker_connections 64; }\n"
            f"rtmp {{ server {{ listen 127.0.0.1:{self.port}; "
            "application live { live on; record off; } } }\n"
        )
        self._nginx = LoggedProcess(
            [NGINX, "-p", str(directory), "-c", str(config), "-e", "stderr"]
        )
        try:  # with no master process nginx says nothing once it listens: ask the port
            wait_for(lambda: _accepts(self.port), 30, f"nginx listening on {self.port}")
        except TimeoutError:
            self._nginx.stop()
            raise

    def url(self, name: str = "cam") -> str:
        return f"rtmp://127.0.0.1:{self.port}/live/{name}"

    def close(self) -> None:
        self._nginx.stop()


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def _udp_bound(port: int, pid: int) -> bool:
    """Process ``pid`` listens on UDP ``port`` (SRT runs over UDP: there is no accept to
    ask). Its own socket, not just any: another's on that port once fooled this check."""
    table = Path("/proc/net/udp").read_text().splitlines()[1:]
    wanted = {f"socket:[{f[9]}]" for f in map(str.split, table) if f[1].endswith(f":{port:04X}")}
    return bool(wanted & _open_files(pid))


def _open_files(pid: int) -> set[str]:
    """What ``pid``'s descriptors point at (``socket:[inode]`` for sockets)."""
    found = set()
    with contextlib.suppress(OSError):  # it exited: nothing
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):  # closed while we looked
                found.add(os.readlink(fd))
    return found


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


class HLSServer:
    """A directory served over HTTP on loopback, the way a CDN edge serves a live playlist."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        handler = functools.partial(_QuietFiles, directory=str(directory))
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    def url(self, name: str = "playlist.m3u8") -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/{name}"

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(5)


class _QuietFiles(SimpleHTTPRequestHandler):
    extensions_map = {".m3u8": "application/vnd.apple.mpegurl", ".ts": "video/mp2t"}

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")  # a live playlist changes every second
        super().end_headers()

    def log_message(self, *_: object) -> None:
        pass


class PublishedStream:
    """One stream of ``kind`` (rtmp, hls, udp, srt, srt-listener) and its publisher; ``url``
    is what a reader opens (for SRT, with ``?passphrase=`` when one is set).
    ``publisher.kill`` and ``publisher.start`` kill and restart the sender only."""

    def __init__(
        self, kind: str, width: int = 320, height: int = 240, fps: int = 15,
        passphrase: str | None = None,
    ) -> None:  # fmt: skip
        self.kind = kind
        self._scratch = tempfile.TemporaryDirectory(prefix=f"vs-{kind}-")
        directory = Path(self._scratch.name)
        self._closers: list = [self._scratch.cleanup]
        if kind == "rtmp":
            server = RTMPServer(directory)
            self._closers.append(server.close)
            self.url = target = server.url()
        elif kind == "hls":
            http = HLSServer(directory)
            self._closers.append(http.close)
            target, self.url = str(directory / "playlist.m3u8"), http.url()
        elif kind == "udp":
            self.url = target = f"udp://127.0.0.1:{free_udp_port()}"
        elif kind in ("srt", "srt-listener"):
            # MPEG-TS over UDP to srt-live-transmit, which serves it over SRT: as the
            # listener the reader calls ("srt"), or calling the reader, who listens.
            feed, srt_port = f"udp://127.0.0.1:{free_udp_port()}", free_udp_port()
            self.url = f"srt://127.0.0.1:{srt_port}"
            secret = f"passphrase={passphrase}" if passphrase else ""
            self.url += f"?{secret}" if secret else ""
            if kind == "srt":
                mode = f"{self.url}{'&' if secret else '?'}mode=listener"
                sender, bound = [SRT_LIVE_TRANSMIT, feed, mode], srt_port
            else:
                sender, bound = [SRT_LIVE_TRANSMIT, feed, self.url], None
                self.url += f"{'&' if secret else '?'}mode=listener"
            # Seven TS packets a datagram, as SRT senders send: FFmpeg's default 1472 bytes
            # is more than one SRT packet carries (1456), and the rest would be cut off.
            target = f"{feed}?pkt_size=1316"
            self.publisher = Publisher("udp", target, width, height, fps, sender, bound)
        else:
            raise ValueError(kind)
        if not kind.startswith("srt"):
            self.publisher = Publisher(kind, target, width, height, fps)
        self._closers.append(self.publisher.kill)

    def close(self) -> None:
        while self._closers:
            with contextlib.suppress(Exception):
                self._closers.pop()()

    def __enter__(self) -> PublishedStream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
