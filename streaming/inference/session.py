"""Inference sessions: one interface over the runtimes that execute a model.

Backends: ONNX Runtime (``onnx_session``), OpenVINO (``openvino_session``) and a remote model
behind the KServe V2 / Triton protocol (``remote_session``); ``backends.open_session`` picks
one. A session runs raw tensors: preprocessing and decoding belong to ``DetectionModel``.
"""

from __future__ import annotations

import ctypes.util
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .preprocess import Normalization

__all__ = ["InferenceSession", "TensorSpec", "nvidia_driver_present"]


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output as the V2 protocol describes it (``-1``: any size)."""

    name: str
    datatype: str
    shape: tuple[int, ...]

    def to_v2(self) -> dict:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


NUMPY_TO_V2: dict[np.dtype[Any], str] = {
    np.dtype(np.float32): "FP32",
    np.dtype(np.float16): "FP16",
    np.dtype(np.float64): "FP64",
    np.dtype(np.int64): "INT64",
    np.dtype(np.int32): "INT32",
    np.dtype(np.uint8): "UINT8",
    np.dtype(np.int8): "INT8",
    np.dtype(np.bool_): "BOOL",
}
V2_TO_NUMPY = {v: k for k, v in NUMPY_TO_V2.items()}


def nvidia_driver_present() -> bool:
    return bool(ctypes.util.find_library("cuda")) or Path("/proc/driver/nvidia/version").exists()


class InferenceSession(ABC):
    """Runs one model; ``run`` is thread-safe and may be called from many threads at once."""

    backend: str = ""
    """``onnxruntime``, ``openvino`` or ``remote``."""
    degraded: str | None = None
    """Why the session runs on less than it was asked for (a silent fallback), else None."""
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]

    @property
    @abstractmethod
    def providers(self) -> list[str]:
        """What really executes the model, best first (ONNX Runtime's providers, or the
        OpenVINO device, or the remote server)."""

    @property
    def device(self) -> str:
        """Where the model runs, in a few words (for logs, ``/readyz``, ``/models``)."""
        return self.providers[0]

    @property
    def on_accelerator(self) -> bool:
        """True when the model runs on a GPU (batching pays there)."""
        return False

    @abstractmethod
    def run(self, batch: np.ndarray) -> list[np.ndarray]:
        """Run one NCHW float32 batch (or, where ``takes_canvases`` said yes, an NHWC uint8
        batch of resized frames); return every model output, batch dimension first."""

    def takes_canvases(self, normalization: Normalization) -> bool:
        """Whether ``run`` may also be handed resized BGR uint8 frames, ``[N, H, W, 3]``, to
        normalise itself as ``normalization`` says (on its device, where the copy up is a
        quarter of a float blob's); False: blobs only."""
        return False

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release runtime resources (idempotent)."""
