"""N concurrent 640x480 @ 15 fps realtime sessions (N = 1, 2, 4, 8): per-session delivered fps,
glass-to-glass p95, server CPU and RSS, and the largest N that keeps >= 90 % of frames
delivered at p95 <= 250 ms.

Each session is our client in one asyncio loop, sending a live stamped synthetic feed and
reading the annotated frames back (default detection workflow, predictions on the data
channel too); latency comes from the stamps, on this machine's clock. Each N gets a fresh
server; the window is --seconds after every session has its first frame back.

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks concurrency'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from benchmarks.common import CpuMeter, percentiles, tree_rss_mb, write_result
from sources import SyntheticSource, decode_stamp
from streaming import Client, StreamConfig
from streaming.client import FrameSourceStream
from streaming.protocol.workflows import object_detection
from streaming.rtc.ice import restrict_host_addresses
from tests.support.server import ServerProcess

DELIVERED, P95 = 0.9, 250.0


async def sessions(
    url: str,
    count: int,
    fps: float,
    seconds: float,
    pid: int,
    workflow: dict | None = None,
    config: StreamConfig | None = None,
) -> dict:
    """``count`` sessions at ``fps`` (the default model unless ``workflow``) measured for
    ``seconds`` once each has its first frame back; ``pid``'s process tree is the server."""
    config = config or StreamConfig(stream_output=["annotated"], data_output=["predictions"])
    workflow = workflow or object_detection()
    client = Client(url)
    seen: list[list[tuple[float, int, float]]] = [[] for _ in range(count)]
    first = [asyncio.Event() for _ in range(count)]
    done = asyncio.Event()

    async def one(index: int) -> None:
        source = FrameSourceStream(lambda: SyntheticSource(640, 480, fps=fps, frames=None))
        async with client.webrtc.astream(source, workflow=workflow, config=config) as session:
            async for frame, _ in session.video():
                if (stamp := decode_stamp(frame)) is not None:
                    seen[index].append((time.perf_counter(), stamp.index, stamp.age_ms()))
                    first[index].set()
                if done.is_set():
                    break

    tasks = [asyncio.create_task(one(i)) for i in range(count)]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in first)), 120)
    meter = CpuMeter(pid)
    meter.start()
    start = time.perf_counter()
    await asyncio.sleep(seconds)  # the measuring window itself
    end = time.perf_counter()
    cpu, rss = meter.stop(), tree_rss_mb(pid)
    done.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    per_session = []
    for samples in seen:
        window = [(i, a) for t, i, a in samples if start <= t <= end]
        per_session.append({
            "fps": round(len({i for i, _ in window}) / (end - start), 1),
            "latency_ms": percentiles([a for _, a in window], (50, 95)),
        })  # fmt: skip
    worst_p95 = max(s["latency_ms"]["p95"] or 1e9 for s in per_session)
    delivered = min(s["fps"] for s in per_session) / fps
    return {
        "sessions": count,
        "per_session": per_session,
        "delivered_min": round(delivered, 3),
        "latency_ms_p95_worst": worst_p95,
        "server_cpu_percent": cpu,
        "server_rss_mb": rss,
        "meets_target": delivered >= DELIVERED and worst_p95 <= P95,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="benchmarks concurrency", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--sessions", default="1,2,4,8")
    parser.add_argument("--fps", type=float, default=15)
    parser.add_argument("--seconds", type=float, default=15)
    args = parser.parse_args(argv)
    restrict_host_addresses(["127.0.0.1"])
    steps = []
    for count in (int(n) for n in args.sessions.split(",")):
        server = ServerProcess()
        try:
            server.wait_ready()
            idle = tree_rss_mb(server.process.pid)
            result = asyncio.run(sessions(server.url, count, args.fps, args.seconds,
                                          server.process.pid))  # fmt: skip
            result["server_idle_rss_mb"] = idle
        finally:
            server.stop()
        steps.append(result)
        shown = {k: v for k, v in result.items() if k != "per_session"}
        print(json.dumps(shown), flush=True)
    passing = [s["sessions"] for s in steps if s["meets_target"]]
    largest = max(passing) if passing else 0
    print(f"largest N with >= 90 % delivered and p95 <= 250 ms: {largest}")
    write_result("concurrency", {"fps_each": args.fps, "size": [640, 480], "steps": steps,
                                 "largest_n_meeting_target": largest})  # fmt: skip


if __name__ == "__main__":
    main()
