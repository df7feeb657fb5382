"""One step of the lent GPU machine's run (``bash benchmarks/gpu/run.sh``), a process each,
so that a step that hangs or dies costs only itself: every step writes its JSON under the
output folder as soon as it ends, and a run cut short still returns what it measured.

Standalone on purpose: the machine has torch, onnxruntime (CPU), onnx, numpy and OpenCV but
none of the server's packages, so this reads the bundle's model itself and imports only the
parts of ours that need nothing more: ``letterbox`` and ``sources.demuxing`` (PyAV from the
bundle). ``run.sh`` puts the repository on the path. Without CUDA (``--smoke``
on a CPU machine) each GPU step writes ``{"skipped": "no GPU"}`` and ends."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

BATCHES = (1, 2, 4, 8, 16, 32)
SMOKE_BATCHES = (1, 2)
INPUT = 416


def write(out: Path, step: str, result: dict[str, Any]) -> None:
    """Into one file for the whole run, ``gpu-run.json`` (``{"steps": {step: result}}``): at
    most 8 files come back from the machine, and a run has more steps. The steps run one
    after another, so a read, update and rename is enough."""
    path = out / "gpu-run.json"
    run = json.loads(path.read_text()) if path.exists() else {"steps": {}}
    run["steps"][step] = result
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps(run, indent=1) + "\n")
    scratch.replace(path)
    print(f"[{step}] {json.dumps(result)[:1500]}", flush=True)


def timed(
    run: Callable[[], Any],
    budget_s: float,
    sync: Callable[[], None] = lambda: None,
    warmup: int = 3,
    most: int = 200,
) -> dict[str, float]:
    """Median and p90 of one call's wall time (ms), over as many calls as ``budget_s`` allows."""
    for _ in range(warmup):
        run()
    sync()
    times: list[float] = []
    end = time.perf_counter() + budget_s
    while len(times) < most and (len(times) < 5 or time.perf_counter() < end):
        start = time.perf_counter()
        run()
        sync()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {
        "median_ms": round(statistics.median(times), 3),
        "p90_ms": round(times[int(len(times) * 0.9) - 1 if len(times) > 1 else 0], 3),
        "calls": len(times),
    }


def load_model(bundle: Path) -> Any:
    """The default model as fp32 ONNX: the bundle stores its weights as fp16 (half the bytes
    to carry); they are widened back here, so every runtime gets the same fp32 graph."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(bundle / "model_fp16w.onnx"))
    for index, init in enumerate(model.graph.initializer):
        if init.data_type == onnx.TensorProto.FLOAT16:
            wide = numpy_helper.to_array(init).astype(np.float32)
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(wide, init.name))
    return model


def photos(bundle: Path) -> dict[str, np.ndarray]:
    """The darknet photos as the server prepares them (our ``letterbox``: grey 128, RGB, /255;
    it needs only OpenCV and numpy, both on the machine)."""
    import cv2

    from streaming.inference.preprocess import letterbox

    return {path.stem: letterbox(cv2.imread(str(path)), INPUT, INPUT)[0]
            for path in sorted((bundle / "photos").glob("*.jpg"))}  # fmt: skip


def top_detections(output: np.ndarray, names: list[str], threshold: float = 0.25) -> list:
    """(class, score) of the strongest box per class above ``threshold``, best first."""
    scores = output[:, 4:5] * output[:, 5:]
    best: dict[str, float] = {}
    for row in np.argwhere(scores > threshold):
        name, score = names[row[1]], float(scores[row[0], row[1]])
        best[name] = max(best.get(name, 0.0), score)
    return sorted(((n, round(s, 3)) for n, s in best.items()), key=lambda x: -x[1])


def cuda_or_none() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def step_env(args: argparse.Namespace) -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    try:
        smi = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,memory.total,driver_version,clocks.max.sm",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        info["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        info["nvidia_smi"] = f"unavailable: {exc}"
    import onnxruntime as ort

    info["onnxruntime"] = ort.__version__
    info["ort_providers"] = ort.get_available_providers()
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda
        info["cuda_device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        info["torch"] = None
    try:
        import av
        import av.codec.hwaccel

        info["pyav"] = av.__version__
        info["pyav_hwdevices"] = av.codec.hwaccel.hwdevices_available()
    except ImportError:
        info["pyav"] = None
    return info


def step_ort_cpu(args: argparse.Namespace) -> dict[str, Any]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    session = ort.InferenceSession(
        load_model(args.bundle).SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    result: dict[str, Any] = {"threads": options.intra_op_num_threads, "batches": {}}
    for batch in args.batches:
        x = np.random.default_rng(0).random((batch, 3, INPUT, INPUT), dtype=np.float32)
        t = timed(lambda x=x: session.run(None, {"images": x}), args.budget)
        t["images_per_s"] = round(batch * 1000 / t["median_ms"], 1)
        result["batches"][batch] = t
    return result


def torch_module(args: argparse.Namespace, torch: Any, device: str = "cuda") -> Any:
    """The model as a ``torch.nn.Module`` on ``device``, its shape constants (Reshape's
    shapes, Resize's scales) kept on the host: onnx2torch reads them in Python each call
    (``torch.any(shape == 0)``, ``scales.tolist()``), which on the GPU is a device-to-host
    wait per layer, and a CUDA graph cannot be captured around it."""
    from onnx2torch import convert

    module = convert(load_model(args.bundle)).eval().to(device)
    for name, buffer in list(module.named_buffers()):
        if not buffer.is_floating_point() or (buffer.ndim == 1 and buffer.numel() <= 8):
            owner, _, leaf = name.rpartition(".")
            setattr(module.get_submodule(owner) if owner else module, leaf, buffer.cpu())
    return module


def step_parity(args: argparse.Namespace) -> dict[str, Any]:
    """Same photos through ONNX Runtime (CPU) and torch (fp32, fp16 on CUDA; fp32 on CPU)."""
    import onnxruntime as ort

    try:
        import torch
    except ImportError:
        return {"skipped": "no PyTorch"}

    names = (args.bundle / "coco.names").read_text().split("\n")
    model = load_model(args.bundle)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    module = torch_module(args, torch, device)
    result: dict[str, Any] = {"device": device, "photos": {}}
    with torch.inference_mode():
        for stem, x in photos(args.bundle).items():
            reference = session.run(None, {"images": x})[0][0]
            entry: dict[str, Any] = {"onnxruntime": top_detections(reference, names)}
            precisions = [("fp32", torch.float32)] + (
                [("fp16", torch.float16)] if device == "cuda" else []
            )
            for label, dtype in precisions:
                out = module.to(dtype)(torch.from_numpy(x).to(device, dtype))
                got = out.float().cpu().numpy()[0]
                scores_ref = reference[:, 4:5] * reference[:, 5:]
                scores_got = got[:, 4:5] * got[:, 5:]
                entry[label] = {
                    "top": top_detections(got, names),
                    "max_score_diff": float(np.abs(scores_ref - scores_got).max()),
                    "max_box_diff_px": float(np.abs(reference[:, :4] - got[:, :4]).max()),
                }
            module.float()
            result["photos"][stem] = entry
    return result


def captured(torch: Any, forward: Callable[[], Any]) -> tuple[Any, Any]:
    """``forward`` recorded as a CUDA graph, and its (static) output, after warm-up calls on
    a side stream (as PyTorch asks: the allocator's pools settle before capture)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            forward()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        output = forward()
    return graph, output


def model_alone(args: argparse.Namespace, graphs: bool) -> dict[str, Any]:
    """Model alone, input already on the GPU, fp32 and fp16, batch 1 to 32: eager calls, or
    CUDA-graph replays (``graphs``; a step of its own, as a failed capture can leave the
    process's CUDA context unusable)."""
    torch = cuda_or_none()
    if torch is None:
        return {"skipped": "no GPU"}
    torch.backends.cudnn.benchmark = True
    module = torch_module(args, torch)
    sync = torch.cuda.synchronize
    step = "graphs" if graphs else "torch"
    result: dict[str, Any] = {}
    for label, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
        module.to(dtype)  # in place: the lambdas below see it
        for batch in args.batches:
            x = torch.rand(batch, 3, INPUT, INPUT, device="cuda", dtype=dtype)
            with torch.inference_mode():
                if graphs:
                    graph, _ = captured(torch, lambda x=x: module(x))
                    t = timed(graph.replay, args.budget, sync)
                else:
                    t = timed(lambda x=x: module(x), args.budget, sync)
            t["images_per_s"] = round(batch * 1000 / t["median_ms"], 1)
            result.setdefault(label, {})[batch] = t
            write(args.out, step, result)
    result["max_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return result


def step_torch(args: argparse.Namespace) -> dict[str, Any]:
    return model_alone(args, graphs=False)


def step_graphs(args: argparse.Namespace) -> dict[str, Any]:
    return model_alone(args, graphs=True)


def letterboxed(torch: Any, module: Any, frames: Any, size: int = INPUT) -> Callable[[], Any]:
    """``module`` on ``frames`` (BGR uint8 N x H x W x 3 on the GPU) letterboxed on the GPU as
    the server's ``letterbox`` does (grey, RGB, /255), in fp16: a forward to call or record."""
    import torch.nn.functional as functional

    batch, h, w = frames.shape[:3]
    scale = min(size / w, size / h)
    nw, nh = round(w * scale), round(h * scale)
    top, left = (size - nh) // 2, (size - nw) // 2
    canvas = torch.full((batch, 3, size, size), 0.5, device=frames.device, dtype=torch.float16)

    def forward() -> Any:
        rgb = frames.flip(-1).permute(0, 3, 1, 2).half().div_(255)
        canvas[:, :, top : top + nh, left : left + nw] = functional.interpolate(
            rgb, size=(nh, nw), mode="bilinear", align_corners=False
        )
        return module(canvas)

    return forward


def step_end_to_end(args: argparse.Namespace) -> dict[str, Any]:
    """640x480 BGR frames from host memory: copy up, letterbox and scale on the GPU, the fp16
    model, the detections' tensor back to host: what a server batch costs, eager and then
    as a CUDA graph."""
    torch = cuda_or_none()
    if torch is None:
        return {"skipped": "no GPU"}

    torch.backends.cudnn.benchmark = True
    module = torch_module(args, torch).half()
    result: dict[str, Any] = {}
    h, w = 480, 640
    for mode in ("eager", "cuda_graph"):
        for batch in args.batches:
            host = torch.from_numpy(
                np.random.default_rng(1).integers(0, 255, (batch, h, w, 3), dtype=np.uint8)
            ).pin_memory()
            frames = torch.empty((batch, h, w, 3), device="cuda", dtype=torch.uint8)
            forward = letterboxed(torch, module, frames)

            with torch.inference_mode():
                run, outputs = forward, None
                if mode == "cuda_graph":
                    graph, outputs = captured(torch, forward)
                    run = graph.replay

                def step(
                    host: Any = host, frames: Any = frames, run: Any = run, outputs: Any = outputs
                ) -> Any:
                    frames.copy_(host, non_blocking=True)
                    out = run()
                    return (out if outputs is None else outputs).float().cpu()

                t = timed(step, args.budget, torch.cuda.synchronize)
            t["frames_per_s"] = round(batch * 1000 / t["median_ms"], 1)
            result.setdefault(mode, {})[batch] = t
            write(args.out, "end_to_end", result)
    return result


def step_compile(args: argparse.Namespace) -> dict[str, Any]:
    """``torch.compile`` (inductor, default mode) at fp16: its compile time and speed."""
    torch = cuda_or_none()
    if torch is None:
        return {"skipped": "no GPU"}
    module = torch_module(args, torch).half()
    result: dict[str, Any] = {}
    compiled = torch.compile(module)
    for batch in args.batches[:1] if args.smoke else (1, 8, 32):
        x = torch.rand(batch, 3, INPUT, INPUT, device="cuda", dtype=torch.float16)
        with torch.inference_mode():
            start = time.perf_counter()
            compiled(x)
            torch.cuda.synchronize()
            first = time.perf_counter() - start
            t = timed(lambda x=x: compiled(x), args.budget, torch.cuda.synchronize)
        t["first_call_s"] = round(first, 1)
        t["images_per_s"] = round(batch * 1000 / t["median_ms"], 1)
        result[batch] = t
        write(args.out, "compile", result)
    return result


def make_clip(path: Path, seconds: float, size: tuple[int, int]) -> None:
    """A moving-pattern H.264 clip (no B-frames, GOP 30), as a camera sends."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        stream.options = {"preset": "ultrafast", "bf": "0", "g": "30", "crf": "28"}
        base = np.random.default_rng(2).integers(0, 255, (size[1], size[0] + 300, 3), np.uint8)
        for i in range(int(seconds * 30)):
            frame = av.VideoFrame.from_ndarray(
                np.ascontiguousarray(base[:, i : i + size[0]]), format="bgr24"
            )
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def decode_all(path: Path, hwaccel: str | None, threads: int, to_numpy: bool) -> dict[str, Any]:
    import av

    from sources.demuxing import hardware_in_use, open_container

    container, accel = open_container(str(path), None, {}, 10.0, hwaccel, path.name)
    with container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO" if threads != 1 else "SLICE"
        stream.codec_context.thread_count = threads
        start, cpu0, frames, used = time.perf_counter(), time.process_time(), 0, accel
        for frame in container.decode(stream):
            if frames == 0 and accel is not None:
                used = hardware_in_use(stream.codec_context, accel, path.name)
            if to_numpy:
                frame.to_ndarray(format="bgr24")
            frames += 1
        wall = time.perf_counter() - start
    del av
    return {
        "frames": frames,
        "fps": round(frames / wall, 1),
        "hwaccel_used": used,
        "cpu_ms_per_frame": round((time.process_time() - cpu0) * 1000 / frames, 2),
    }


def step_decode(args: argparse.Namespace) -> dict[str, Any]:
    """1080p H.264: FFmpeg's software decoder (1 thread: a camera's cost; all threads) vs
    NVDEC through our ``open_container`` (``VISIONSTREAM_DECODE_HWACCEL=cuda``), one stream and
    eight at once; ``bgr24`` conversion included where said."""
    size = (640, 360) if args.smoke else (1920, 1080)
    clip = Path(args.work) / "clip.mp4"
    make_clip(clip, 2 if args.smoke else 10, size)
    result: dict[str, Any] = {"size": list(size)}
    accel = "cuda" if cuda_or_none() is not None else None
    for label, hw, threads, to_numpy in (
        ("software_1_thread", None, 1, False),
        ("software_all_threads", None, 0, False),
        ("cuda", accel, 1, False),
        ("cuda_bgr24", accel, 1, True),
        ("software_1_thread_bgr24", None, 1, True),
    ):
        if label.startswith("cuda") and accel is None:
            result[label] = {"skipped": "no GPU"}
            continue
        result[label] = decode_all(clip, hw, threads, to_numpy)
        write(args.out, "decode", result)
    for label, hw in (("software_x8", None), ("cuda_x8", accel)):
        if label.startswith("cuda") and accel is None:
            continue
        outs: list[dict[str, Any]] = []
        start = time.perf_counter()
        workers = [
            threading.Thread(
                target=lambda hw=hw, outs=outs: outs.append(decode_all(clip, hw, 1, False))
            )
            for _ in range(8)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        total = sum(o["frames"] for o in outs)
        result[label] = {
            "total_fps": round(total / (time.perf_counter() - start), 1),
            "streams": len(outs),
        }
        write(args.out, "decode", result)
    return result


def step_batcher(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.gpu.serving import step_batcher as batcher

    return batcher(args)


def step_backend(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.gpu.serving import step_backend as backend

    return backend(args)


def step_server(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.gpu.server_run import step_server as server

    return server(args)


STEPS = {
    "env": step_env,
    "ort_cpu": step_ort_cpu,
    "parity": step_parity,
    "torch": step_torch,
    "graphs": step_graphs,
    "end_to_end": step_end_to_end,
    "batcher": step_batcher,
    "backend": step_backend,
    "decode": step_decode,
    "compile": step_compile,
    "server": step_server,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("step", choices=sorted(STEPS))
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", default="/tmp")
    parser.add_argument("--smoke", action="store_true", help="smallest sizes, short budgets")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # ours, run from anywhere
    args.batches = SMOKE_BATCHES if args.smoke else BATCHES
    args.budget = 0.2 if args.smoke else 2.0
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        result = STEPS[args.step](args)
    except Exception as exc:  # a step's failure is its result (with what it measured before)
        path = args.out / "gpu-run.json"
        before = json.loads(path.read_text())["steps"].get(args.step, {}) if path.exists() else {}
        result = {**before, "error": f"{type(exc).__name__}: {exc}"[:600]}
    result["step_s"] = round(time.perf_counter() - started, 1)
    write(args.out, args.step, result)


if __name__ == "__main__":
    main()
