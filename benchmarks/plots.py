"""PNG plots from the JSON results: the latency CDF (latency.json), delivered fps and p95
latency against concurrent sessions (concurrency.json), and ours against the reference server
(reference.json), CPU per camera and the slowest camera's rate against cameras
(cameras_per_box.json). Run: ``python -m benchmarks plots``; writes results/*.png."""

from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")  # files only, no screen
import matplotlib.pyplot as plt
import numpy as np

from benchmarks.common import RESULTS


def _load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def latency_cdf(data: dict) -> str:
    figure, axes = plt.subplots(figsize=(7, 4.2))
    for name, run in data["runs"].items():
        samples = np.sort(run["samples_ms"])
        axes.plot(samples, np.arange(1, len(samples) + 1) / len(samples),
                  label=f"{name}: p50 {run['latency_ms']['p50']} ms")  # fmt: skip
    axes.set(xlabel="glass-to-glass latency (ms)", ylabel="fraction of frames",
             title="640x480 @ 30 fps, realtime, one session")  # fmt: skip
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(RESULTS / "latency-cdf.png", dpi=110)
    return "latency-cdf.png"


def concurrency(data: dict) -> str:
    steps = data["steps"]
    n = [s["sessions"] for s in steps]
    figure, (fps_axes, lat_axes) = plt.subplots(1, 2, figsize=(10, 4))
    fps_axes.plot(n, [min(p["fps"] for p in s["per_session"]) for s in steps], "o-",
                  label="slowest session")  # fmt: skip
    fps_axes.plot(n, [np.mean([p["fps"] for p in s["per_session"]]) for s in steps], "s--",
                  label="mean")  # fmt: skip
    fps_axes.axhline(0.9 * data["fps_each"], color="grey", ls=":", label="90 % of input")
    fps_axes.set(xlabel="concurrent sessions", ylabel="delivered fps per session")
    lat_axes.plot(n, [s["latency_ms_p95_worst"] for s in steps], "o-", label="worst p95")
    lat_axes.axhline(250, color="grey", ls=":", label="250 ms")
    lat_axes.set(xlabel="concurrent sessions", ylabel="glass-to-glass (ms)")
    for axes in (fps_axes, lat_axes):
        axes.set_xticks(n)
        axes.grid(alpha=0.3)
        axes.legend()
    figure.suptitle(f"640x480 @ {data['fps_each']:g} fps each, default model, realtime")
    figure.tight_layout()
    figure.savefig(RESULTS / "concurrency.png", dpi=110)
    return "concurrency.png"


def reference(data: dict) -> str:
    figure, (fps_axes, lat_axes, setup_axes) = plt.subplots(1, 3, figsize=(13, 4))
    for (name, server), color in zip(data["servers"].items(), ("C0", "C1"), strict=False):
        steps = server["steps"]
        n = [s["sessions"] for s in steps]
        fps_axes.plot(n, [min(s["fps_each"]) for s in steps], "o-", color=color, label=name)
        lat_axes.plot(n, [s["latency_ms_p95_worst"] for s in steps], "o-", color=color,
                      label=f"{name} worst p95")  # fmt: skip
        lat_axes.plot(n, [s["latency_ms_p50_median"] for s in steps], "s--", color=color,
                      label=f"{name} p50")  # fmt: skip
        setup_axes.plot(n, [s["setup_s"]["max"] for s in steps], "o-", color=color, label=name)
    fps_axes.set(xlabel="concurrent sessions", ylabel="delivered fps (slowest session)")
    lat_axes.set(xlabel="concurrent sessions", ylabel="glass-to-glass (ms)")
    setup_axes.set(xlabel="concurrent sessions", ylabel="setup, slowest (s)", yscale="log")
    for axes in (fps_axes, lat_axes, setup_axes):
        axes.grid(alpha=0.3)
        axes.legend()
    figure.suptitle("blur workflow, 640x480 @ 30 fps each, inference-sdk ManualSource client")
    figure.tight_layout()
    figure.savefig(RESULTS / "reference.png", dpi=110)
    return "reference.png"


def cameras_per_box(data: dict) -> str:
    """CPU per camera and the slowest camera's rate against cameras, each variant's mean over
    the rounds (with sub-streams, where measured)."""
    variants: dict[str, dict[int, list[dict]]] = {}
    for measured in data["rounds"]:
        for name in ("before", "gating_off", "gating_on"):
            for run in measured.get(name, []):
                variants.setdefault(name, {}).setdefault(run["cameras"], []).append(run)
    subs = _load("cameras_per_box_substreams")
    if subs:
        for run in subs["runs"]:
            variants.setdefault("sub_streams", {}).setdefault(run["cameras"], []).append(run)
    figure, (cpu_axes, fps_axes) = plt.subplots(1, 2, figsize=(11, 4))
    for name, runs in variants.items():
        n = sorted(runs)
        cpu_axes.plot(n, [np.mean([r["cpu_per_camera_percent"] for r in runs[c]]) for c in n],
                      "o-", label=name)  # fmt: skip
        fps_axes.plot(n, [np.mean([r["slowest_fps"] for r in runs[c]]) for c in n], "o-",
                      label=name)  # fmt: skip
    fps_axes.axhline(4.9, color="grey", ls=":", label="4.9 results/s")
    cpu_axes.set(xlabel="cameras", ylabel="server CPU per camera (% of a core)")
    fps_axes.set(xlabel="cameras", ylabel="slowest camera's results/s")
    for axes in (cpu_axes, fps_axes):
        axes.grid(alpha=0.3)
        axes.legend()
    figure.suptitle("720p 15 fps cameras, a pipeline each at max_fps 5, default detector")
    figure.tight_layout()
    figure.savefig(RESULTS / "cameras_per_box.png", dpi=110)
    return "cameras_per_box.png"


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(
        prog="benchmarks plots", description=__doc__.splitlines()[0]
    ).parse_args(argv)
    for name, plot in (("latency", latency_cdf), ("concurrency", concurrency),
                       ("reference", reference), ("cameras_per_box", cameras_per_box)):  # fmt: skip
        data = _load(name)
        print(f"{name}: {plot(data)}" if data else f"{name}: no results/{name}.json yet")


if __name__ == "__main__":
    main()
