"""PyTorch sessions (``VISIONSTREAM_INFERENCE_BACKEND=torch``, the ``torch`` extra): the ONNX model
converted to a ``torch.nn.Module`` when it loads (onnx2torch), on CUDA where there is one (fp16,
each batch size replayed as a CUDA graph), else on the CPU (fp32).

For GPU machines whose CUDA has a PyTorch but no matching ``onnxruntime-gpu``. Measured on a lent
H100 (``benchmarks/README.md``, "gpu/"): eager calls are launch-bound (2-3 ms whatever the batch),
a CUDA graph replays batch 1 in 0.4 ms; fp16 pays from batch 4; ``torch.compile`` is no help for
these graphs. onnx2torch reads some constants in Python on every call (Reshape's shape, Resize's
scales): on the GPU each read would wait for the device, and no graph could hold it, so they are
kept on the host (``_constants_on_host``; onnx2torch is pinned to the range this was tested on)."""

from __future__ import annotations

import logging
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelError
from .preprocess import Normalization
from .session import InferenceSession, TensorSpec

if TYPE_CHECKING:
    from ..config import Settings
    from .manifest import ModelManifest

__all__ = ["TorchOptions", "TorchSession", "graph_batch", "opened"]

log = logging.getLogger(__name__)

# onnx2torch 1.5's Slice indexes a tensor with a list, which PyTorch warns about on every call
# (a deprecation of its own, not the model's): not news for the server's log.
warnings.filterwarnings(
    "ignore",
    message="Using a non-tuple sequence for multidimensional indexing",
    category=UserWarning,
)

_ONNX_TYPES = {1: "FP32", 10: "FP16", 7: "INT64", 6: "INT32", 2: "UINT8", 9: "BOOL", 11: "FP64"}
_HOST_CONSTANT_MAX = 8
"""A float buffer of at most this many values is a constant read on the host (Resize's
scales); larger ones are weights."""
_WARM_UP_CALLS = 3  # before a capture, on a side stream, as PyTorch asks


@dataclass(frozen=True)
class TorchOptions:
    device: str = "auto"
    """``auto`` (CUDA where present, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``."""
    precision: str = "auto"
    """``auto`` (fp16 on CUDA, fp32 on the CPU), ``fp32`` or ``fp16``."""
    cuda_graphs: bool = True
    """Replay batches as CUDA graphs (CUDA only), one per power-of-two batch size."""


def graph_batch(rows: int) -> int:
    """The batch size of the CUDA graph that runs ``rows`` images: the next power of two. A
    graph per size the batcher forms (1-16) cost the lent H200 a capture (three warm-up calls
    and the recording, under the session's lock) at each new size: 8 sessions got 46 frames/s
    at p95 1 s in a short run where a graph per power of two leaves five captures to make."""
    return 1 << max(0, rows - 1).bit_length()


def _libraries() -> tuple[Any, Any, Any]:
    try:
        import onnx
        import torch
        from onnx2torch import convert
    except ImportError as exc:
        raise ModelError(
            f"the torch backend needs PyTorch and onnx2torch ({exc.name} is missing): "
            "pip install 'visionstream[torch]'"
        ) from exc
    return onnx, torch, convert


def _spec(value: Any) -> TensorSpec:
    tensor = value.type.tensor_type
    shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim)
    return TensorSpec(value.name, _ONNX_TYPES.get(tensor.elem_type, "FP32"), shape)


def _constants_on_host(module: Any) -> None:
    """Moves the module's shape constants (integer buffers, and float ones of a few values)
    back to the CPU."""
    for name, buffer in list(module.named_buffers()):
        small = buffer.ndim <= 1 and buffer.numel() <= _HOST_CONSTANT_MAX
        if not buffer.is_floating_point() or small:
            owner, _, leaf = name.rpartition(".")
            setattr(module.get_submodule(owner) if owner else module, leaf, buffer.cpu())


class TorchSession(InferenceSession):
    """One model on PyTorch. ``run`` is serialised: a CUDA graph's buffers are shared, and one
    caller at a time is what the GPU measurements favoured (the batcher gathers the rest)."""

    backend = "torch"

    def __init__(self, path: Path, options: TorchOptions | None = None) -> None:
        options = options or TorchOptions()
        onnx, torch, convert = _libraries()
        self._torch = torch
        model = onnx.load(str(path))
        weights = {i.name for i in model.graph.initializer}
        self.inputs = [_spec(v) for v in model.graph.input if v.name not in weights]
        self.outputs = [_spec(v) for v in model.graph.output]
        wanted = options.device
        if wanted == "auto":
            wanted = "cuda" if torch.cuda.is_available() else "cpu"
        self._device = torch.device(wanted)
        on_cuda = self._device.type == "cuda"
        if on_cuda and not torch.cuda.is_available():
            raise ModelError(f"the torch backend was asked for {wanted}, but PyTorch sees no GPU")
        half = options.precision == "fp16" or (options.precision == "auto" and on_cuda)
        self._dtype = torch.float16 if half else torch.float32
        with warnings.catch_warnings():
            # onnx2torch says that its Resize rounds as ONNX's "floor"/"asymmetric" modes do,
            # which are the ones YOLO models use; said once per load, it is not news.
            warnings.simplefilter("ignore", UserWarning)
            module = convert(model).eval().to(self._device, self._dtype)
        if on_cuda:
            _constants_on_host(module)
        self._module = module
        self._graphs_wanted = on_cuda and options.cuda_graphs
        self._graphs: dict[tuple[tuple[int, ...], bool], tuple[Any, Any, list[Any]]] = {}
        self._lock = threading.Lock()
        self._normalization: Normalization | None = None
        self._mean_std: tuple[Any, Any] | None = None  # on the device, [1, 3, 1, 1] each
        name = torch.cuda.get_device_name(self._device) if on_cuda else "CPU"
        self._described = f"PyTorch {name} {'fp16' if half else 'fp32'}"
        self._warm_up()

    @property
    def providers(self) -> list[str]:
        return [f"torch:{self._device}"]

    @property
    def device(self) -> str:
        return self._described

    @property
    def on_accelerator(self) -> bool:
        return self._device.type == "cuda"

    def takes_canvases(self, normalization: Normalization) -> bool:
        """Yes, for one normalisation (its model's): channel order, scale, mean and std are
        applied on the device (in fp32, then cast), inside the CUDA graph. On the H100,
        uint8 frames copied up kept a call's p95 at 0.7 ms where f32 blobs, four times the
        bytes, held the lock for 38-414 ms at 8-64 sessions (benchmarks/README.md)."""
        torch = self._torch
        with self._lock:
            if self._normalization is None:
                self._normalization = normalization
                if normalization.mean is not None and normalization.std is not None:
                    mean, std = (
                        torch.tensor(v, dtype=torch.float32, device=self._device).view(1, -1, 1, 1)
                        for v in (normalization.mean, normalization.std)
                    )
                    self._mean_std = (mean, std)
            return self._normalization == normalization

    def run(self, batch: np.ndarray) -> list[np.ndarray]:
        torch = self._torch
        canvas = batch.dtype == np.uint8
        if canvas and self._normalization is None:
            raise ValueError("uint8 frames for a session that was not told how to normalise them")
        with self._lock, torch.inference_mode():
            host = torch.from_numpy(np.ascontiguousarray(batch))
            if self._graphs_wanted:
                rows = len(batch)
                shape = (graph_batch(rows), *batch.shape[1:])
                static, graph, outputs = self._graph_for(shape, canvas)
                static[:rows].copy_(host)  # to the device (a blob: in its precision)
                graph.replay()
                outputs = [o[:rows] for o in outputs]  # the rest: an earlier batch's rows
            else:
                x = host.to(self._device)
                outputs = self._forward(self._normalized(x) if canvas else x.to(self._dtype))
            return [o.float().cpu().numpy() for o in outputs]

    def _normalized(self, frames: Any) -> Any:
        """``[N, H, W, 3]`` BGR uint8 on the device -> the network's input, in its precision."""
        norm = self._normalization
        assert norm is not None
        x = frames.permute(0, 3, 1, 2).float()
        if norm.swap_rb:
            x = x.flip(1)
        x = x * norm.scale
        if self._mean_std is not None:
            mean, std = self._mean_std
            x = (x - mean) / std
        return x.to(self._dtype).contiguous()

    def _forward(self, x: Any) -> list[Any]:
        out = self._module(x)
        return list(out) if isinstance(out, tuple | list) else [out]

    def _graph_for(self, shape: tuple[int, ...], canvas: bool) -> tuple[Any, Any, list[Any]]:
        """The CUDA graph for batches of ``shape`` (a ``graph_batch`` size), blobs or uint8
        frames normalised inside it, recorded on first use."""
        if (shape, canvas) not in self._graphs:
            torch = self._torch
            dtype = torch.uint8 if canvas else self._dtype
            static = torch.zeros(shape, device=self._device, dtype=dtype)

            def forward() -> list[Any]:
                return self._forward(self._normalized(static) if canvas else static)

            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(_WARM_UP_CALLS):
                    forward()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                outputs = forward()
            self._graphs[shape, canvas] = (static, graph, outputs)
            log.info(
                "%s: CUDA graph recorded for %s %s",
                self._described,
                "x".join(map(str, shape)),
                "uint8 frames" if canvas else "blobs",
            )
        return self._graphs[shape, canvas]

    def _warm_up(self) -> None:
        shape = [1, *(d if d > 0 else 416 for d in self.inputs[0].shape[1:])]
        self.run(np.zeros(shape, np.float32))

    def close(self) -> None:
        with self._lock:
            self._graphs.clear()


def opened(manifest: ModelManifest, directory: Path, settings: Settings) -> TorchSession:
    """A model's session on PyTorch (CUDA where present)."""
    return TorchSession(manifest.onnx_path(directory))
