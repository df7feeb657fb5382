"""``visionstream serve`` with tracemalloc: SIGUSR1 writes a snapshot to the path in
``VISIONSTREAM_SNAPSHOT`` and says so on stdout. For ``benchmarks churn --tracemalloc``."""

from __future__ import annotations

import gc
import os
import signal
import sys
import tracemalloc

from streaming.cli import main


def _dump(signum: int, frame: object) -> None:
    gc.collect()  # what is left is alive, not garbage waiting for the cyclic collector
    path = os.environ["VISIONSTREAM_SNAPSHOT"]
    tracemalloc.take_snapshot().dump(path + ".tmp")
    os.replace(path + ".tmp", path)
    print("tracemalloc snapshot written", flush=True)


if __name__ == "__main__":
    tracemalloc.start(int(os.environ.get("VISIONSTREAM_TRACE_FRAMES", "12")))
    signal.signal(signal.SIGUSR1, _dump)
    sys.exit(main(["serve", *sys.argv[1:]]))
