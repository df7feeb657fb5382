"""The browser page: time from clicking Start to the first annotated frame on screen, and the
page's own end-to-end latency reading, with the default model.

Debian's Chromium (Playwright, headless) opens `visionstream serve`'s page with a fake camera
looping a 640x480 photo (a person, a dog, a horse), clicks Start in webcam mode (realtime) and
reads ``window.visionstream``: ``stats.startToFirstFrameMs`` (click -> first frame presented by
the <video>, as requestVideoFrameCallback reports it) and ``latencies`` (for each result, its
arrival minus the moment its frame left the page, both on the page's clock: the encoded-frame
API records each frame's RTP timestamp, which the server returns as ``pts`` less a constant).
Each round is a fresh browser context; the first --skip results of a round (connection ramp-up)
are left out.

Run: ``unshare --net sh -c 'ip link set lo up && python benchmarks/browser.py'``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.browser import chromium  # noqa: E402
from tests.support.media import write_y4m  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402

PHOTO = Path.home() / ".cache/visionstream/test-data/usr/share/darknet/data/person.jpg"


def one_round(browser, url: str, results: int, skip: int) -> dict:
    context = browser.new_context(permissions=["camera"])
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_function("() => window.visionstream.stats.provider !== null")
        page.get_by_role("button", name="Start", exact=True).click()
        page.wait_for_function(
            f"() => window.visionstream.latencies.length >= {results + skip}", timeout=120_000
        )
        stats = page.evaluate("() => window.visionstream.stats")
        latencies = page.evaluate("() => window.visionstream.latencies.slice()")[skip:]
        page.get_by_role("button", name="Stop", exact=True).click()
    finally:
        context.close()
    return {
        "start_to_first_frame_ms": round(stats["startToFirstFrameMs"], 1),
        "latency_ms_p50": round(float(np.percentile(latencies, 50)), 1),
        "latency_ms_p95": round(float(np.percentile(latencies, 95)), 1),
        "latency_basis": stats["latencyBasis"],
        "fps_shown": round(stats["fps"], 1),
        "dropped": stats["dropped"],
        "results": len(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--results", type=int, default=150, help="latency readings per round")
    parser.add_argument("--skip", type=int, default=30, help="readings left out at the start")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/browser.json")
    args = parser.parse_args()

    scene = cv2.resize(cv2.imread(str(PHOTO)), (640, 480))
    server = ServerProcess()
    rounds = []
    try:
        server.wait_ready()
        with tempfile.TemporaryDirectory() as scratch:
            clip = write_y4m(Path(scratch) / "scene.y4m", [scene] * 10)
            with chromium(fake_camera=clip) as browser:
                for index in range(args.rounds):
                    rounds.append(one_round(browser, server.url + "/", args.results, args.skip))
                    print(f"round {index + 1}: {json.dumps(rounds[-1])}", flush=True)
    finally:
        server.stop()

    def median(key: str) -> float:
        return round(float(np.median([r[key] for r in rounds])), 1)

    summary = {
        key: median(key)
        for key in ("start_to_first_frame_ms", "latency_ms_p50", "latency_ms_p95", "fps_shown")
    }
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}",
        "date": datetime.now().date().isoformat(),
        "source": "Chromium fake camera, 640x480 photo, webcam mode, realtime, default model",
        "median_of_rounds": summary,
        "rounds": rounds,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
