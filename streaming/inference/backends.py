"""Which runtime runs a model: the manifest's choice, overridden by settings; ``auto`` decides
by the machine (measured in benchmarks/inference.py)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from ..config import Settings
from ..errors import ModelError
from .manifest import ModelManifest
from .session import InferenceSession, nvidia_driver_present

__all__ = ["SessionOpener", "batch_size_for", "choose_backend", "open_session"]

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
"""Opens a model's session: ``open_session``, or a deployment's own."""


def open_session(manifest: ModelManifest, directory: Path, settings: Settings) -> InferenceSession:
    backend = choose_backend(manifest, settings)
    if backend == "remote":
        from .remote_session import RemoteV2Session

        remote = manifest.remote
        url = (remote.url if remote else None) or settings.remote_inference_url
        if not url:
            raise ModelError(
                f"model {manifest.name} is remote but names no server "
                "(manifest 'remote.url' or STREAMING_REMOTE_INFERENCE_URL)"
            )
        name = (remote.model_name if remote else None) or manifest.name
        key = settings.remote_inference_api_key
        return RemoteV2Session(
            url,
            name,
            remote.model_version if remote else "",
            api_key=key.get_secret_value() if key else None,
        )
    path = manifest.onnx_path(directory)
    if backend == "torch":
        from .torch_session import TorchSession

        return TorchSession(path)
    if backend == "openvino":
        from .openvino_session import OpenVINOOptions, OpenVINOSession

        return OpenVINOSession(
            path,
            OpenVINOOptions(
                device=settings.openvino_device,
                performance_hint=settings.openvino_performance_hint,
                precision=settings.openvino_precision,
                requests=settings.openvino_requests,
            ),
        )
    from .onnx_session import OnnxOptions, OnnxRuntimeSession

    return OnnxRuntimeSession(
        path,
        OnnxOptions(
            providers=settings.onnx_providers,
            device_id=settings.onnx_device_id,
            trt_fp16=settings.trt_fp16,
            trt_cache_dir=settings.trt_cache_dir,
            intra_op_threads=settings.onnx_intra_op_threads,
        ),
    )


def batch_size_for(manifest: ModelManifest, session: InferenceSession, settings: Settings) -> int:
    """The manifest's limit, else the setting, else by device: batching pays on GPUs and
    remote servers, rarely on CPUs (measured: batch 4 is slower per frame than batch 1)."""
    size = manifest.max_batch_size or settings.max_batch_size
    if not size:
        size = GPU_BATCH if session.on_accelerator else 1
    static = session.inputs[0].shape[0] if session.inputs else -1
    return min(size, static) if static > 0 else size
