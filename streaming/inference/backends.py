"""Which runtime runs a model: the manifest's choice, overridden by settings; ``auto`` decides
by the machine (measured in benchmarks/inference.py)."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path

from ..config import Settings
from .manifest import ModelManifest
from .session import InferenceSession, nvidia_driver_present

__all__ = ["BACKENDS", "SessionOpener", "batch_size_for", "choose_backend", "open_session"]

GPU_BATCH = 16


def choose_backend(manifest: ModelManifest, settings: Settings) -> str:
    backend = settings.inference_backend or manifest.backend
    if backend != "auto":
        return backend
    if nvidia_driver_present():
        return "onnxruntime"  # TensorRT / CUDA
    if importlib.util.find_spec("openvino") is not None:
        return "openvino"  # ~2x ONNX Runtime on CPU for the default model (bf16 where it can)
    return "onnxruntime"


SessionOpener = Callable[[ModelManifest, Path, Settings], InferenceSession]
"""Opens a model's session: ``open_session``, a backend's ``opened``, or a deployment's own."""


BACKENDS: dict[str, str] = {
    "onnxruntime": "onnx_session",
    "openvino": "openvino_session",
    "torch": "torch_session",
    "remote": "remote_session",
}
"""Each backend's module, which opens its sessions with ``opened(manifest, directory,
settings)`` (reading its own settings). Imported when a model first asks for it, so a
machine without a backend's library never loads it. A new backend is its module and one
line here: manifests and ``VISIONSTREAM_INFERENCE_BACKEND`` take the names listed here
(``manifest.BackendName``)."""


def open_session(manifest: ModelManifest, directory: Path, settings: Settings) -> InferenceSession:
    backend = choose_backend(manifest, settings)
    module = importlib.import_module(f"{__package__}.{BACKENDS[backend]}")
    opened: SessionOpener = module.opened
    return opened(manifest, directory, settings)


def batch_size_for(manifest: ModelManifest, session: InferenceSession, settings: Settings) -> int:
    """The manifest's limit, else the setting, else by device: batching pays on GPUs and
    remote servers, rarely on CPUs (measured: batch 4 is slower per frame than batch 1)."""
    size = manifest.max_batch_size or settings.max_batch_size
    if not size:
        size = GPU_BATCH if session.on_accelerator else 1
    static = session.inputs[0].shape[0] if session.inputs else -1
    return min(size, static) if static > 0 else size
