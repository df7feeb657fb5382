"""The event store: what it costs and how fast it answers.

- **Inserts**: sustained events per second through the writer (bounded queue, batched
  transactions) into SQLite (WAL) and PostgreSQL (Debian's, fsync on, on 127.0.0.1), and what
  one ``record`` call costs the producer (a frame's thread).
- **Per-frame cost**: the monitoring chain (ByteTrack, line counter, time in zone) on 50
  walking boxes, which cross the line and enter the zone all the time, with events not kept,
  kept in SQLite and kept in PostgreSQL; rounds alternate, figures pool the rounds.
- **Queries**: ``GET /events`` and ``/events/summary`` on the real server over HTTP with
  1,000,000 stored events (10 pipelines x 4 sources, 20 days), p50/p95 of each query.

Run: ``python -m benchmarks events [--events 1000000 --inserts 100000 --frames 300]``;
results go to results/events.json.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.analytics import block, frame_state, walkers
from benchmarks.common import percentiles, write_result
from streaming.events import EventRecord
from streaming.events.store import EventStore
from streaming.events.writer import EventWriter
from streaming.workflows.blocks.analytics import LineCounterBlock, TimeInZoneBlock
from streaming.workflows.blocks.base import BuildContext
from streaming.workflows.blocks.tracking import ByteTrackerBlock
from streaming.workflows.library import DEFAULT_LINE, DEFAULT_ZONE
from tests.support.postgres import PostgresServer
from tests.support.server import ServerProcess

KINDS = ["line_crossing", "zone_entry", "zone_exit", "event_sink", "source_state"]


def inserts(url: str, count: int) -> dict:
    writer = EventWriter(EventStore(url), max_queued=count)
    calls = []
    started = time.perf_counter()
    for i in range(count):
        before = time.perf_counter()
        writer.record(
            EventRecord("line_crossing", "p", "0", "counter", direction="in",
                        class_name="person", tracker_id=i, payload={"count_in": i})
        )  # fmt: skip
        calls.append(time.perf_counter() - before)
    assert writer.flush(600)
    elapsed = time.perf_counter() - started
    writer.close()
    return {
        "events": count,
        "events_per_s": round(count / elapsed),
        "record_call_us": percentiles([c * 1e6 for c in calls], (50, 95, 99), 2),
    }


def chain(events: EventWriter | None):
    context = BuildContext(None, stream={"pipeline": "bench", "source": "0"}, events=events)  # type: ignore[arg-type]
    return (
        block(ByteTrackerBlock),
        block(LineCounterBlock, context, line_segment=DEFAULT_LINE, triggering_anchor="CENTER"),
        block(TimeInZoneBlock, context, zone=DEFAULT_ZONE, remove_out_of_zone_detections=False),
    )


def per_frame(writers: dict[str, EventWriter | None], frames: int, rounds: int) -> dict:
    times: dict[str, list[float]] = {name: [] for name in writers}
    stored: dict[str, int] = {}
    for _ in range(rounds):
        for name, writer in writers.items():
            tracker, counter, timer = chain(writer)
            before = writer.written if writer is not None else 0
            for number in range(frames):
                frame = frame_state(number)
                started = time.perf_counter()
                tracked = tracker.run({"detections": walkers(50, number)}, frame)
                counter.run({"detections": tracked["tracked_detections"]}, frame)
                timer.run({"detections": tracked["tracked_detections"]}, frame)
                times[name].append((time.perf_counter() - started) * 1000)
            if writer is not None:
                assert writer.flush(120)
                stored[name] = stored.get(name, 0) + writer.written - before
    return {
        "detections": 50,
        "frames": frames * rounds,
        "events_per_frame": {k: round(v / (frames * rounds), 2) for k, v in stored.items()},
        "chain_ms": {name: percentiles(v, (50, 95), 3) for name, v in times.items()},
    }


def fill(store: EventStore, count: int, now: float) -> dict:
    """``count`` events over the last 20 days, in batches; returns what queries need."""
    rng = random.Random(0)
    store.migrate()
    span = 20 * 86400
    started = time.perf_counter()
    for first in range(0, count, 20_000):
        batch = []
        for i in range(first, min(count, first + 20_000)):
            kind = KINDS[i % len(KINDS)]
            batch.append(
                EventRecord(
                    kind, f"pipeline-{i % 10}", str(i % 4), "counter" if i % 3 else "zone",
                    at=now - span + span * i / count, class_name=rng.choice(["person", "car"]),
                    direction=("in", "out")[i % 2] if kind == "line_crossing" else None,
                    tracker_id=i % 5000, payload={"count_in": i, "count_out": i // 2},
                )
            )  # fmt: skip
        store.insert(batch)
    return {"events": count, "fill_s": round(time.perf_counter() - started, 1)}


def queries(url: str, now: float, repeat: int) -> dict:
    day = now - 86400
    with httpx.Client(base_url=url, timeout=120) as http:
        deep = http.get("/events", params={"limit": 100, "since": now - 10 * 86400 - 60,
                                           "until": now - 10 * 86400}).json()  # fmt: skip
        middle_id = deep["events"][0]["id"]
        cursor = None
        page = http.get("/events", params={"limit": 100, "until": now - 10 * 86400}).json()
        cursor = page["next_cursor"]
        cases = {
            "newest_page": ("/events", {"limit": 100}),
            "newest_page_one_pipeline": ("/events", {"limit": 100, "pipeline": "pipeline-3"}),
            "pipeline_source_last_day": (
                "/events", {"pipeline": "pipeline-3", "source": "3", "since": day}),
            "kind_and_class": ("/events", {"kind": "zone_exit", "class_name": "car"}),
            "cursor_page_10_days_back": ("/events", {"limit": 100, "cursor": cursor}),
            "one_event": (f"/events/{middle_id}", {}),
            "summary_hour_one_pipeline_last_day": (
                "/events/summary", {"bucket": "hour", "pipeline": "pipeline-3", "since": day}),
            "summary_minute_last_hour": ("/events/summary", {"bucket": "minute",
                                                            "since": now - 3600}),
            "summary_day_everything": ("/events/summary", {"bucket": "day"}),
        }  # fmt: skip
        results = {}
        for name, (path, params) in cases.items():
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                response = http.get(path, params=params)
                times.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200, response.text
            results[name] = percentiles(times, (50, 95), 1)
            print(f"  {name}: {results[name]}", flush=True)
    return results


def served(settings: dict[str, str], now: float, repeat: int) -> dict:
    server = ServerProcess(**settings)
    try:
        server.wait_ready()
        return queries(server.url, now, repeat)
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks events", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--inserts", type=int, default=100_000)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args(argv)
    report: dict = {}
    with tempfile.TemporaryDirectory() as scratch, PostgresServer(durable=True) as database:
        root = Path(scratch)
        sqlite = f"sqlite:///{root / 'inserts.sqlite3'}"
        report["inserts"] = {
            "sqlite": inserts(sqlite, args.inserts),
            "postgresql": inserts(database.url, args.inserts),
        }
        print(json.dumps(report["inserts"]), flush=True)
        writers = {
            "not_kept": None,
            "sqlite": EventWriter(EventStore(f"sqlite:///{root / 'frames.sqlite3'}")),
            "postgresql": EventWriter(EventStore(database.url)),
        }
        report["per_frame"] = per_frame(writers, args.frames, args.rounds)
        for writer in writers.values():
            if writer is not None:
                writer.close()
        print(json.dumps(report["per_frame"]), flush=True)

        now = time.time()
        data = root / "data"
        filled = fill(EventStore(f"sqlite:///{data / 'events.sqlite3'}"), args.events, now)
        print(f"sqlite: {filled}", flush=True)
        sqlite_queries = served({"data_dir": str(data)}, now, args.repeat)
        pg_url = database.url.rsplit("/", 1)[0] + "/postgres"
        pg_filled = fill(EventStore(pg_url), args.events, now)
        print(f"postgresql: {pg_filled}", flush=True)
        pg_queries = served({"data_dir": str(root / "pg-data"), "events_url": pg_url}, now,
                            args.repeat)  # fmt: skip
        report["queries"] = {
            "sqlite": {**filled, "ms": sqlite_queries},
            "postgresql": {**pg_filled, "ms": pg_queries},
        }
    write_result("events", report)


if __name__ == "__main__":
    main()
