"""A real RTSP camera on 127.0.0.1 that tests can kill, freeze and restart.

The server is GStreamer's (``rtsp_camera_server.py`` under Debian's Python); this process feeds
it live synthetic frames, each stamped with its index and send time, so readers can measure
latency from the pixels. The feeder outlives server restarts: a restarted camera continues the
same stream, as a rebooted real camera would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from sources import SyntheticSource

from .server import free_port

SERVER_SCRIPT = Path(__file__).with_name("rtsp_camera_server.py")
SYSTEM_PYTHON = "/usr/bin/python3"  # has Debian's python3-gi


class RTSPCamera:
    def __init__(
        self,
        width: int = 640,
        height: int = 480,
        fps: int = 30,
        path: str = "cam",
        picture: Callable[[int], np.ndarray] | None = None,
    ):
        """``picture``: what the camera sees at each frame index (default: stamped bars)."""
        self.width, self.height, self.fps, self.path = width, height, fps, path
        self.port = free_port()
        self.url = f"rtsp://127.0.0.1:{self.port}/{path}"
        self.frames_fed = 0
        self.clients = 0
        self._clients_changed = threading.Condition()
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._source = SyntheticSource(width, height, fps=fps, realtime=True, picture=picture)
        self.start()
        self._feeder = threading.Thread(target=self._feed, name="camera-feeder", daemon=True)
        self._feeder.start()

    def start(self) -> None:
        """Start (or restart, on the same port) the camera server; returns once it listens."""
        process = subprocess.Popen(
            [SYSTEM_PYTHON, str(SERVER_SCRIPT), str(self.port), self.path,
             str(self.width), str(self.height), str(self.fps)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        assert process.stdout is not None
        line = process.stdout.readline().decode()  # EOF at once if it fails to start
        if not line.startswith("READY"):
            rest = process.stdout.read().decode(errors="replace")
            process.kill()
            process.wait()
            raise RuntimeError(f"RTSP camera did not start: {line}{rest}")
        with self._lock:
            self._process = process
        threading.Thread(target=self._count_clients, args=(process,), daemon=True).start()

    def _count_clients(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(b"CLIENT"):
                with self._clients_changed:
                    self.clients += 1
                    self._clients_changed.notify_all()

    def wait_clients(self, count: int, timeout: float = 10) -> None:
        """Until the camera has had ``count`` RTSP connections in all."""
        with self._clients_changed:
            if not self._clients_changed.wait_for(lambda: self.clients >= count, timeout):
                raise TimeoutError(f"camera had {self.clients} connections, not {count}")

    def _feed(self) -> None:
        for frame in self._source:  # paced in real time by the source
            with self._lock:
                process = self._process
            if process is None or process.stdin is None:
                continue
            with contextlib.suppress(BrokenPipeError, ValueError, OSError):
                process.stdin.write(frame.image.tobytes())
                process.stdin.flush()
                self.frames_fed += 1

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def kill(self) -> None:
        """``kill -9``: the camera vanishes without a word."""
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()
            _close_pipes(process)

    def freeze(self) -> None:
        """``SIGSTOP``: the connection stays open, no more data comes."""
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def __enter__(self) -> RTSPCamera:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._source.close()
        with self._lock:
            process = self._process
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)
        self.kill()
        self._feeder.join(5)


def _close_pipes(process: subprocess.Popen[bytes]) -> None:
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
