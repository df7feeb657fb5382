"""The real server as a subprocess on 127.0.0.1, started and stopped by fixtures."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import httpx

READY_MARKERS = ("ready:",)  # visionstream serve says it once the socket is bound as well
# Under Ray the replicas say "ready:" and Serve's proxy (uvicorn) says when it listens.
RAY_READY_MARKERS = ("ready:", "Uvicorn running on")
_CONNECTED = re.compile(r"session \w+ connected( \(|$)")  # "connected (VP8)", say
LOOPBACK_ALLOWED = "127.0.0.0/8,::1/128,0.0.0.0/0,::/0"
# Between looks at state only reachable over HTTP (a Ray deployment's replicas report every s).
POLL_S = 0.25


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Polls ``check`` until it returns something true, and returns that; TimeoutError naming
    ``what`` and the last value (or HTTP error) otherwise."""
    deadline, pause = time.monotonic() + timeout, threading.Event()
    last: Any = None
    while time.monotonic() < deadline:
        try:
            if last := check():
                return last
        except httpx.HTTPError as exc:
            last = exc
        pause.wait(POLL_S)
    raise TimeoutError(f"{what}: not within {timeout:g} s (last: {last!r})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_udp_port() -> int:
    """A UDP port free now (a free TCP port may well be a busy UDP one: ICE, Ray)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoggedProcess:
    """A subprocess whose output lines are kept, so tests wait on what it says."""

    def __init__(
        self,
        command: list[str],
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        stdin: int | None = None,
    ) -> None:
        """``stdin``: ``subprocess.PIPE`` for a process told to end by its stdin closing."""
        self.output: deque[str] = deque(maxlen=400)
        self.lines: list[str] = []  # every line, for wait_for_output
        self._lines = threading.Condition()
        self._exited = threading.Event()
        self.process = subprocess.Popen(
            command,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=cwd,
            stdin=stdin,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._lines:
                self.output.append(line.rstrip())
                self.lines.append(line.rstrip())
                self._on_line(line)
                self._lines.notify_all()
        self._exited.set()
        with self._lines:
            self._lines.notify_all()

    def _on_line(self, line: str) -> None:
        """Called under the lines' lock for every line."""

    def wait_for_output(self, text: str, start: int = 0, timeout: float = 10) -> int:
        """Until a line containing ``text`` is logged at or after line ``start`` (use
        ``len(server.lines)`` taken before the action); returns the line's index."""

        def found() -> int | None:
            return next((i for i in range(start, len(self.lines)) if text in self.lines[i]), None)

        with self._lines:
            if not self._lines.wait_for(lambda: found() is not None, timeout):
                raise TimeoutError(
                    f"no line with {text!r} in {timeout:g} s:\n" + "\n".join(self.output)
                )
            index = found()
            assert index is not None
            return index

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)
        for pipe in (self.process.stdout, self.process.stdin):
            if pipe is not None:
                pipe.close()


class ServerProcess(LoggedProcess):
    """``visionstream serve`` with extra ``VISIONSTREAM_*`` settings; waits for its ready lines."""

    def __init__(
        self,
        serve: list[str] | None = None,
        environment: dict[str, str] | None = None,
        prefix: list[str] | None = None,
        **settings: str,
    ) -> None:
        """``serve``: the Python arguments that start the server (``-m streaming.cli serve``
        unless a harness wraps it); ``environment``: other variables (``SSL_CERT_FILE``);
        ``prefix``: a command the server runs under (a namespace of its own).
        Without a ``data_dir`` setting the server gets a data directory of its own, removed
        by ``stop`` (pipelines it kept die with it)."""
        self.port = free_port()
        self._own_data_dir = None
        if "data_dir" not in settings:
            self._own_data_dir = tempfile.mkdtemp(prefix="visionstream-data-")
            settings = {**settings, "data_dir": self._own_data_dir}
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            "VISIONSTREAM_ICE_HOST_ADDRESSES": "127.0.0.1",
            # The tests' cameras, webhooks and ICE servers are on this machine: loopback
            # is allowed here (never by default). test_egress.py runs without it.
            "VISIONSTREAM_ALLOWED_NETWORKS": LOOPBACK_ALLOWED,
        }
        env.update({f"VISIONSTREAM_{k.upper()}": v for k, v in settings.items()})
        env.update(environment or {})
        self.ready_markers = RAY_READY_MARKERS if "--ray" in (serve or []) else READY_MARKERS
        self.closed_sessions = 0
        self.connected_sessions = 0
        self._seen: set[str] = set()
        self._ready = threading.Event()
        serve = serve or ["-m", "streaming.cli", "serve"]
        # benchmarks/ab.py runs the server of another checkout (``python -m`` imports from
        # the working directory first); the tests never set this.
        root = os.environ.get("VISIONSTREAM_BENCH_SERVER_ROOT")
        command = [*(prefix or []), sys.executable, *serve, "--port", str(self.port)]
        super().__init__(command, env, cwd=root)

    def stop(self) -> None:
        super().stop()
        if self._own_data_dir is not None:
            shutil.rmtree(self._own_data_dir, ignore_errors=True)

    def _on_line(self, line: str) -> None:
        if "session " in line and " closed after " in line:
            self.closed_sessions += 1
        if _CONNECTED.search(line):
            self.connected_sessions += 1
        for marker in self.ready_markers:
            if marker in line:
                self._seen.add(marker)
        if len(self._seen) == len(self.ready_markers):
            self._ready.set()

    def wait_ready(self, timeout: float = 120) -> None:
        with self._lines:
            self._lines.wait_for(lambda: self._ready.is_set() or self._exited.is_set(), timeout)
        if not self._ready.is_set() or self._exited.is_set():
            raise RuntimeError("server did not become ready:\n" + "\n".join(self.output))

    def _wait_count(self, attribute: str, count: int, timeout: float) -> None:
        with self._lines:
            if not self._lines.wait_for(lambda: getattr(self, attribute) >= count, timeout):
                raise TimeoutError(
                    f"{attribute}: {getattr(self, attribute)} of {count}:\n"
                    + "\n".join(self.output)
                )

    def wait_sessions_closed(self, count: int, timeout: float = 10) -> None:
        """Wait until the server has logged ``count`` session teardowns in all."""
        self._wait_count("closed_sessions", count, timeout)

    def wait_sessions_connected(self, count: int, timeout: float = 10) -> None:
        """Wait until the server has logged ``count`` connected sessions in all."""
        self._wait_count("connected_sessions", count, timeout)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=10)

    def post(self, path: str, **kwargs) -> httpx.Response:
        return httpx.post(self.url + path, timeout=30, **kwargs)

    def events(self, **filters: str) -> list[dict]:
        """Every stored event ``filters`` select (``GET /events``), oldest first, read
        through its pages."""
        found, cursor = [], None
        while True:
            params = {**filters, "order": "asc", "limit": "50"}
            if cursor:
                params["cursor"] = cursor
            page = httpx.get(f"{self.url}/events", params=params, timeout=30)
            assert page.status_code == 200, page.text
            found += page.json()["events"]
            if not (cursor := page.json()["next_cursor"]):
                return found

    def start_pipeline(self, reference, spec: dict, **extra) -> httpx.Response:
        """``POST /inference_pipelines/initialise`` for ``reference`` running ``spec``."""
        body = {
            "video_configuration": {"type": "VideoConfiguration", "video_reference": reference},
            "processing_configuration": {
                "type": "WorkflowConfiguration",
                "workflow_specification": spec,
            },
            **extra,
        }
        return self.post("/inference_pipelines/initialise", json=body)

    def sessions(self) -> int:
        return self.get("/healthz").json()["sessions"]

    def wait_idle(self, timeout: float = 120) -> None:
        """Until no session or WHIP publisher is open (an earlier test's may still be
        closing): a test that counts the server's sessions starts from none. Generous: on a
        loaded machine a Ray replica's session may take a while to see its peer go. The
        timeout names what was still open."""
        seen: dict[str, object] = {}

        def idle() -> bool:
            answer = self.get("/healthz")
            if answer.status_code != 200:  # a Ray replica being replaced: Serve's 5xx
                seen["healthz"] = answer.status_code
                return False
            health = answer.json()
            workers = health.get("workers") or []
            by_worker = {w.get("worker", "?")[:8]: w.get("sessions") for w in workers}
            seen.clear()
            seen.update(sessions=health["sessions"], publishers=health.get("publishers", 0),
                        workers=by_worker)  # fmt: skip
            return (health["sessions"] == 0 and health.get("publishers", 0) == 0
                    and all(w.get("sessions", 0) == 0 for w in workers))  # fmt: skip

        try:
            wait_for(idle, timeout, "the server idle (no sessions, no publishers)")
        except TimeoutError as exc:
            with self._lines:
                said = [line for line in self.lines if "session" in line or "whip" in line]
            raise TimeoutError(
                f"{exc}; last seen: {seen}; its last lines on sessions:\n" + "\n".join(said[-30:])
            ) from None

    def pipeline_nodes(self) -> dict[str, str | None]:
        """Each pipeline's node (``list``'s placements); empty while the answer is an error
        (a Ray replica being replaced: Serve's 5xx for requests it had sent there)."""
        response = self.get("/inference_pipelines/list")
        if response.status_code != 200:
            return {}
        body = response.json()
        assert sorted(body["pipelines"]) == sorted(p["pipeline_id"] for p in body["placements"])
        return {p["pipeline_id"]: p["node"] for p in body["placements"]}

    def fresh_result(self, pipeline_id: str, since: float | None = None) -> dict | None:
        """A ``consume`` result of a frame taken after ``since`` (epoch s; default: now),
        older buffered ones drained first; None if there is none yet (or an error, as
        above)."""
        since = time.time() if since is None else since
        path = f"/inference_pipelines/{pipeline_id}/consume"
        while True:
            response = httpx.request("GET", self.url + path, json={"wait_seconds": 5}, timeout=30)
            body = response.json() if response.status_code == 200 else {"outputs": []}
            if not body["outputs"]:
                return None
            (metadata,) = [m for m in body["frames_metadata"] if m is not None]
            if datetime.fromisoformat(metadata["frame_timestamp"]).timestamp() >= since:
                return body

    def workers(self) -> list[dict]:
        """``/healthz``'s workers: a Ray deployment's replicas, or this server alone; none
        while the answer is an error (as ``pipeline_nodes``)."""
        answer = self.get("/healthz")
        return answer.json()["workers"] if answer.status_code == 200 else []

    def wait_workers_ready(self, count: int, timeout: float) -> list[dict]:
        def ready() -> list[dict] | None:
            workers = self.workers()
            return workers if len(workers) == count and all(w["ready"] for w in workers) else None

        return wait_for(ready, timeout, f"{count} ready workers in /healthz")


def ray_server_process(address: str, replicas: str, **settings: str) -> ServerProcess:
    """``visionstream serve --ray ADDRESS --replicas R`` on a test cluster: one session per
    replica (so tests see where each lands), Serve's proxy on the head alone (every node
    shares 127.0.0.1), and no per-address cap (every client is 127.0.0.1)."""
    command = ["-m", "streaming.cli", "serve", "--ray", address, "--replicas", replicas]
    defaults = {"max_sessions": "1", "ray_proxy_location": "HeadOnly"}
    return ServerProcess(serve=command, **{**defaults, "max_sessions_per_address": "0", **settings})


@contextmanager
def running_server(
    environment: dict[str, str] | None = None, prefix: list[str] | None = None, **settings: str
) -> Iterator[ServerProcess]:
    """A ready ``ServerProcess`` for the ``with`` block (fixtures yield from it)."""
    process = ServerProcess(environment=environment, prefix=prefix, **settings)
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()
