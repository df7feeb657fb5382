"""Every-frame throughput: the upload path and a client track, each against decode + the
default detection workflow alone on the same frames, measured right before it, in one run.

A 300-frame 640x480 H.264 clip (Debian's darknet photos, panned) is processed every frame,
non-realtime with ACKs: uploaded over ``video_upload`` (the server decodes the file), and sent
as a VP8 client track read from the same file as fast as the ACK window allows. Processed fps
is frames / (session start to completion message); the ratio divides it by the in-process
baseline (PyAV decode + workflow, one frame after another, no WebRTC).

Run: ``unshare --net sh -c 'ip link set lo up && python -m benchmarks throughput'``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import write_result
from benchmarks.upload import baseline, make_clip, measure
from streaming.config import Settings
from streaming.inference.registry import ModelRegistry
from streaming.protocol.workflows import object_detection
from streaming.rtc.ice import restrict_host_addresses
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext

PATHS = ["ours, predictions only", "ours, client track, every frame"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="benchmarks throughput", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    restrict_host_addresses(["127.0.0.1"])
    registry = ModelRegistry(Settings())
    workflow = compile_workflow(parse_spec(object_detection()), BuildContext(registry))
    with tempfile.TemporaryDirectory() as folder:
        clip, content = make_clip(Path(folder) / "clip.mp4", args.frames)
        baseline(clip, workflow)  # warm-up: model, page cache
        runs = measure({}, PATHS, clip, workflow, args.rounds)
    labels = {PATHS[0]: "upload", PATHS[1]: "client track"}
    summary = {
        labels[name]: {
            "fps": round(float(np.median([r["fps"] for r in results])), 1),
            "baseline_fps": round(float(np.median([r["baseline_fps"] for r in results])), 1),
            "ratio": round(float(np.median([r["ratio"] for r in results])), 3),
        }
        for name, results in runs.items()
    }
    print(json.dumps(summary, indent=2))
    write_result("throughput", {"clip": {"frames": args.frames, "size": [640, 480],
                                         "content": content},
                                "median": summary, "runs": runs})  # fmt: skip


if __name__ == "__main__":
    main()
