"""inference-sdk's HTTP calls on the default model: ``POST /infer/object_detection`` and
``POST /workflows/run`` (a one-step detection workflow), beside the same model over the V2
route (a preprocessed tensor in, raw outputs back: the model and nothing else) and the model
called in this process (preprocess, inference, decode: what an HTTP call costs beyond).

Requests per second and latency p50/p95 at 1, 4 and 16 concurrent callers (a thread each,
one keep-alive connection each), a 640x480 JPEG of person.jpg. Rounds alternate the routes
so a shared machine's noise spreads over all of them; figures pool the rounds.

Run: ``python -m benchmarks http-api [--seconds 6 --rounds 2]``; results go to
results/http-api.json.
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import threading
import time
from collections.abc import Callable

import cv2
import httpx
import numpy as np

from benchmarks.common import percentiles, write_result
from streaming.config import Settings
from streaming.inference.decoders import DecodeOptions
from streaming.inference.preprocess import prepare
from streaming.inference.registry import ModelRegistry
from tests.conftest import DETECT_SPEC, PHOTO_DIRS, load_photo
from tests.support.server import ServerProcess

MODEL = "yolov3-tiny-416"
DETECT_ONLY = {
    **DETECT_SPEC,
    "steps": DETECT_SPEC["steps"][:1],
    "outputs": DETECT_SPEC["outputs"][:1],
}
"""The suite's detection workflow, its model step and predictions alone."""

Call = Callable[[httpx.Client], None]


def _photo() -> np.ndarray:
    from pathlib import Path

    for candidate in PHOTO_DIRS:
        if candidate and (Path(candidate) / "person.jpg").is_file():
            return load_photo(Path(candidate), "person.jpg")
    raise SystemExit("Debian darknet photos not found: run tests/install.sh first")


def _calls(url: str, image: np.ndarray, registry: ModelRegistry) -> dict[str, Call]:
    jpeg = base64.b64encode(cv2.imencode(".jpg", image)[1].tobytes()).decode()
    infer = {"model_id": MODEL, "image": {"type": "base64", "value": jpeg}}
    workflow = {
        "specification": DETECT_ONLY,
        "inputs": {"image": {"type": "base64", "value": jpeg}},
    }
    model = registry.get(MODEL)
    blob, _ = prepare(image, model.manifest)
    tensor = np.ascontiguousarray(blob if blob.ndim == 4 else blob[None], np.float32)
    metadata = httpx.get(f"{url}/v2/models/{MODEL}", timeout=30).json()
    header = json.dumps({
        "inputs": [{"name": metadata["inputs"][0]["name"], "shape": list(tensor.shape),
                    "datatype": "FP32", "parameters": {"binary_data_size": tensor.nbytes}}],
        "outputs": [{"name": o["name"], "parameters": {"binary_data": True}}
                    for o in metadata["outputs"]],
    }).encode()  # fmt: skip
    v2_body = header + tensor.tobytes()
    v2_headers = {"Inference-Header-Content-Length": str(len(header)),
                  "Content-Type": "application/octet-stream"}  # fmt: skip

    def post(path: str, **kwargs) -> Call:
        def call(client: httpx.Client) -> None:
            response = client.post(f"{url}{path}", timeout=60, **kwargs)
            response.raise_for_status()

        return call

    return {
        "infer": post("/infer/object_detection", json=infer),
        "workflows_run": post("/workflows/run", json=workflow),
        "v2_model_only": post(f"/v2/models/{MODEL}/infer", content=v2_body, headers=v2_headers),
    }


def _load(call: Call, callers: int, seconds: float) -> list[float]:
    """Latencies (ms) of every call ``callers`` threads made in ``seconds``."""
    latencies: list[float] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def caller() -> None:
        mine = []
        try:
            with httpx.Client() as client:
                call(client)  # the connection, outside the measure
                while time.perf_counter() < deadline:
                    started = time.perf_counter()
                    call(client)
                    mine.append((time.perf_counter() - started) * 1000)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return latencies


def _model_alone(registry: ModelRegistry, image: np.ndarray, runs: int) -> list[float]:
    model = registry.get(MODEL)
    options = DecodeOptions(confidence=0.4, iou_threshold=0.3)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        model.detect(image, options)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks http-api", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="per route, callers, round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--callers", default="1,4,16")
    args = parser.parse_args(argv)
    callers = [int(c) for c in args.callers.split(",")]
    image = _photo()
    registry = ModelRegistry(Settings())
    server = ServerProcess()
    samples: dict[str, dict[int, list[float]]] = {}
    rps: dict[str, dict[int, list[float]]] = {}
    alone: list[float] = []
    try:
        server.wait_ready()
        calls = _calls(server.url, image, registry)
        names = list(calls)
        for round_ in range(args.rounds):
            alone += _model_alone(registry, image, 50)  # the server idle meanwhile
            order = names[round_ % len(names) :] + names[: round_ % len(names)]
            for count in callers:
                for name in order:
                    call = calls[name]
                    latencies = _load(call, count, args.seconds)
                    samples.setdefault(name, {}).setdefault(count, []).extend(latencies)
                    rps.setdefault(name, {}).setdefault(count, []).append(
                        len(latencies) / args.seconds
                    )
    finally:
        server.stop()
        registry.close()
    routes = {
        name: {
            str(count): {
                "requests_per_s": round(statistics.mean(rps[name][count]), 1),
                "latency_ms": percentiles(by_count[count], (50, 95)),
                "requests": len(by_count[count]),
            }
            for count in callers
        }
        for name, by_count in samples.items()
    }
    model_ms = percentiles(alone, (50, 95))
    single = {name: routes[name]["1"]["latency_ms"]["p50"] for name in routes}
    report = {
        "image": "person.jpg as a 640x480 JPEG, base64",
        "model_alone_ms": model_ms,
        "routes": routes,
        "overhead_p50_ms_at_1_caller": {
            name: round(single[name] - model_ms["p50"], 1) for name in ("infer", "workflows_run")
        },
    }
    print(json.dumps(report, indent=2))
    write_result("http-api", report)


if __name__ == "__main__":
    main()
