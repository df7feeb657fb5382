"""8 concurrent sessions: frames per second of the whole server, with and without the batcher.

Eight live synthetic feeds (our client, one asyncio loop, realtime so the server keeps up by
dropping) each send 320x240 frames at --fps to one `visionstream serve` running the default
detection workflow with predictions only on the data channel. The server runs once with the
batcher off (VISIONSTREAM_MAX_BATCH_SIZE=1) and once on (=8, 4 ms queue delay), alternating for
--rounds; each run counts the results all sessions receive over --seconds after every session
has had its first result, and reads the mean batch size from /metrics.

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks batching'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sources import SyntheticSource  # noqa: E402
from streaming import Client, StreamConfig  # noqa: E402
from streaming.client import FrameSourceStream  # noqa: E402
from streaming.protocol.workflows import object_detection  # noqa: E402
from streaming.rtc.ice import restrict_host_addresses  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402

CONFIGS = {
    "batcher off": {"max_batch_size": "1"},
    "batcher on (8, 4 ms)": {"max_batch_size": "8", "max_queue_delay_ms": "4"},
}


async def load(url: str, sessions: int, fps: float, seconds: float) -> dict:
    counts = [0] * sessions
    first = [asyncio.Event() for _ in range(sessions)]
    config = StreamConfig(stream_output=[], data_output=["predictions"])
    client = Client(url)

    async def one(index: int, measuring: asyncio.Event, done: asyncio.Event) -> None:
        source = FrameSourceStream(lambda: SyntheticSource(320, 240, fps=fps, frames=None))
        async with client.webrtc.astream(
            source, workflow=object_detection(), config=config
        ) as session:

            @session.on_data("predictions")
            def count(_value) -> None:
                first[index].set()
                if measuring.is_set() and not done.is_set():
                    counts[index] += 1

            await done.wait()

    measuring, done = asyncio.Event(), asyncio.Event()
    tasks = [asyncio.create_task(one(i, measuring, done)) for i in range(sessions)]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in first)), 120)
    measuring.set()
    started = time.perf_counter()
    await asyncio.sleep(seconds)  # the measuring window itself, not a wait for a condition
    done.set()
    elapsed = time.perf_counter() - started
    await asyncio.gather(*tasks)
    return {
        "fps": round(sum(counts) / elapsed, 1),
        "per_session_fps": [round(c / elapsed, 1) for c in counts],
    }


def mean_batch(metrics: str) -> float | None:
    total = re.search(r'visionstream_batch_size_sum\{model="[^"]+"\} ([0-9.e+]+)', metrics)
    count = re.search(r'visionstream_batch_size_count\{model="[^"]+"\} ([0-9.e+]+)', metrics)
    if not total or not count or float(count.group(1)) == 0:
        return None
    return round(float(total.group(1)) / float(count.group(1)), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--fps", type=float, default=15)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    restrict_host_addresses(["127.0.0.1"])
    runs: dict[str, list[dict]] = {name: [] for name in CONFIGS}
    for round_index in range(args.rounds):
        for name, settings in CONFIGS.items():
            server = ServerProcess(**settings)
            try:
                server.wait_ready()
                result = asyncio.run(load(server.url, args.sessions, args.fps, args.seconds))
                result["mean_batch_size"] = mean_batch(server.get("/metrics").text)
                result["device"] = server.get("/readyz").json()["models"]
            finally:
                server.stop()
            runs[name].append(result)
            print(f"round {round_index + 1} {name}: fps {result['fps']}, "
                  f"mean batch {result['mean_batch_size']}", flush=True)  # fmt: skip
    summary = {name: statistics.median(r["fps"] for r in results) for name, results in runs.items()}
    off, on = summary["batcher off"], summary["batcher on (8, 4 ms)"]
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "date": datetime.now().date().isoformat(),
        "sessions": args.sessions,
        "offered_fps": args.sessions * args.fps,
        "server_fps_median": summary,
        "ratio_on_over_off": round(on / off, 3) if off else None,
        "runs": runs,
    }
    name = f"batching-{args.tag}.json" if args.tag else "batching.json"
    (ROOT / "benchmarks/results" / name).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"server_fps_median": summary, "ratio": report["ratio_on_over_off"]}))


if __name__ == "__main__":
    main()
