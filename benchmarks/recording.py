"""What recording a camera costs: the RTSP test camera (GStreamer, H.264 640x480 at 30 fps, a
keyframe each second, 2 Mbit/s) read by a ``LiveSource`` in this process, with and without a
``SegmentRecorder`` on its packets (remux: the camera's H.264 written as it came). Rounds
alternate the two; the figures are this process's CPU (percent of one core) in each, their
difference, and the recorder's own thread.

Run: ``python -m benchmarks recording [--seconds 20 --rounds 3]``; results go to
results/recording.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import write_result
from sinks.recording.recorder import RecordingPolicy, SegmentRecorder
from sinks.recording.segments import segments
from sources.live import LiveSource
from tests.support.camera import RTSPCamera


def thread_cpu(native_id: int | None) -> float:
    """CPU seconds a thread of this process has used (Linux: /proc)."""
    if native_id is None:
        return 0.0
    fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(url: str, seconds: float, directory: Path | None) -> dict:
    live = LiveSource(url)
    recorder = None
    if directory is not None:
        recorder = SegmentRecorder(directory, RecordingPolicy(segment_s=10, min_free_bytes=0))
        live.add_packet_sink(recorder)
    live.read()  # connected, and the first frame decoded
    # The process (the camera's feeder is in it too, the same in both runs: the difference
    # is the recording's), and the recorder's own thread.
    writer = recorder.thread_id if recorder is not None else None
    cpu, own = time.process_time(), thread_cpu(writer)
    wall, frames = time.perf_counter(), 0
    while time.perf_counter() - wall < seconds:
        if live.read() is None:
            break
        frames += 1
    cpu, own = time.process_time() - cpu, thread_cpu(writer) - own
    wall = time.perf_counter() - wall
    if recorder is not None:
        live.remove_packet_sink(recorder)
        recorder.close()
    live.close()
    written = sum(s.size for s in segments(directory)) if directory is not None else 0
    return {"cpu_percent": round(100 * cpu / wall, 2), "fps": round(frames / wall, 1),
            "recorder_thread_cpu_percent": round(100 * own / wall, 2),
            "megabytes_per_minute": round(written / wall * 60 / 1e6, 2)}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="benchmarks recording", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    rows: dict[str, list[dict]] = {"reading": [], "reading_and_recording": []}
    with tempfile.TemporaryDirectory() as scratch, RTSPCamera(640, 480, fps=30) as camera:
        for round_ in range(args.rounds):
            rows["reading"].append(run(camera.url, args.seconds, None))
            target = Path(scratch) / f"round{round_}"
            rows["reading_and_recording"].append(run(camera.url, args.seconds, target))
            print(json.dumps({k: v[-1] for k, v in rows.items()}), flush=True)
    summary = {
        name: {"cpu_percent_median": statistics.median(r["cpu_percent"] for r in runs),
               "recorder_thread_cpu_percent_median": statistics.median(
                   r["recorder_thread_cpu_percent"] for r in runs),
               "fps_median": statistics.median(r["fps"] for r in runs)}
        for name, runs in rows.items()
    }  # fmt: skip
    base = summary["reading"]["cpu_percent_median"]
    added = summary["reading_and_recording"]["cpu_percent_median"] - base
    summary["recording_adds_cpu_percent"] = round(added, 2)
    print(json.dumps(summary), flush=True)
    write_result("recording", {"camera": "640x480 H.264 30 fps, 2 Mbit/s", "seconds": args.seconds,
                               "rounds": rows, "summary": summary})  # fmt: skip


if __name__ == "__main__":
    main()
