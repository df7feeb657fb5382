"""OpenVINO sessions: a compiled model and a pool of in-flight infer requests."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx

from .session import InferenceSession, TensorSpec

if TYPE_CHECKING:
    from ..config import Settings
    from .manifest import ModelManifest

__all__ = ["OpenVINOOptions", "OpenVINOSession", "opened"]

log = logging.getLogger(__name__)

_OV_TYPES = {
    "f32": "FP32",
    "f16": "FP16",
    "f64": "FP64",
    "i64": "INT64",
    "i32": "INT32",
    "u8": "UINT8",
    "i8": "INT8",
    "boolean": "BOOL",
}


@dataclass
class OpenVINOOptions:
    """How OpenVINO compiles a model: device, performance hint, precision."""

    device: str = "AUTO"
    """``AUTO``, ``CPU``, ``GPU`` (or ``GPU.1``...)."""
    performance_hint: str = "LATENCY"
    """``LATENCY``, ``THROUGHPUT`` or ``CUMULATIVE_THROUGHPUT``."""
    precision: str | None = None
    """``f32``, ``bf16``, ``f16``; None: the device's default (bf16 on CPUs that have it,
    which shifts scores by a few hundredths; ``f32`` matches ONNX Runtime)."""
    requests: int = 0
    """In-flight infer requests; 0: the device's optimal number (at least 2)."""


class OpenVINOSession(InferenceSession):
    """``run`` hands the batch to the next idle request of an ``AsyncInferQueue`` and waits
    for its callback, so as many threads as there are requests run at once."""

    backend = "openvino"

    def __init__(self, path: Path, options: OpenVINOOptions | None = None) -> None:
        import openvino as ov

        options = options or OpenVINOOptions()
        config = {"PERFORMANCE_HINT": options.performance_hint}
        if options.precision:
            config["INFERENCE_PRECISION_HINT"] = options.precision
        core = ov.Core()
        self._compiled = core.compile_model(str(path), options.device, config)
        jobs = options.requests or max(
            2, self._compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
        )
        self._queue = ov.AsyncInferQueue(self._compiled, jobs)
        self._queue.set_callback(self._done)
        self._submit = threading.Lock()  # start_async picks an idle request: one caller at a time
        devices = self._compiled.get_property("EXECUTION_DEVICES")
        self._device = ",".join(devices) if devices else options.device
        self._precision = options.precision or self._default_precision(core, devices)
        # A port has several names; report the ONNX graph's, as ONNX Runtime does.
        graph = onnx.load(str(path), load_external_data=False).graph
        self.inputs = [
            self._spec(port, [i.name for i in graph.input]) for port in self._compiled.inputs
        ]
        self.outputs = [
            self._spec(port, [o.name for o in graph.output]) for port in self._compiled.outputs
        ]
        self._closed = False

    @staticmethod
    def _default_precision(core, devices: list[str]) -> str:
        """What the device computes in when not told (AUTO does not say; its device does)."""
        try:
            return core.get_property(devices[0], "INFERENCE_PRECISION_HINT").get_type_name()
        except (RuntimeError, IndexError):
            return "default precision"

    @staticmethod
    def _spec(port, graph_names: list[str]) -> TensorSpec:
        names = port.get_names()
        name = next((n for n in graph_names if n in names), None) or sorted(names)[0]
        shape = tuple(d.get_length() if d.is_static else -1 for d in port.get_partial_shape())
        return TensorSpec(
            name, _OV_TYPES.get(port.get_element_type().get_type_name(), "FP32"), shape
        )

    @property
    def providers(self) -> list[str]:
        return [f"OpenVINO:{self._device}"]

    @property
    def device(self) -> str:
        return f"OpenVINO {self._device} {self._precision}"

    @property
    def on_accelerator(self) -> bool:
        return "GPU" in self._device

    @staticmethod
    def _done(request, future: Future) -> None:
        # Runs on OpenVINO's thread: copy out (the request's buffers are reused) and hand over.
        try:
            future.set_result([t.data.copy() for t in request.output_tensors])
        except Exception as exc:  # the waiting caller raises it
            future.set_exception(exc)

    def run(self, batch: np.ndarray) -> list[np.ndarray]:
        if self._closed:
            raise RuntimeError("the OpenVINO session is closed")
        future: Future[list[np.ndarray]] = Future()
        with self._submit:
            self._queue.start_async({0: batch}, userdata=future)
        return future.result()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.wait_all()


def opened(manifest: ModelManifest, directory: Path, settings: Settings) -> OpenVINOSession:
    """A model's session on OpenVINO, as ``VISIONSTREAM_OPENVINO_*`` ask."""
    options = OpenVINOOptions(
        device=settings.openvino_device,
        performance_hint=settings.openvino_performance_hint,
        precision=settings.openvino_precision,
        requests=settings.openvino_requests,
    )
    return OpenVINOSession(manifest.onnx_path(directory), options)
