"""The lent GPU machine's ``server`` step: the whole server (``visionstream serve``, the torch
backend on CUDA) under as many 640x480@30 WebRTC sessions as the machine's cores can feed,
each session's delivered fps and glass-to-glass p95 (``benchmarks.concurrency.sessions``:
our client, a live stamped feed, the default detector workflow, annotated video back).

The server's packages do not fit in one call with PyAV and the model (scipy alone, which
supervision imports, is 35 MB), so this step runs in a second call on the same warm machine,
carrying ``benchmarks/gpu/bundle-server`` (``python -m benchmarks gpu-bundle`` builds both):
the first call leaves the model and PyAV there. Without the server's packages it says so and
ends. Client processes share the machine with the server (as a camera box's senders would
not): a session's client costs about what the server spends on it, so the figures are
"sessions these 16 cores carry, clients included".

``--smoke`` (CI, a CPU): one session for two seconds on ONNX Runtime."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

SESSIONS = (4, 8, 16, 24, 32)
SMOKE_SESSIONS = (1,)
FPS = 30.0
PER_CLIENT = 4  # sessions per client process: one asyncio loop, one core's worth at 30 fps
MISSING = "the server's packages are not installed here: carry benchmarks/gpu/bundle-server"
FIRST_CALL = ("the first call's model and PyAV are not here (a fresh machine?): run the first "
              "call, carrying benchmarks/gpu/bundle, then this one at once")  # fmt: skip


def models_dir(bundle: Path, work: Path) -> Path:
    """The default model as the server finds it: its manifest and the fp32 graph (widened
    from the bundle's fp16 weights), without its 16:9 variant (a CPU optimisation the bundle
    does not carry; ``input_variants`` is off)."""
    import onnx

    from benchmarks.gpu.probe import load_model

    root = work / "models"
    target = root / "yolov3-tiny-416"
    if not (target / "model.onnx").exists():
        target.mkdir(parents=True, exist_ok=True)
        onnx.save(load_model(bundle), str(target / "model.onnx.part"))
        (target / "model.onnx.part").replace(target / "model.onnx")
    shutil.copy(bundle / "manifest.json", target / "manifest.json")
    return root


def clients(url: str, count: int, seconds: float, pid: int) -> list[dict[str, Any]]:
    """``count`` sessions from client processes of ``PER_CLIENT`` each, measured over
    ``seconds`` once each process has all its sessions' first frames back."""
    sizes = [min(PER_CLIENT, count - start) for start in range(0, count, PER_CLIENT)]
    command = [sys.executable, "-m", "benchmarks.gpu.server_run", "client", url]
    argv = [[*command, str(size), str(seconds), str(pid)] for size in sizes]
    processes = [subprocess.Popen(args, stdout=subprocess.PIPE, text=True) for args in argv]
    reports = []
    for process in processes:
        out, _ = process.communicate(timeout=180)
        if process.returncode != 0:
            raise RuntimeError(f"a client process ended with status {process.returncode}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def measure(url: str, count: int, seconds: float, pid: int) -> dict[str, Any]:
    from benchmarks.common import percentiles

    reports = clients(url, count, seconds, pid)
    per_session = [s for r in reports for s in r["per_session"]]
    fps = [s["fps"] for s in per_session]
    p95 = [s["latency_ms"]["p95"] or 1e9 for s in per_session]
    return {
        "sessions": count,
        "fps_per_session": {"min": min(fps), "mean": round(sum(fps) / len(fps), 1)},
        "p95_ms_per_session": {"worst": max(p95), **percentiles(p95, (50,))},
        "delivered_min": round(min(fps) / FPS, 3),
        "server_cpu_percent": max(r["server_cpu_percent"] for r in reports),
        "server_rss_mb": max(r["server_rss_mb"] for r in reports),
    }


def step_server(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.gpu.probe import cuda_or_none, write

    if not (args.bundle / "model_fp16w.onnx").exists():
        return {"skipped": FIRST_CALL}
    try:
        import streaming.server.app  # noqa: F401  (the server's packages, all of them)
        from tests.support.server import ServerProcess
    except ImportError as exc:
        return {"skipped": f"{FIRST_CALL if exc.name == 'av' else MISSING} ({exc})"}
    gpu = cuda_or_none() is not None
    settings = {
        "models_dir": str(models_dir(args.bundle, Path(args.work))),
        "inference_backend": "torch" if gpu else "onnxruntime",
        "input_variants": "false",
        "max_sessions": "64",
        "max_sessions_per_address": "0",
    }
    result: dict[str, Any] = {"backend": settings["inference_backend"], "fps_each": FPS,
                              "size": [640, 480], "steps": []}  # fmt: skip
    server = ServerProcess(**settings)
    try:
        server.wait_ready(timeout=180)
        seconds = 2.0 if args.smoke else 10.0
        for count in SMOKE_SESSIONS if args.smoke else SESSIONS:
            result["steps"].append(measure(server.url, count, seconds, server.process.pid))
            write(args.out, "server", result)
            if result["steps"][-1]["delivered_min"] < 0.5:
                break  # past what the machine carries: more sessions only take longer
        # What the model really ran on (backend, device and precision), as the server says
        result["model_loaded"] = [line for line in server.get("/metrics").text.splitlines()
                                  if line.startswith("visionstream_model_loaded{")]  # fmt: skip
    finally:
        server.stop()
    return result


def client_main(url: str, count: int, seconds: float, pid: int) -> None:
    from benchmarks.concurrency import sessions
    from streaming.rtc.ice import restrict_host_addresses

    restrict_host_addresses(["127.0.0.1"])
    report = asyncio.run(sessions(url, count, FPS, seconds, pid))
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["client"]:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        url, count, seconds, pid = sys.argv[2:6]
        client_main(url, int(count), float(seconds), int(pid))
