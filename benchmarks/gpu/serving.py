"""The lent GPU machine's ``batcher`` step: our ``DynamicBatcher`` (the server's, unchanged)
in front of the default model replayed as fp16 CUDA graphs, one per batch size, fed by many
session threads at once, each with its own single-frame blob from host memory, as the
server's workflow threads feed it. Against the same session's best (a batch of 32 handed to
it directly), it answers the GPU target the CPU machines could not: does the batcher reach
0.8 of the runtime's best throughput, and at what latency."""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.batcher_policy import load
from streaming.inference.batcher import DynamicBatcher
from streaming.inference.preprocess import Normalization, letterboxed_canvas
from streaming.inference.session import InferenceSession, TensorSpec

CLIENTS = (1, 8, 16, 32, 64)
FRAME = (480, 640)
FRAME_1 = np.zeros((1, *FRAME, 3), np.uint8)  # the shape a frame runner's session declares
SMOKE_CLIENTS = (1, 2)
SETTINGS = {  # (max batch, delay ms, workers); the server's GPU default is 16 x 2 ms, 2 workers
    "off": (1, 0.0, 1),
    "16 x 2 ms, 2 workers": (16, 2.0, 2),
    # Since 2026-11-27 (eighth session) a batch runs at once on an idle device and gathers
    # for up to the delay only while another runs; 0 ms: a batch is only what queued while
    # the device was busy (the next lent run's question: which of the two, at 64 sessions).
    "16 x 0 ms, 2 workers": (16, 0.0, 2),
}
# measured on the H100 too (2026-11-27): 32 x 4 ms with 1 worker, 0.28-0.36 of the best; 32 x 2
# ms with 2 workers, no better than 16 (0.49-0.59 at 64 sessions)


class RunSession(InferenceSession):
    """Any ``run`` callable as an inference session (the batcher's one dependency)."""

    backend = "probe"

    def __init__(self, run: Callable[[np.ndarray], list[np.ndarray]], sample: np.ndarray) -> None:
        self._run = run
        self.inputs = [TensorSpec("images", "FP32", (-1, *sample.shape[1:]))]
        self.outputs = [TensorSpec("output", "FP32", (-1, -1, -1))]

    @property
    def providers(self) -> list[str]:
        return ["probe"]

    def run(self, batch: np.ndarray) -> list[np.ndarray]:
        return self._run(batch)


def frame_runner(torch: Any, module: Any, sizes: tuple[int, ...], size: int) -> Callable:
    """fp16 CUDA graphs of ``module``, one per batch size in ``sizes`` (a batch runs on the
    smallest that holds it), taking 640x480 BGR frames (uint8, a quarter of a float blob's
    bytes) and letterboxing them on the GPU inside the graph: what a torch backend could take
    instead of float blobs. Serialised: the graphs' static buffers are shared."""
    from benchmarks.gpu.probe import captured, letterboxed

    graphs = {}
    for batch in sizes:
        frames = torch.zeros(batch, *FRAME, 3, device="cuda", dtype=torch.uint8)
        forward = letterboxed(torch, module, frames, size)  # its buffers outside inference mode
        with torch.inference_mode():
            graphs[batch] = (frames, *captured(torch, forward))
    lock = threading.Lock()

    def run(batch: np.ndarray) -> list[np.ndarray]:
        n = len(batch)
        frames, graph, out = graphs[next(b for b in sizes if b >= n)]
        with lock:
            frames[:n].copy_(torch.from_numpy(batch))
            graph.replay()
            return [out[:n].float().cpu().numpy()]

    return run


def best(session: InferenceSession, batch: np.ndarray, seconds: float) -> float:
    """Frames/s of ``batch`` handed to the session directly, back to back."""
    session.run(batch)
    calls, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        session.run(batch)
        calls += 1
    return calls * len(batch) / (time.perf_counter() - began)


def measure(
    session: InferenceSession, args: argparse.Namespace, clients: tuple[int, ...],
    sample: np.ndarray, write: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:  # fmt: skip
    """The session's best at each batcher size (a full batch of ``sample`` handed over
    directly), then each batcher setting under each number of clients, and each run's share
    of the best at its size."""
    result: dict[str, Any] = {"best_frames_per_s": {}}
    for label, (max_batch, delay_ms, workers) in SETTINGS.items():
        size = min(max_batch, max(args.batches))
        if size not in result["best_frames_per_s"]:
            full = np.repeat(sample, size, axis=0)
            result["best_frames_per_s"][size] = round(best(session, full, args.budget), 1)
        top = result["best_frames_per_s"][size]
        for rows in range(1, size + 1):  # every graph recorded before the clock starts
            session.run(np.repeat(sample, rows, axis=0))
        batcher = DynamicBatcher(session, size, delay_ms, workers, name=label)
        try:
            for count in clients:
                run = load(batcher, count, args.budget, paced=False, sample=sample)
                run["of_best"] = round(run["frames_per_s"] / top, 3)
                result.setdefault(label, {})[count] = run
                write(result)
        finally:
            batcher.close()
    return result


DEFAULT_NORMALIZATION = Normalization(swap_rb=True, scale=1 / 255)  # the default model's


def backend_session(args: argparse.Namespace) -> Any:
    """Our torch backend (``streaming/inference/torch_session.py``) on the bundle's model, as
    the server opens it: on CUDA, fp16, a CUDA graph per batch shape, taking the resized
    uint8 frames the server hands it (``takes_canvases``) as well as float blobs."""
    from benchmarks.gpu.probe import load_model
    from streaming.inference.torch_session import TorchSession

    path = Path(args.work) / "model.onnx"
    if not path.exists():
        path.write_bytes(load_model(args.bundle).SerializeToString())
    session = TorchSession(path)
    session.takes_canvases(DEFAULT_NORMALIZATION)
    return session


def step_backend(args: argparse.Namespace) -> dict[str, Any]:
    """Our torch backend against ONNX Runtime (CPU) on the photos: what it reports itself as,
    and how far its outputs are (scores, box pixels of 416)."""
    import cv2
    import onnxruntime as ort

    from benchmarks.gpu.probe import INPUT, cuda_or_none, load_model, photos

    if cuda_or_none() is None:
        return {"skipped": "no GPU"}
    session = backend_session(args)
    model = load_model(args.bundle).SerializeToString()
    reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    result: dict[str, Any] = {"device": session.device, "providers": session.providers}
    for stem, blob in photos(args.bundle).items():
        image = cv2.imread(str(args.bundle / "photos" / f"{stem}.jpg"))
        canvas = letterboxed_canvas(image, INPUT, INPUT)[0][None]
        want = reference.run(None, {"images": blob})[0]
        result[stem] = {}
        for label, given in (("blob", blob), ("canvas", canvas)):  # what the server sends
            got = session.run(given)[0]
            scores = np.abs(want[..., 4:5] * want[..., 5:] - got[..., 4:5] * got[..., 5:]).max()
            boxes = np.abs(want[..., :4] - got[..., :4]).max()
            result[stem][label] = {"max_score_diff": float(scores),
                                   "max_box_diff_px": float(boxes)}  # fmt: skip
    session.close()
    return result


def step_batcher(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.gpu.probe import INPUT, cuda_or_none, torch_module, write

    torch = cuda_or_none()
    if torch is None:
        return {"skipped": "no GPU"}
    torch.backends.cudnn.benchmark = True
    module = torch_module(args, torch).half()
    clients = SMOKE_CLIENTS if args.smoke else CLIENTS
    rng = np.random.default_rng(0)
    blob = rng.random((1, 3, INPUT, INPUT), dtype=np.float32)
    sessions = {  # what the server hands our backend; 640x480 frames letterboxed on the GPU
        "uint8 canvases, our torch backend": (
            lambda: backend_session(args),
            rng.integers(0, 255, (1, INPUT, INPUT, 3), dtype=np.uint8),
        ),
        "f32 blobs, our torch backend": (lambda: backend_session(args), blob),
        "uint8 frames": (
            lambda: RunSession(frame_runner(torch, module, tuple(args.batches), INPUT), FRAME_1),
            rng.integers(0, 255, (1, *FRAME, 3), dtype=np.uint8),
        ),
    }
    result: dict[str, Any] = {}
    for label, (opened, sample) in sessions.items():
        session = opened()
        result[label] = measure(
            session, args, clients, sample,
            lambda r, label=label: write(args.out, "batcher", {**result, label: r}),
        )  # fmt: skip
    return result
