"""Search by meaning: what ``GET /events?about=`` costs the store, without the model.

N described events, each with a unit vector of D dimensions (random: the scan's cost does
not depend on what the vectors say), in SQLite compared by sqlite-vec's
``vec_distance_cosine`` (pysqlite3's SQLite), in SQLite compared in numpy (where sqlite-vec
cannot load), and in PostgreSQL (Debian's) compared in numpy, read in chunks. Per store:
the 20 nearest of every vector (p50/p95 of ``--queries`` queries, each a fresh vector), of
the newest ``VISIONSTREAM_EVENTS_SEARCH_MAX_COMPARED`` (20,000, the bound a
server's search runs under), and of the last hour's only (``since``: narrowed by the index).

Run: ``python -m benchmarks search [--events 100000 --dimensions 768 --queries 20]``;
results go to results/search.json.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from benchmarks.common import percentiles, write_result
from streaming.events import EventRecord
from streaming.events.schema import event_vectors, events
from streaming.events.store import EventFilter, EventStore
from streaming.events.vectors import stored
from streaming.language.embeddings import Embedding, unit
from tests.support.postgres import PostgresServer

T0 = 1_790_000_000.0
BATCH = 5000


def filled(
    url: str, count: int, dimensions: int, rng: np.random.Generator, sqlite_vec: bool
) -> EventStore:
    """A store of ``count`` events a second apart, each described and embedded."""
    store = EventStore(url, sqlite_vec=sqlite_vec)
    store.migrate()
    for start in range(0, count, BATCH):
        store.insert(
            [
                EventRecord("line_crossing", "gate", "0", "counter", at=T0 + i, class_name="person")
                for i in range(start, min(start + BATCH, count))
            ]
        )
    with store.engine.begin() as connection:
        ids = connection.execute(events.select().with_only_columns(events.c.id)).scalars().all()
        for start in range(0, len(ids), BATCH):
            rows = [
                {
                    "event_id": event_id,
                    "model": "m",
                    "vector": stored(unit(rng.standard_normal(dimensions))),
                }
                for event_id in ids[start : start + BATCH]
            ]
            connection.execute(event_vectors.insert(), rows)
    return store


def timed(store: EventStore, where: EventFilter, queries: list[Embedding], most: int) -> dict:
    store.nearest(where, queries[0], 20, most=most)  # warm: the cache, as a server's would be
    took = []
    for query in queries:
        started = time.perf_counter()
        found = store.nearest(where, query, 20, most=most)
        took.append((time.perf_counter() - started) * 1000)
        assert found
    return percentiles(took, (50, 95), 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks search", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--dimensions", type=int, default=768)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--most", type=int, default=20_000, help="the server's bound")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(7)
    queries = [
        Embedding("m", unit(rng.standard_normal(args.dimensions))) for _ in range(args.queries)
    ]
    last_hour = EventFilter(since_ms=round((T0 + args.events - 3600) * 1000))
    report: dict = {"events": args.events, "dimensions": args.dimensions, "stores": {}}
    with tempfile.TemporaryDirectory() as scratch, PostgresServer() as database:
        stores = (
            ("sqlite-vec", f"sqlite:///{scratch}/a.sqlite3", True),
            ("sqlite-numpy", f"sqlite:///{scratch}/b.sqlite3", False),
            ("postgresql-numpy", database.url, True),
        )
        for name, url, sqlite_vec in stores:
            started = time.perf_counter()
            store = filled(url, args.events, args.dimensions, rng, sqlite_vec)
            loaded = time.perf_counter() - started
            report["stores"][name] = {
                "load_s": round(loaded, 1),
                "nearest_20_of_all_ms": timed(store, EventFilter(), queries, args.events),
                f"nearest_20_of_newest_{args.most}_ms": timed(
                    store, EventFilter(), queries, args.most
                ),
                "nearest_20_of_last_hour_ms": timed(store, last_hour, queries, args.events),
            }
            store.close()
            print(name, report["stores"][name], flush=True)
    print(write_result("search", report))


if __name__ == "__main__":
    main()
