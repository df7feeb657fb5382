"""ONNX Runtime sessions: TensorRT -> CUDA -> CPU, with options from settings."""

from __future__ import annotations

import ctypes.util
import importlib.util
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .session import InferenceSession, TensorSpec, nvidia_driver_present

if TYPE_CHECKING:
    from ..config import Settings
    from .manifest import ModelManifest

__all__ = ["OnnxOptions", "OnnxRuntimeSession", "opened", "plan_providers"]

log = logging.getLogger(__name__)

TENSORRT = "TensorrtExecutionProvider"
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
_ORT_TYPES = {
    "tensor(float)": "FP32",
    "tensor(float16)": "FP16",
    "tensor(int64)": "INT64",
    "tensor(int32)": "INT32",
    "tensor(uint8)": "UINT8",
    "tensor(bool)": "BOOL",
    "tensor(double)": "FP64",
    "tensor(int8)": "INT8",
}


@dataclass
class OnnxOptions:
    """How ONNX Runtime opens a model: providers in order of preference, device, threads."""

    providers: list[str] = field(default_factory=list)
    """Ordered provider names; empty: the best this machine can really load."""
    device_id: int = 0
    trt_fp16: bool = True
    trt_cache_dir: Path | None = None
    """TensorRT engines are built once (minutes) and cached here."""
    intra_op_threads: int = 0
    io_binding: bool | None = None
    """Bind outputs on the device (copied to the host once); None: on CUDA/TensorRT only."""


def _tensorrt_loadable() -> bool:
    return bool(ctypes.util.find_library("nvinfer"))


def _preload_cuda_libraries(ort) -> None:
    """CUDA and cuDNN from pip (``onnxruntime-gpu[cuda,cudnn]``, as the Docker image installs
    them) are not on the loader's path: load them first, when they are there."""
    if importlib.util.find_spec("nvidia") is not None:
        ort.preload_dlls()


def plan_providers(options: OnnxOptions, available: list[str]) -> list[str]:
    """The providers to ask for, best first, among those this build has.

    onnxruntime-gpu lists CUDA and TensorRT as available even on machines with no GPU, and
    asking for them there logs library-load errors before falling back: ask only where the
    driver (and for TensorRT, its library) is present.
    """
    if options.providers:
        wanted = [p for p in options.providers if p in available]
        return wanted or [CPU]
    plan = []
    if nvidia_driver_present():
        if TENSORRT in available and _tensorrt_loadable():
            plan.append(TENSORRT)
        if CUDA in available:
            plan.append(CUDA)
    return [*plan, CPU]


class OnnxRuntimeSession(InferenceSession):
    """One model in ONNX Runtime, on the best provider this machine can really load."""

    backend = "onnxruntime"

    def __init__(self, path: Path, options: OnnxOptions | None = None) -> None:
        import onnxruntime as ort

        options = options or OnnxOptions()
        requested = plan_providers(options, ort.get_available_providers())
        provider_options: list[dict[str, str]] = []
        for name in requested:
            if name == TENSORRT:
                trt = {
                    "device_id": str(options.device_id),
                    "trt_fp16_enable": str(options.trt_fp16),
                }
                if options.trt_cache_dir is not None:
                    options.trt_cache_dir.mkdir(parents=True, exist_ok=True)
                    trt |= {
                        "trt_engine_cache_enable": "True",
                        "trt_engine_cache_path": str(options.trt_cache_dir),
                    }
                provider_options.append(trt)
            elif name == CUDA:
                provider_options.append({"device_id": str(options.device_id)})
            else:
                provider_options.append({})
        if any(p in (TENSORRT, CUDA) for p in requested):
            _preload_cuda_libraries(ort)
        session_options = ort.SessionOptions()
        session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # A provider that fails to load is reported below, once, in our words (not as
        # ONNX Runtime's error spam).
        session_options.log_severity_level = 4
        if options.intra_op_threads:
            session_options.intra_op_num_threads = options.intra_op_threads
        ort.set_default_logger_severity(4)  # provider library load failures log here
        try:
            self._session = ort.InferenceSession(
                str(path),
                sess_options=session_options,
                providers=requested,
                provider_options=provider_options,
            )
        finally:
            ort.set_default_logger_severity(2)  # ONNX Runtime's default: warnings
        self._providers = list(self._session.get_providers())
        if requested[0] not in self._providers:
            self.degraded = f"asked for {requested[0]}, runs on {self._providers[0]}"
            log.warning("model %s: %s", path.parent.name, self.degraded)
        self._device_id = options.device_id
        bind = options.io_binding
        self._io_binding = self.on_accelerator if bind is None else bind
        self.inputs = [self._spec(i) for i in self._session.get_inputs()]
        self.outputs = [self._spec(o) for o in self._session.get_outputs()]
        self._input = self.inputs[0].name
        self._output_names = [o.name for o in self.outputs]

    @staticmethod
    def _spec(arg) -> TensorSpec:
        shape = tuple(d if isinstance(d, int) else -1 for d in arg.shape)
        return TensorSpec(arg.name, _ORT_TYPES.get(arg.type, "FP32"), shape)

    @property
    def providers(self) -> list[str]:
        return self._providers

    @property
    def on_accelerator(self) -> bool:
        return self._providers[0] in (TENSORRT, CUDA)

    @property
    def device(self) -> str:
        first = self._providers[0].removesuffix("ExecutionProvider")
        return first if first == "CPU" else f"{first}:{self._device_id}"

    def run(self, batch: np.ndarray) -> list[np.ndarray]:
        if not self._io_binding:
            return self._session.run(self._output_names, {self._input: batch})
        # IOBinding: the input is copied to the device once and the outputs stay there until
        # one copy back at the end (without it, ONNX Runtime copies per call and per output).
        binding = self._session.io_binding()
        binding.bind_cpu_input(self._input, np.ascontiguousarray(batch))
        device = "cuda" if self.on_accelerator else "cpu"
        for name in self._output_names:
            binding.bind_output(name, device, self._device_id if device == "cuda" else 0)
        self._session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()


def opened(manifest: ModelManifest, directory: Path, settings: Settings) -> OnnxRuntimeSession:
    """A model's session on ONNX Runtime, as ``VISIONSTREAM_ONNX_*`` and
    ``VISIONSTREAM_TRT_*`` ask."""
    options = OnnxOptions(
        providers=settings.onnx_providers,
        device_id=settings.onnx_device_id,
        trt_fp16=settings.trt_fp16,
        trt_cache_dir=settings.trt_cache_dir,
        intra_op_threads=settings.onnx_intra_op_threads,
    )
    return OnnxRuntimeSession(manifest.onnx_path(directory), options)
