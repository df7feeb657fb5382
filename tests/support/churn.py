"""Session churn against the real server: every kind of session opened and ended, many
times, and the server's resources read between rounds.

Used by ``tests/e2e/test_churn.py`` (a short round in CI) and ``benchmarks/churn.py``
(1,000 sessions, RSS per 100). Kinds:

- ``sdk``: the published inference-sdk client with a ManualSource;
- ``ours``: our client with a ManualSource;
- ``upload``: our client uploading a short clip, every frame processed;
- ``camera``: our client asking the server to read an RTSP camera;
- ``watcher``: our client watching a running pipeline;
- ``aborted``: an offer posted, then the peer closed before it ever connected;
- ``vanished``: a client process killed with SIGKILL mid-stream (no goodbye);
- ``whip``: GStreamer's webrtcbin publishing over WHIP into the running pipeline, then
  ``DELETE``; ``whep``: webrtcbin playing that pipeline's source over WHEP, then ``DELETE``;
  ``whip_vanished``: a WHIP publisher killed with SIGKILL (gone after the server's
  ``whip_idle_timeout_s``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
from inference_sdk import InferenceHTTPClient
from inference_sdk.webrtc import StreamConfig as SdkStreamConfig

from streaming import Client, ManualSource, StreamConfig, VideoFileSource
from streaming.client import PipelineSource, RTSPSource
from tests.conftest import DETECT_SPEC
from tests.support.peer import loopback_peer
from tests.support.sdk import LoopManualSource
from tests.support.server import LoggedProcess, ServerProcess, wait_for
from tests.support.webrtcbin import WebrtcbinPeer

__all__ = ["KINDS", "POOL_GROWTH", "Churn", "Resources", "plan"]

KINDS = (
    "sdk", "ours", "upload", "camera", "watcher", "aborted", "vanished",
    "whip", "whep", "whip_vanished",
)  # fmt: skip
# Kinds that are no session of the server's (a WHIP publisher is a pipeline source).
_NOT_SESSIONS = ("whip", "whip_vanished")
CONFIG = StreamConfig(stream_output=["annotated"], data_output=["predictions"])
IMAGE = np.full((240, 320, 3), 80, np.uint8)
# A session that never comes back is a failure, not a wait: far above the ~1 s each takes.
SESSION_BOUND_S = 60
# Thread pools (asyncio's default executor: up to 6 threads on 2 cores) may still grow to
# their size after a warm-up; a leak grows with every session, far past this.
POOL_GROWTH = 4


@dataclass(frozen=True)
class Resources:
    """What the server holds: all must return to their baseline once sessions ended."""

    def back_to(self, baseline: Resources) -> bool:
        return (
            self.sessions == 0
            and self.peer_connections == 0
            and self.publishers == 0
            and self.upload_files == 0
            and self.fds <= baseline.fds
            and self.threads <= baseline.threads + POOL_GROWTH
        )

    threads: int
    fds: int
    sessions: int
    peer_connections: int
    publishers: int
    upload_files: int
    rss_mb: float

    @classmethod
    def of(cls, server: ServerProcess, uploads: Path) -> Resources:
        pid = server.process.pid
        threads = len(os.listdir(f"/proc/{pid}/task"))
        fds = _fds_but_http_connections(pid, server.port)
        status = Path(f"/proc/{pid}/status").read_text()
        rss_kb = next(
            int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")
        )
        health = server.get("/healthz").json()
        return cls(
            threads=threads,
            fds=fds,
            sessions=health["sessions"],
            peer_connections=health["peer_connections"],
            publishers=health["publishers"],
            upload_files=sum(1 for p in uploads.rglob("*") if p.is_file() and p.name != ".lock"),
            rss_mb=rss_kb / 1024,
        )


def _fds_but_http_connections(pid: int, http_port: int) -> int:
    """The process's open fds, less its HTTP connections: the server closes one only once it
    has read the client's FIN, a moment after the answer, so a ``/healthz`` just before
    counted one fd more half the time (measured: 146 of 300). Those are the clients'
    connections, not what a session holds."""
    # The connections first: once its fd is closed, a row shows inode 0, so a table read
    # after the fds would miss one closed in between (2 of 300 were).
    connections = _connections_on(pid, http_port)
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:  # closed meanwhile
            continue
        if target.removeprefix("socket:[").removesuffix("]") not in connections:
            count += 1
    return count


def _connections_on(pid: int, port: int) -> set[str]:
    """The socket inodes of TCP connections (not the listener) on local ``port``."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for row in path.read_text().splitlines()[1:]:
            fields = row.split()
            local_port, state, inode = int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]
            if local_port == port and state != "0A":  # 0A: LISTEN
                inodes.add(inode)
    return inodes


class Churn:
    """Opens and ends sessions of each kind against ``server`` (which must log session
    teardowns, have ``connect_timeout_s`` short, and read ``camera_url``)."""

    def __init__(self, server: ServerProcess, camera_url: str, clip: Path) -> None:
        self.server = server
        self.camera_url = camera_url
        self.clip = clip
        self.pipeline_id = self._start_pipeline()
        self.opened = 0

    def _start_pipeline(self) -> str:
        response = self.server.start_pipeline(self.camera_url, DETECT_SPEC)
        assert response.status_code == 200, response.text
        return response.json()["context"]["pipeline_id"]

    def run(self, kinds: list[str]) -> None:
        """One session of each kind in ``kinds``, in order; returns once each got a result
        (or, for ``aborted`` and ``vanished``, once it was left behind)."""
        for kind in kinds:
            getattr(self, f"_{kind}")()
            if kind not in _NOT_SESSIONS:
                self.opened += 1

    def wait_all_closed(self, timeout: float) -> None:
        """Until the server has torn down every session opened so far (the vanished ones
        take ICE consent's ~30 s), plus those of the pipeline watcher's own, and every WHIP
        publisher is gone."""
        self.server.wait_sessions_closed(self.opened, timeout=timeout)
        wait_for(
            lambda: self.server.get("/healthz").json()["publishers"] == 0,
            timeout,
            "WHIP publishers gone",
        )

    # ------------------------------------------------------------------- kinds

    def _sdk(self) -> None:
        source = LoopManualSource()
        config = SdkStreamConfig(stream_output=["annotated"], data_output=["predictions"])
        session = InferenceHTTPClient(api_url=self.server.url, api_key=None).webrtc.stream(
            source=source, workflow=DETECT_SPEC, config=config
        )
        got = threading.Event()
        session.on_data("predictions")(lambda *_: got.set())
        runner = threading.Thread(target=session.run, daemon=True)
        runner.start()
        assert source.connected.wait(SESSION_BOUND_S), "the SDK session never connected"
        while not got.is_set():
            source.send_on_loop(IMAGE)
            got.wait(0.1)  # one frame per 100 ms until a result is back (pacing, not waiting)
        session.close()
        runner.join(SESSION_BOUND_S)
        assert not runner.is_alive(), "the SDK session did not end"

    def _ours(self) -> None:
        source = ManualSource()
        source.send(IMAGE)  # queued until it runs
        self._first_frame(source)

    def _camera(self) -> None:
        self._first_frame(RTSPSource(self.camera_url))

    def _watcher(self) -> None:
        self._first_frame(PipelineSource(self.pipeline_id))

    def _first_frame(self, source: object) -> None:
        workflow = None if isinstance(source, PipelineSource) else DETECT_SPEC
        session = Client(self.server.url).webrtc.stream(source, workflow=workflow, config=CONFIG)
        with session:
            next(session.video())

    def _upload(self) -> None:
        session = Client(self.server.url).webrtc.stream(
            VideoFileSource(self.clip), workflow=DETECT_SPEC, config=CONFIG
        )
        with session:
            assert sum(1 for _ in session.results()) > 0

    def _aborted(self) -> None:
        asyncio.run(_post_offer_then_vanish(self.server.url))

    def _vanished(self) -> None:
        command = [sys.executable, "-m", "tests.support.exit_program", self.server.url]
        program = LoggedProcess([*command, "video", "sigint", "manual"])
        try:
            program.wait_for_output("STREAMING", timeout=SESSION_BOUND_S)
            program.process.send_signal(signal.SIGKILL)  # no goodbye
            program.process.wait(SESSION_BOUND_S)
        finally:
            program.stop()

    def _whip(self) -> None:
        url = f"{self.server.url}/whip/pipelines/{self.pipeline_id}"
        publisher = WebrtcbinPeer("publish", url, "vp8")
        try:
            publisher.location()
            publisher.wait_connected()
            assert publisher.end() == 200
        finally:
            publisher.stop()

    def _whep(self) -> None:
        player = WebrtcbinPeer(
            "play", f"{self.server.url}/whep/pipelines/{self.pipeline_id}/0", "vp8"
        )
        try:
            player.wait_frames(5)
            assert player.end() == 200
        finally:
            player.stop()

    def _whip_vanished(self) -> None:
        url = f"{self.server.url}/whip/pipelines/{self.pipeline_id}"
        publisher = WebrtcbinPeer("publish", url, "vp8")
        try:
            publisher.location()
            publisher.wait_connected()
            publisher.vanish()
        finally:
            publisher.stop()


async def _post_offer_then_vanish(url: str) -> None:
    pc = loopback_peer()
    try:
        pc.addTransceiver("video", direction="recvonly")
        pc.createDataChannel("inference")
        await pc.setLocalDescription(await pc.createOffer())
        body = {
            "webrtc_offer": {"type": "offer", "sdp": pc.localDescription.sdp},
            "workflow_configuration": {
                "type": "WorkflowConfiguration",
                "workflow_specification": DETECT_SPEC,
            },
        }
        async with httpx.AsyncClient(timeout=SESSION_BOUND_S) as http:
            response = await http.post(f"{url}/initialise_webrtc_worker", json=body)
        assert response.status_code == 200, response.text
    finally:
        await pc.close()  # never applied the answer: the server waits out its connect timeout


def plan(count: int) -> list[str]:
    """``count`` sessions cycling through the kinds, vanishing ones first (they take longest
    to be noticed, so their waits overlap the rest)."""
    cycle = [k for k in KINDS if k not in ("vanished", "whip_vanished")]
    vanished = max(1, count // 25)
    first = ["vanished", "whip_vanished"] * vanished
    return first + [cycle[i % len(cycle)] for i in range(count - len(first))]
