"""Churn soak: sessions of every kind opened and ended in rounds, the server's resources
read after each round (threads, fds, open peer connections, upload files, sessions, RSS).

After a warm-up (one session of each kind, then --warmup more), --sessions sessions in
rounds of --round; reports each round's resources and RSS growth per 100 sessions. With
--tracemalloc the server runs under tracemalloc and the top allocation growth between the
first and last round is reported (where memory goes, by line).

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks churn'``.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
import tracemalloc
from dataclasses import asdict
from pathlib import Path

from benchmarks.common import write_result
from streaming.rtc.ice import restrict_host_addresses
from tests.support.camera import RTSPCamera
from tests.support.churn import KINDS, Churn, Resources, plan
from tests.support.media import stamped_clip
from tests.support.server import ServerProcess


def snapshot(server: ServerProcess, path: Path) -> tracemalloc.Snapshot:
    mark = len(server.lines)
    server.process.send_signal(signal.SIGUSR1)
    server.wait_for_output("tracemalloc snapshot written", mark, timeout=120)
    return tracemalloc.Snapshot.load(str(path))


def top_growth(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, n: int = 15) -> list:
    stats = after.compare_to(before, "traceback")
    rows = []
    for stat in stats[:n]:
        frames = [f"{f.filename.split('site-packages/')[-1]}:{f.lineno}" for f in stat.traceback]
        rows.append({"kib": round(stat.size_diff / 1024, 1), "count": stat.count_diff,
                     "where": frames[-6:]})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--round", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=12)
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument(
        "--malloc-trim",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the server's VISIONSTREAM_MALLOC_TRIM (off: to measure what it saves)",
    )
    parser.add_argument("--out", default="churn")
    args = parser.parse_args()
    restrict_host_addresses(["127.0.0.1"])
    work = Path(tempfile.mkdtemp(prefix="churn-"))
    uploads, trace = work / "uploads", work / "snapshot.bin"
    clip = stamped_clip(work / "clip.mp4", frames=8, size=(320, 240))
    serve = ["benchmarks/traced_serve.py"] if args.tracemalloc else None
    settings = {"upload_dir": str(uploads), "connect_timeout_s": "3", "max_sessions": "32",
                "max_sessions_per_address": "32", "whip_idle_timeout_s": "2",
                "malloc_trim": str(args.malloc_trim).lower()}  # fmt: skip
    rounds, backs = [], []
    with RTSPCamera(320, 240, fps=30) as camera:
        os.environ["VISIONSTREAM_SNAPSHOT"] = str(trace)  # read by traced_serve.py
        server = ServerProcess(serve, **settings)
        try:
            server.wait_ready()
            churn = Churn(server, camera.url, clip)
            churn.run(list(KINDS) + plan(args.warmup))
            churn.wait_all_closed(timeout=180)
            baseline = Resources.of(server, uploads)
            print("baseline", baseline, flush=True)
            first = snapshot(server, trace) if args.tracemalloc else None
            started = time.monotonic()
            for done in range(args.round, args.sessions + 1, args.round):
                churn.run(plan(args.round))
                churn.wait_all_closed(timeout=180)
                now = Resources.of(server, uploads)
                backs.append(now.back_to(baseline))
                rounds.append({"sessions_run": done, **asdict(now)})
                print(f"{done} sessions: {now}", flush=True)
            elapsed = time.monotonic() - started
            last = snapshot(server, trace) if args.tracemalloc else None
        finally:
            server.stop()
    growth = (rounds[-1]["rss_mb"] - baseline.rss_mb) / (args.sessions / 100)
    report = {
        "sessions": args.sessions,
        "round": args.round,
        "malloc_trim": args.malloc_trim,
        "kinds": list(KINDS),
        "baseline": asdict(baseline),
        "rounds": rounds,
        "rss_growth_mb_per_100_sessions": round(growth, 2),
        # Every round: no session, open peer connection or upload left; fds at most the
        # baseline's; threads at most the baseline's plus what thread pools may still grow.
        "back_to_baseline": all(backs),
        "seconds": round(elapsed, 1),
    }
    if first is not None and last is not None:
        report["tracemalloc_top_growth"] = top_growth(first, last)
    path = write_result(args.out, report)
    print(f"RSS growth {growth:.2f} MB per 100 sessions; {path}")


if __name__ == "__main__":
    main()
