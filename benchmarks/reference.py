"""Side by side with the reference server (PyPI ``inference`` 1.8.3) on the same workflow and
client: session setup time, delivered fps at 30 fps input, glass-to-glass latency and server
RSS per session, for 1, 2, 4 and 6 concurrent sessions.

Both servers get the same program: the published inference-sdk, ``ManualSource``, fed a live
synthetic 640x480 feed at 30 fps whose frames carry their send time in pixel blocks (read back
from the returned frames), the model-free blur workflow (the reference cannot load models
offline), realtime, video back, no data outputs. Setup is from starting the SDK session to the
first returned frame; fps and latency are measured over --seconds once every session of a
step has its first frame. RSS is the server's whole process tree (the reference adds a
process per session) minus what it held idle.

The reference lives in its own virtualenv (~7 GB: a CUDA torch comes along), made on request:
``python -m benchmarks reference --setup`` (never in CI). Then:
``unshare --net sh -c 'ip link set lo up && python -m benchmarks reference'``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

from benchmarks.common import ROOT, CpuMeter, percentiles, tree_rss_mb, write_result
from sources import SyntheticSource, decode_stamp
from streaming.protocol.workflows import image_blur
from streaming.rtc.ice import restrict_host_addresses
from tests.support.sdk import LoopManualSource
from tests.support.server import LoggedProcess, ServerProcess, free_port

VENV = Path.home() / ".cache" / "visionstream" / "reference-venv"
REFERENCE = "inference[http]==1.8.3"
SITE = ROOT / "benchmarks" / "reference_site"
REFERENCE_ENV = {
    "OFFLINE_MODE": "True", "ENABLE_STREAM_API": "False", "ACTIVE_LEARNING_ENABLED": "False",
    "DISABLE_VERSION_CHECK": "True", "METRICS_ENABLED": "False", "WEBRTC_WORKER_ENABLED": "True",
    "WORKFLOWS_STEP_EXECUTION_MODE": "local", "BENCH_ICE_HOST_ADDRESSES": "127.0.0.1",
}  # fmt: skip


def setup() -> None:
    if not (VENV / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", REFERENCE], check=True)
    print(f"reference server installed in {VENV}")


class ReferenceServer(LoggedProcess):
    """The reference app under uvicorn on 127.0.0.1, in a scratch working directory (it
    mounts static directories relative to it)."""

    def __init__(self) -> None:
        if not (VENV / "bin" / "python").exists():
            raise SystemExit(f"no reference server in {VENV}: run with --setup first")
        self._scratch = tempfile.TemporaryDirectory(prefix="reference-")
        work = Path(self._scratch.name)
        for static in ("inference/landing/out/static", "inference/landing/out/_next/static"):
            (work / static).mkdir(parents=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**REFERENCE_ENV, "MODEL_CACHE_DIR": str(work / "cache"), "PYTHONPATH": str(SITE)}
        os.chdir(work)
        try:
            super().__init__(
                [str(VENV / "bin" / "python"), str(SITE / "reference_app.py"), str(self.port)],
                env,
            )
        finally:
            os.chdir(ROOT)

    def wait_ready(self) -> None:
        self.wait_for_output("Uvicorn running on", timeout=180)

    def stop(self) -> None:
        super().stop()
        self._scratch.cleanup()


class Viewer:
    """One inference-sdk session: a sender thread feeding ManualSource at --fps, and a reader
    decoding the stamps of returned frames."""

    def __init__(self, url: str, fps: float, send_on_loop: bool = True) -> None:
        from inference_sdk import InferenceHTTPClient
        from inference_sdk.webrtc import StreamConfig

        self.source = LoopManualSource()
        config = StreamConfig(stream_output=["output_image"], data_output=[])
        client = InferenceHTTPClient(api_url=url, api_key=None)
        self.session = client.webrtc.stream(
            source=self.source, workflow=image_blur(), config=config
        )
        self.fps = fps
        # Send on the SDK's own loop (see LoopManualSource); the caller's thread is the naive
        # use, which the SDK's send is not safe for.
        self.send_on_loop = send_on_loop
        self.first_frame = threading.Event()
        self.setup_s: float | None = None
        self.post_to_frame_s: float | None = None
        self.ages: list[tuple[float, int, float]] = []  # (arrival, index, age ms)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._send, daemon=True),
                         threading.Thread(target=self._read, daemon=True)]  # fmt: skip

    def start(self) -> None:
        self._started = time.perf_counter()
        for thread in self._threads:
            thread.start()

    def _send(self) -> None:
        while not self.source.connected.wait(0.5):  # a live camera's frames before then are lost
            if self._stop.is_set():
                return
        feed = SyntheticSource(640, 480, fps=self.fps, frames=None)
        send = self.source.send_on_loop if self.send_on_loop else self.source.send
        for frame in feed:
            if self._stop.is_set():
                break
            send(frame.image)
        feed.close()

    def _read(self) -> None:
        try:
            for image, _ in self.session.video():
                stamp = decode_stamp(image)
                if stamp is None:
                    continue
                now = time.perf_counter()
                if not self.first_frame.is_set():
                    self.setup_s = now - self._started
                    posted = self.source.offer_ready_at
                    self.post_to_frame_s = None if posted is None else now - posted
                    self.first_frame.set()
                self.ages.append((now, stamp.index, stamp.age_ms()))
                if self._stop.is_set():
                    break
        except Exception as exc:  # a failed session: reported as such
            print(f"session failed: {exc}", file=sys.stderr)
            self.first_frame.set()

    def close(self) -> None:
        self._stop.set()
        self.session.close()
        for thread in self._threads:
            thread.join(30)

    def window(self, start: float, end: float) -> dict:
        seen = [(i, a) for t, i, a in self.ages if start <= t <= end]
        indices = {i for i, _ in seen}
        return {
            "fps": round(len(indices) / (end - start), 1),
            "latency_ms": percentiles([a for _, a in seen], (50, 95)),
        }


def step(
    url: str, pid: int, sessions: int, fps: float, seconds: float, idle_mb: float, on_loop: bool
) -> dict:
    viewers = [Viewer(url, fps, on_loop) for _ in range(sessions)]
    for viewer in viewers:
        viewer.start()
    try:
        for viewer in viewers:
            viewer.first_frame.wait(300)
        server_cpu, client_cpu = CpuMeter(pid), CpuMeter(os.getpid(), children=False)
        server_cpu.start()
        client_cpu.start()
        start = time.perf_counter()
        time.sleep(seconds)  # the measuring window itself
        end = time.perf_counter()
        server_pct, client_pct = server_cpu.stop(), client_cpu.stop()
        rss = tree_rss_mb(pid)
        windows = [v.window(start, end) for v in viewers]
    finally:
        for viewer in viewers:
            viewer.close()
    fps = [w["fps"] for w in windows]
    setups = [v.setup_s for v in viewers if v.setup_s is not None]
    posts = [v.post_to_frame_s for v in viewers if v.post_to_frame_s is not None]
    return {
        "sessions": sessions,
        "setup_s": {"max": round(max(setups), 2), "median": round(float(np.median(setups)), 2)}
        if setups
        else None,
        "post_to_first_frame_s": {
            "max": round(max(posts), 2),
            "median": round(float(np.median(posts)), 2),
        }
        if posts
        else None,
        "fps_each": fps,
        "latency_ms_each": [w["latency_ms"] for w in windows],
        "latency_ms_p50_median": round(
            float(np.median([w["latency_ms"]["p50"] for w in windows])), 1
        ),
        "latency_ms_p95_worst": max(w["latency_ms"]["p95"] for w in windows),
        "server_rss_mb": rss,
        "rss_per_session_mb": round((rss - idle_mb) / sessions, 1),
        # % of one core over the window; the client is this process (every session's SDK).
        "server_cpu_pct": server_pct,
        "client_cpu_pct": client_pct,
        "server_cpu_ms_per_frame": round(10 * server_pct / max(0.1, sum(fps)), 2),
    }


def run_server(
    name: str, server, counts: list[int], fps: float, seconds: float, on_loop: bool
) -> dict:
    server.wait_ready()
    pid = server.process.pid
    idle_processes = {p.pid for p in psutil.Process(pid).children(recursive=True)}
    # One session first, not measured: first-use costs of this client process (codec and
    # library imports) would otherwise land on whichever server runs first.
    step(server.url, pid, 1, fps, 2.0, 0.0, on_loop)
    _wait_sessions_gone(pid, idle_processes)
    idle = tree_rss_mb(pid)
    out = {"idle_rss_mb": idle, "steps": []}
    for count in counts:
        result = step(server.url, pid, count, fps, seconds, idle, on_loop)
        out["steps"].append(result)
        print(f"{name} x{count}: {json.dumps(result)}", flush=True)
        _wait_sessions_gone(pid, idle_processes)
    return out


def _wait_sessions_gone(pid: int, idle_processes: set[int]) -> None:
    """Waits for the processes the reference spawned for closed sessions to exit, so idle RSS
    and the next step count only what is running."""
    extra = [p for p in psutil.Process(pid).children(recursive=True) if p.pid not in idle_processes]
    _, alive = psutil.wait_procs(extra, timeout=60)
    if alive:
        print(f"{len(alive)} session processes still running after 60 s", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="benchmarks reference", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--setup", action="store_true", help="install the reference server")
    parser.add_argument("--sessions", default="1,2,4,6")
    parser.add_argument("--fps", type=float, default=30)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--only", choices=["visionstream", "reference"])
    parser.add_argument(
        "--send-from-caller",
        action="store_true",
        help="call ManualSource.send from the sender thread, as a naive program does (hits "
        "the SDK's thread-safety bug; default: on the SDK's loop)",
    )
    args = parser.parse_args(argv)
    if args.setup:
        setup()
        return
    restrict_host_addresses(["127.0.0.1"])
    counts = [int(n) for n in args.sessions.split(",")]
    results = {}
    for name, make in (("visionstream", ServerProcess), ("reference", ReferenceServer)):
        if args.only and args.only != name:
            continue
        server = make()
        try:
            results[name] = run_server(
                name, server, counts, args.fps, args.seconds, not args.send_from_caller
            )
        finally:
            server.stop()
    out = "reference-send-from-caller" if args.send_from_caller else "reference"
    report = {
        "send": "caller thread" if args.send_from_caller else "SDK loop",
        "workflow": "image_blur (average, 5)",
        "fps": args.fps,
        "size": [640, 480],
        "servers": results,
    }
    path = write_result(out, report)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
