"""SRT through a relay. The FFmpeg inside PyAV's wheels is built without libsrt, so an
``srt://`` stream is received by Haivision's ``srt-live-transmit`` (Debian's ``srt-tools``),
run as a child process that hands the stream's MPEG-TS to a UDP port on loopback, where
LiveSource reads it as it reads any ``udp://`` stream (same read timeout, same reconnects).

The URL's query is libsrt's socket options as srt-live-transmit takes them: ``latency`` in
milliseconds (FFmpeg's ``srt://`` takes microseconds), ``passphrase``, ``streamid``,
``mode=caller|listener|rendezvous`` (caller where the URL names a host, SRT's default).

The relay never reconnects by itself (``-a no``): with ``-a yes`` a sender that refuses us
(a wrong passphrase) is called again every 10 ms, forever. It lives while its SRT connection
does (a sender that pauses keeps it), and LiveSource starts another, after its own backoff,
once it has exited; so in listener mode the port is open while the source waits for a
connection, closed during the backoff. It dies with the thread that started it (``setpriv
--pdeathsig``), so even a server killed -9 leaves none behind.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
import threading
from typing import IO
from urllib.parse import parse_qsl, urlsplit

__all__ = ["RELAY", "SRTRelay", "relay_missing"]

RELAY = "srt-live-transmit"
_STOP_GRACE_S = 2.0
_TAIL_BYTES = 8192  # what is read of its output: the last few lines say where it stands
# What srt-live-transmit prints as its SRT side comes and goes (stdout, not localised).
_CONNECTED = ("SRT source connected", "Accepted SRT source connection")
_DISCONNECTED = "SRT source disconnected"
_ECHO = "Media path:"  # its first line, echoing the URLs
_LOG_PREFIX = re.compile(r"^\d[\d:.]*/\S+ ")  # "05:45:39.157/SRT:RcvQ:w1!W:SRT.cn: "


def relay_missing() -> str | None:
    """Why ``srt://`` cannot be read on this machine, or None when it can."""
    if shutil.which(RELAY) is None:
        return (
            f"srt:// needs {RELAY} on the server (Debian/Ubuntu: apt install srt-tools): "
            "the FFmpeg inside PyAV is built without libsrt"
        )
    return None


class SRTRelay:
    """``srt-live-transmit URL udp://127.0.0.1:PORT``, started on demand, stopped once."""

    def __init__(self, url: str, connect_timeout: float) -> None:
        query = dict(parse_qsl(urlsplit(url).query))
        if "conntimeo" not in query:  # libsrt's 3 s default is not ours: the read timeout is
            joiner = "&" if query else "?"
            url = f"{url}{joiner}conntimeo={max(1000, round(connect_timeout * 1000))}"
        self._url = url
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None
        self._target: str | None = None
        self._closed = False

    def target(self) -> str | None:
        """The ``udp://`` URL the stream arrives at, starting the relay if it is not running
        (first use, or it exited); None once closed. ``OSError`` if it cannot be started."""
        with self._lock:
            if self._closed:
                return None
            if self._process is not None and self._process.poll() is None:
                return self._target
            self._stop()
            port = _free_udp_port()
            # A file, not a pipe (one left unread would stall it); closed by _stop.
            self._output = tempfile.TemporaryFile()  # noqa: SIM115
            self._process = subprocess.Popen(
                [*_DIE_WITH_PARENT, RELAY, "-a", "no", self._url, f"udp://127.0.0.1:{port}"],
                stdin=subprocess.DEVNULL,
                stdout=self._output,
                stderr=subprocess.STDOUT,
            )
            self._target = f"udp://127.0.0.1:{port}"
            return self._target

    def state(self) -> str:
        """What the relay last said of the SRT side, for error messages."""
        with self._lock:
            if self._process is None:
                return "relay not started"
            lines = self._lines()
            if self._process.poll() is not None:
                said = lines[-1] if lines else "no answer"
                return f"SRT connection failed or ended: {said}"
        for line in reversed(lines):
            if line.startswith(_CONNECTED):
                return "SRT connected"
            if line.startswith(_DISCONNECTED):
                return "SRT disconnected"
        return "no SRT connection yet"

    def _lines(self) -> list[str]:
        if self._output is None:
            return []
        size = self._output.seek(0, 2)
        self._output.seek(max(0, size - _TAIL_BYTES))
        text = self._output.read().decode(errors="replace")
        # Its echo of the URL carries the passphrase: that line is never shown.
        lines = (_LOG_PREFIX.sub("", line).strip() for line in text.splitlines())
        return [line for line in lines if line and not line.startswith(_ECHO)]

    def close(self) -> None:
        """Idempotent; the relay is stopped and never started again."""
        with self._lock:
            self._closed = True
            self._stop()

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._output is not None:
            self._output.close()
            self._output = None


# PR_SET_PDEATHSIG through util-linux's setpriv (preexec_fn is unsafe with threads running).
_SETPRIV = shutil.which("setpriv")
_DIE_WITH_PARENT = [_SETPRIV, "--pdeathsig", "KILL"] if _SETPRIV else []


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
