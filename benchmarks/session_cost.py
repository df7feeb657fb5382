"""What a session costs: time from the offer (POST) to the first annotated frame with the model
warm, and server RSS per additional session.

Setup: --setups sessions one after another (our client, default detection workflow, a live
640x480 stamped feed): the time from starting the session (the POST goes out) to the first
returned frame. Memory: sessions are added one at a time up to --sessions, all streaming at
15 fps; the server's RSS is read once each new session has frames coming back, and the cost
per session is the slope of a straight line through (sessions, RSS).

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks session-cost'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import numpy as np

from benchmarks.common import percentiles, tree_rss_mb, write_result
from sources import SyntheticSource
from streaming import Client, StreamConfig
from streaming.client import FrameSourceStream
from streaming.protocol.workflows import object_detection
from streaming.rtc.ice import restrict_host_addresses
from tests.support.server import ServerProcess

CONFIG = StreamConfig(stream_output=["annotated"], data_output=["predictions"])


def feed(fps: float) -> FrameSourceStream:
    return FrameSourceStream(lambda: SyntheticSource(640, 480, fps=fps, frames=None))


async def setup_time(url: str) -> float:
    started = time.perf_counter()
    async with Client(url).webrtc.astream(feed(30), workflow=object_detection(),
                                          config=CONFIG) as session:  # fmt: skip
        async for _ in session.video():
            return time.perf_counter() - started
    raise RuntimeError("the session ended before a frame came back")


async def memory(url: str, pid: int, count: int) -> list[tuple[int, float]]:
    points = [(0, tree_rss_mb(pid))]
    stop = asyncio.Event()
    tasks = []

    async def one(ready: asyncio.Event) -> None:
        async with Client(url).webrtc.astream(feed(15), workflow=object_detection(),
                                              config=CONFIG) as session:  # fmt: skip
            frames = 0
            async for _ in session.video():
                frames += 1
                if frames == 15:  # a second of frames back: the session is in full flow
                    ready.set()
                if stop.is_set():
                    break

    for n in range(1, count + 1):
        ready = asyncio.Event()
        tasks.append(asyncio.create_task(one(ready)))
        await asyncio.wait_for(ready.wait(), 60)
        points.append((n, tree_rss_mb(pid)))
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return points


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="benchmarks session-cost", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--setups", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=8)
    args = parser.parse_args(argv)
    restrict_host_addresses(["127.0.0.1"])
    server = ServerProcess()
    try:
        server.wait_ready()
        setups = [asyncio.run(setup_time(server.url)) * 1000 for _ in range(args.setups)]
        points = asyncio.run(memory(server.url, server.process.pid, args.sessions))
    finally:
        server.stop()
    sessions_axis, rss = zip(*points, strict=True)
    slope = float(np.polyfit(sessions_axis, rss, 1)[0])
    report = {
        "setup_ms": {**percentiles(setups, (50, 95)), "all": [round(s, 1) for s in setups]},
        "rss_mb_by_sessions": [{"sessions": n, "rss_mb": r} for n, r in points],
        "rss_mb_per_session": round(slope, 1),
    }
    print(json.dumps(report))
    write_result("session-cost", report)


if __name__ == "__main__":
    main()
