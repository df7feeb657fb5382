"""SRT through a relay. The FFmpeg inside PyAV's wheels is built without libsrt, so an
``srt://`` stream is received by Haivision's ``srt-live-transmit`` (Debian's ``srt-tools``),
run as a child process that hands the stream's MPEG-TS to a UDP port on loopback, where
LiveSource reads it as it reads any ``udp://`` stream (same read timeout, same reconnects).

The URL's query is libsrt's socket options as srt-live-transmit takes them: ``latency`` in
milliseconds (FFmpeg's ``srt://`` takes microseconds), ``passphrase``, ``streamid``,
``mode=caller|listener|rendezvous`` (caller where the URL names a host, SRT's default).

LiveSource asks for a connection (``connect``): the relay is started unless one is running,
and its own words say when SRT is connected, or why not (a sender refusing our passphrase),
so FFmpeg opens the UDP side only once there is something to read. The relay never
reconnects by itself (``-a no``): with ``-a yes`` a sender that refuses us is called again
every 10 ms, forever. It lives while its SRT connection does, or while it waits for one (in
listener mode the port stays open through LiveSource's backoff); LiveSource's backoff decides
when an exited one is started again. It dies with the thread that started it (``setpriv
--pdeathsig``), so even a server killed -9 leaves none behind.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
from collections import deque
from urllib.parse import parse_qsl, urlsplit

from .base import SourceError

__all__ = ["RELAY", "SRTRelay", "relay_missing"]

RELAY = "srt-live-transmit"
_REPORT_GRACE_S = 1.0
"""Beyond the relay's own connection timeout, how long it has to report before it is
taken for hung."""
_STOP_GRACE_S = 2.0
# What srt-live-transmit prints as its SRT side comes and goes (not localised).
_CONNECTED = ("SRT source connected", "Accepted SRT source connection")
_DISCONNECTED = "SRT source disconnected"
_ECHO = "Media path:"  # its first line, echoing the URL with its passphrase: never kept
_LOG_PREFIX = re.compile(r"^\d[\d:.]*/\S+ ")  # "05:45:39.157/SRT:RcvQ:w1!W:SRT.cn: "


def relay_missing() -> str | None:
    """Why ``srt://`` cannot be read on this machine, or None when it can."""
    if shutil.which(RELAY) is None:
        return (
            f"srt:// needs {RELAY} on the server (Debian/Ubuntu: apt install srt-tools): "
            "the FFmpeg inside PyAV is built without libsrt"
        )
    return None


class _Run:
    """One srt-live-transmit process and what it has said, followed on a thread of its own
    (the process's output ends when it does, and so does the thread)."""

    def __init__(self, url: str) -> None:
        port = _free_udp_port()
        self.target = f"udp://127.0.0.1:{port}"
        self.lines: deque[str] = deque(maxlen=20)
        self.connected = False
        self.ended = False
        self.changed = threading.Condition()
        self.process = subprocess.Popen(
            [*_DIE_WITH_PARENT, RELAY, "-a", "no", url, self.target],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        self._follower = threading.Thread(target=self._follow, name="srt relay", daemon=True)
        self._follower.start()

    def _follow(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = _LOG_PREFIX.sub("", raw).strip()
            if not line or line.startswith(_ECHO):
                continue
            with self.changed:
                self.lines.append(line)
                if line.startswith(_CONNECTED):
                    self.connected = True
                elif line.startswith(_DISCONNECTED):
                    self.connected = False
                self.changed.notify_all()
        with self.changed:
            self.ended, self.connected = True, False
            self.changed.notify_all()

    def wait_connected(self, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.connected or self.ended, timeout) and (
                self.connected
            )

    def state(self) -> str:
        with self.changed:
            if self.ended:
                said = self.lines[-1] if self.lines else "no answer"
                return f"SRT connection failed or ended: {said}"
            return "SRT connected" if self.connected else "no SRT connection"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._follower.join(_STOP_GRACE_S)
        if self.process.stdout is not None:
            self.process.stdout.close()


class SRTRelay:
    """The relay of one SRT source: started on demand, stopped once, by ``close``."""

    def __init__(self, url: str, connect_timeout: float) -> None:
        query = dict(parse_qsl(urlsplit(url).query))
        if "conntimeo" not in query:  # libsrt's 3 s default is not ours: the read timeout is
            joiner = "&" if query else "?"
            url = f"{url}{joiner}conntimeo={max(1000, round(connect_timeout * 1000))}"
        self._url = url
        self._lock = threading.Lock()
        self._run: _Run | None = None
        self._closed = False

    def connect(self, timeout: float) -> str | None:
        """The ``udp://`` URL the stream arrives at, once SRT is connected (the relay started
        first unless one is running); None once closed. ``SourceError`` saying why when SRT
        does not connect within ``timeout``; ``OSError`` if the relay cannot be started."""
        with self._lock:
            if self._closed:
                return None
            if self._run is None or self._run.ended:
                if self._run is not None:
                    self._run.stop()
                self._run = _Run(self._url)
            run = self._run
        # Outside the lock: close() stops the process, which ends this wait at once. The
        # relay's own connection timeout is ``timeout`` too: the grace lets it say why first.
        if not run.wait_connected(timeout + _REPORT_GRACE_S):
            with run.changed:
                hung = not run.ended
            if hung:
                # Neither connected nor ended past its own timeout: a relay in that state was
                # seen never to end (a loaded CI machine), and reusing it kept every later
                # attempt failing. The next attempt starts a fresh one.
                with self._lock:
                    if self._run is run:
                        self._run = None
                run.stop()
                raise SourceError(f"no SRT connection within {timeout:g} s")
            raise SourceError(run.state())
        return run.target

    def state(self) -> str:
        """Where the SRT side stands, for error messages."""
        with self._lock:
            run = self._run
        return "relay not started" if run is None else run.state()

    def close(self) -> None:
        """Idempotent; the relay is stopped and never started again."""
        with self._lock:
            self._closed, run, self._run = True, self._run, None
        if run is not None:
            run.stop()


# PR_SET_PDEATHSIG through util-linux's setpriv (preexec_fn is unsafe with threads running).
_SETPRIV = shutil.which("setpriv")
_DIE_WITH_PARENT = [_SETPRIV, "--pdeathsig", "KILL"] if _SETPRIV else []


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
