"""Models and what runs them: the default model, the backends and their options, batching."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode

from ..inference.manifest import BackendName
from .values import split_csv

__all__ = ["InferenceSettings"]


class InferenceSettings(BaseSettings):
    """Models and what runs them: the default model, the backends and their options, batching. A
    part of ``Settings`` (``VISIONSTREAM_<NAME>``)."""

    models_dir: Path = Field(default_factory=lambda: Path.home() / ".cache/visionstream/models")
    """Where converted models and their manifests live."""
    default_model: str = "yolov3-tiny-416"
    """Model prepared (downloaded, converted) and warmed up before the server reports ready."""
    prepare_default_model: bool = True
    """Fetch and convert the default model on start when it is missing."""
    model_recheck_s: float = Field(default=10.0, gt=0)
    """A default model that could not be had at start is looked for again this often (copied
    into the models directory, or pulled by ``visionstream models pull`` meanwhile); the
    server is ready once it loads."""
    inference_backend: BackendName | None = None
    """Runtime for every model, overriding manifests (``torch``: the ``torch`` extra). ``auto``:
    ONNX Runtime (TensorRT, CUDA) with an NVIDIA driver, else OpenVINO (2x ORT on CPUs)."""
    onnx_providers: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """ONNX Runtime providers in order of preference; empty: the best that loads here
    (TensorRT and CUDA only where an NVIDIA driver is present)."""
    onnx_device_id: int = Field(default=0, ge=0)
    """CUDA / TensorRT device."""
    onnx_intra_op_threads: int = Field(default=0, ge=0)
    """ONNX Runtime intra-op threads (0: ONNX Runtime decides)."""
    trt_fp16: bool = True
    """Let TensorRT run layers in fp16."""
    trt_cache_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "visionstream" / "trt-engines"
    )
    """Where TensorRT engines are cached (building one takes minutes)."""
    openvino_device: str = "AUTO"
    """OpenVINO device: AUTO, CPU, GPU."""
    openvino_performance_hint: Literal["LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT"] = "LATENCY"
    """OpenVINO's performance hint."""
    openvino_precision: Literal["f32", "bf16", "f16"] | None = None
    """OpenVINO inference precision; unset: the device's default (bf16 on CPUs that have it,
    which shifts scores by up to ~0.07; f32 matches ONNX Runtime)."""
    openvino_requests: int = Field(default=0, ge=0)
    """In-flight OpenVINO infer requests per model (0: the device's optimal number)."""
    remote_inference_api_key: SecretStr | None = None
    """Sent as ``Authorization: Bearer`` to the remote V2 server (never logged)."""
    remote_inference_url: str | None = None
    """V2 server (``http://host:8000`` or ``grpc://host:8001``) for models whose backend is
    ``remote`` and whose manifest names no server."""
    max_batch_size: int = Field(default=0, ge=0)
    """Largest cross-session batch per model; 0: 1 on CPU (batching does not pay there), 16
    on GPUs and remote servers."""
    max_queue_delay_ms: float = Field(default=2.0, ge=0)
    """How long a batch gathers frames while another runs (on an idle device: at once)."""
    batch_workers: int = Field(default=2, ge=1)
    """Batches of one model in flight at once (one forms while the other runs)."""
    max_crop_batch: int = Field(default=32, ge=1)
    """The most crops of one frame a model runs at once (1: each on its own)."""
    input_variants: bool = True
    """On CPUs, run frames on a model's smaller input variants where they fit (16:9: 416x288)."""

    @field_validator("onnx_providers", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        return split_csv(value)
