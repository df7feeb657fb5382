"""Inference sessions: one interface over the runtimes that execute a model file."""

from __future__ import annotations

import ctypes.util
import logging
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

__all__ = ["InferenceSession", "OnnxRuntimeSession", "default_onnx_providers"]

log = logging.getLogger(__name__)


class InferenceSession(ABC):
    """Runs one model; ``run`` is thread-safe and may be called from many threads at once."""

    @property
    @abstractmethod
    def providers(self) -> list[str]:
        """Execution providers really in use, best first."""

    @abstractmethod
    def run(self, batch: np.ndarray) -> np.ndarray:
        """Run one NCHW float32 batch; return the model's single output."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release runtime resources (idempotent)."""


def default_onnx_providers() -> list[str]:
    """CUDA when an NVIDIA driver is installed, else CPU only.

    onnxruntime-gpu lists CUDA as available even without a GPU, and asking for it then logs
    a loud library-load error before falling back; asking only where a driver exists avoids that.
    """
    if ctypes.util.find_library("cuda") or Path("/proc/driver/nvidia/version").exists():
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


class OnnxRuntimeSession(InferenceSession):
    def __init__(self, path: Path, providers: list[str], intra_op_threads: int = 0) -> None:
        import onnxruntime as ort

        available = set(ort.get_available_providers())
        wanted = [p for p in providers if p in available] or ["CPUExecutionProvider"]
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if intra_op_threads:
            options.intra_op_num_threads = intra_op_threads
        self._session = ort.InferenceSession(str(path), sess_options=options, providers=wanted)
        self._providers = list(self._session.get_providers())
        if wanted[0] not in self._providers:
            log.warning("asked for %s but ONNX Runtime runs on %s", wanted[0], self._providers)
        self._input = self._session.get_inputs()[0].name
        self._output = self._session.get_outputs()[0].name

    @property
    def providers(self) -> list[str]:
        return self._providers

    def run(self, batch: np.ndarray) -> np.ndarray:
        return self._session.run([self._output], {self._input: batch})[0]
