"""Glass-to-glass latency: a live synthetic feed (640x480 at 30 fps) through the server, realtime.

Every frame carries its send time and index in pixel blocks that survive VP8; the client (ours,
one process per session) reads them back from the returned annotated frame, so the latency is
on one clock. Reported per workflow: p50/p95/p99 over --frames frames (after --warmup), the
drop rate (frames sent that never came back), and drift: p50 of the last 100 frames minus p50
of the first 100, or of the last minute minus the first in runs over 3 minutes. Workflows: the
default detection model, and the model-free blur (which isolates what streaming itself costs).
The server's own inference time per frame comes from each result's
``video_metadata.inference_ms``.

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks latency'``
(``--frames 9000`` for the 5-minute drift run). ``--sessions N`` runs N such sessions at once
for a soak (``--sessions 4 --frames 108000 --warmup 1800 --workflow blur`` is the hour): each
reports its own drift, the median of every minute instead of every sample, and the trend (a
least-squares slope through those medians, in ms per hour), and each minute's video bitrate
both ways (``up_kbps``: the client's upload, ``down_kbps``: the returned video).

``--upload-kbps K`` holds each client's upload encoder at K kbps instead of letting it follow
the server's bandwidth estimate (aiortc: 500 kbps up to 1.5 Mbps). The soak uses it: its four
clients share the server's two cores, and clients whose encoders climb take CPU from the
server each minute, a drift of the load generator rather than of the server
(``benchmarks/README.md``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Self

import numpy as np
import psutil
from aiortc.codecs import vpx

from benchmarks.common import CpuMeter, percentiles, tree_rss_mb, write_result
from sources import SyntheticSource, decode_stamp
from streaming import Client, StreamConfig
from streaming.client import FrameSourceStream, WebRTCSession
from streaming.protocol.workflows import image_blur, object_detection
from streaming.rtc.ice import restrict_host_addresses
from tests.support.server import ServerProcess

WORKFLOWS = {
    "detection": (
        object_detection(),
        StreamConfig(stream_output=["annotated"], data_output=["predictions"]),
    ),
    "blur": (image_blur(), StreamConfig(stream_output=["output_image"], data_output=[])),
}


def measure(
    url: str, workflow: str, frames: int, fps: float, warmup: int, size: tuple[int, int]
) -> dict:
    spec, config = WORKFLOWS[workflow]
    source = FrameSourceStream(lambda: SyntheticSource(*size, fps=fps, frames=warmup + frames))
    ages: dict[int, float] = {}
    inference: list[float] = []
    with (
        Client(url).webrtc.stream(source, workflow=spec, config=config) as session,
        BitrateSampler(session) as bitrates,
    ):
        for frame, metadata in session.video():
            stamp = decode_stamp(frame)
            if stamp is None or stamp.index < warmup:
                continue
            ages.setdefault(stamp.index, stamp.age_ms())
            if metadata.inference_ms:
                inference.append(metadata.inference_ms)
    ordered = [ages[i] for i in sorted(ages)]
    minute = int(60 * fps)
    long_run = len(ordered) > 3 * minute
    # The window drift compares: 100 frames for a short run, a whole minute for a soak,
    # where a 3-second window would measure the machine's noise rather than growth.
    window = minute if long_run else 100
    head, tail = ordered[:window], ordered[-window:]
    drift = float(np.median(tail) - np.median(head)) if len(ordered) >= 2 * window else None
    medians = [float(np.median(ordered[i : i + minute])) for i in range(0, len(ordered), minute)]
    # Least-squares slope over every minute: growth that the two end windows can miss.
    slope = float(np.polyfit(range(len(medians)), medians, 1)[0]) if len(medians) > 1 else 0.0
    samples = (
        {
            "minute_medians_ms": [round(m, 1) for m in medians],
            "trend_ms_per_hour": round(60 * slope, 1),
            "minute_kbps": bitrates.samples,
        }
        if long_run
        else {"samples_ms": [round(a, 1) for a in ordered]}
    )
    return {
        "workflow": workflow,
        "frames_sent": frames,
        "frames_back": len(ages),
        "delivered_fps": round(fps * len(ages) / frames, 1),
        "drop_rate": round(1 - len(ages) / frames, 4),
        "latency_ms": percentiles(ordered),
        "drift_ms": None if drift is None else round(drift, 1),
        "server_inference_ms_p50": round(float(np.median(inference)), 2) if inference else None,
        **samples,
    }


def measure_isolated(
    url: str,
    workflow: str,
    frames: int,
    fps: float,
    warmup: int,
    size: tuple[int, int],
    upload_kbps: int | None = None,
) -> dict:
    """``measure`` in a process of its own: one process encoding and decoding for every
    session fell behind realtime at 4 sessions (its GIL, not the server, was the limit)."""
    restrict_host_addresses(["127.0.0.1"])
    if upload_kbps:
        hold_upload_bitrate(upload_kbps * 1000)
    return measure(url, workflow, frames, fps, warmup, size)


def hold_upload_bitrate(bitrate: int) -> None:
    """This process's aiortc VP8 encoders start at ``bitrate`` and stay there: aiortc clamps
    every REMB-driven target between these module constants, read when the target is set."""
    vpx.DEFAULT_BITRATE = vpx.MIN_BITRATE = vpx.MAX_BITRATE = bitrate


class _Sampler:
    """A thread that takes a sample every ``every_s`` seconds until the ``with`` ends;
    subclasses say how to ``begin`` and what one ``sample`` is."""

    def __init__(self, name: str, every_s: float = 60.0) -> None:
        self._every_s = every_s
        self._stop = threading.Event()
        self.samples: list[dict[str, float]] = []
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        self.begin()
        while not self._stop.wait(self._every_s):  # a sampling period, not a wait for news
            sample = self.sample()
            if self._stop.is_set():
                return  # the ``with`` ended while sampling: what was read may be torn down
            self.samples.append(sample)

    def begin(self) -> None:
        raise NotImplementedError

    def sample(self) -> dict[str, float]:
        raise NotImplementedError


class BitrateSampler(_Sampler):
    """Every minute, a session's video bitrate each way (kbps) since the minute before."""

    def __init__(self, session: WebRTCSession, every_s: float = 60.0) -> None:
        super().__init__("bitrate-sampler", every_s)
        self._session = session

    def begin(self) -> None:
        self._before, self._then = self._session.video_bytes(), time.perf_counter()

    def sample(self) -> dict[str, float]:
        now, at = self._session.video_bytes(), time.perf_counter()
        seconds = max(1e-9, at - self._then)
        before, (self._before, self._then) = self._before, (now, at)
        return {
            "up_kbps": round(8 * (now.sent - before.sent) / seconds / 1000, 1),
            "down_kbps": round(8 * (now.received - before.received) / seconds / 1000, 1),
        }


class MinuteSampler(_Sampler):
    """Every minute: the server's CPU (% of one core) and RSS, and the whole machine's CPU and
    steal time, so a drift can be told apart from a busier machine."""

    def __init__(self, pid: int, every_s: float = 60.0) -> None:
        super().__init__("minute-sampler", every_s)
        self._pid = pid
        self._meter = CpuMeter(pid)

    def begin(self) -> None:
        self._meter.start()
        psutil.cpu_times_percent()  # the machine's counters start now

    def sample(self) -> dict[str, float]:
        machine = psutil.cpu_times_percent()
        sample = {
            "server_cpu_percent": self._meter.stop(),
            "server_rss_mb": tree_rss_mb(self._pid),
            "machine_busy_percent": round(100 - machine.idle, 1),
            "machine_steal_percent": round(getattr(machine, "steal", 0.0), 1),
        }
        self._meter.start()
        return sample


def parse_size(text: str) -> tuple[int, int]:
    width, _, height = text.partition("x")
    return int(width), int(height)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks latency", description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=60)
    parser.add_argument("--fps", type=float, default=30)
    parser.add_argument("--workflow", choices=[*WORKFLOWS, "both"], default="both")
    parser.add_argument("--size", type=parse_size, default=(640, 480), help="WxH, e.g. 320x240")
    parser.add_argument("--sessions", type=int, default=1, help="concurrent sessions")
    parser.add_argument(
        "--upload-kbps", type=int, default=None, help="hold each client's upload at this bitrate"
    )
    parser.add_argument("--out", default="latency", help="results/<out>.json")
    args = parser.parse_args(argv)
    restrict_host_addresses(["127.0.0.1"])
    names = list(WORKFLOWS) if args.workflow == "both" else [args.workflow]
    server = ServerProcess()
    runs = {}
    try:
        server.wait_ready()
        for name in names:
            sampler = MinuteSampler(server.process.pid)
            spawn = multiprocessing.get_context("spawn")
            with sampler, ProcessPoolExecutor(args.sessions, mp_context=spawn) as pool:
                job = (server.url, name, args.frames, args.fps, args.warmup, args.size,
                       args.upload_kbps)  # fmt: skip
                futures = [pool.submit(measure_isolated, *job) for _ in range(args.sessions)]
                results = [f.result() for f in futures]
            runs[name] = results[0] if args.sessions == 1 else {"sessions": results}
            runs[name]["minutes"] = sampler.samples
            for result in results:
                shown = {
                    k: v for k, v in result.items() if not k.endswith("_ms") or k == "drift_ms"
                }
                print(json.dumps(shown), flush=True)
        device = server.get("/readyz").json()["models"]
    finally:
        server.stop()
    path = write_result(args.out, {"fps": args.fps, "size": list(args.size), "models": device,
                                   "upload_kbps": args.upload_kbps, "runs": runs})  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
