"""On an NVIDIA GPU: the default model on TensorRT and CUDA (fp16 and fp32), batches of 1-32,
and a session through the server on CUDA. Skipped where there is no GPU (CI)."""

from __future__ import annotations

import numpy as np
import pytest

from streaming import Client, StreamConfig
from streaming.client import FrameSourceStream
from streaming.config import Settings
from streaming.inference.onnx_session import OnnxOptions, OnnxRuntimeSession
from tests.conftest import DETECT_SPEC
from tests.support.server import ServerProcess

pytestmark = [pytest.mark.gpu, pytest.mark.e2e]

MODEL_FILE = Settings().models_dir / "yolov3-tiny-416" / "model.onnx"
CUDA = ["CUDAExecutionProvider", "CPUExecutionProvider"]
TENSORRT = ["TensorrtExecutionProvider", *CUDA]


@pytest.fixture(scope="module")
def batch() -> np.ndarray:
    return np.random.default_rng(3).random((4, 3, 416, 416), dtype=np.float32)


@pytest.fixture(scope="module")
def on_cpu(batch) -> np.ndarray:
    return OnnxRuntimeSession(MODEL_FILE, OnnxOptions(providers=["CPUExecutionProvider"])).run(
        batch
    )[0]


@pytest.mark.parametrize(
    ("providers", "fp16", "tolerance"),
    [(CUDA, False, 1e-3), (TENSORRT, False, 1e-3), (TENSORRT, True, 3e-2)],
)
def test_gpu_providers_load_and_agree_with_the_cpu(
    batch, on_cpu, tmp_path, providers, fp16, tolerance
):
    options = OnnxOptions(providers=providers, trt_fp16=fp16, trt_cache_dir=tmp_path)
    session = OnnxRuntimeSession(MODEL_FILE, options)
    assert session.providers[0] == providers[0] and session.degraded is None
    assert session.on_accelerator
    scores = session.run(batch)[0][..., 4]
    np.testing.assert_allclose(scores, on_cpu[..., 4], atol=tolerance)


def test_batches_of_1_to_32_on_cuda():
    session = OnnxRuntimeSession(MODEL_FILE, OnnxOptions(providers=CUDA))
    for size in (1, 2, 4, 8, 16, 32):
        (output,) = session.run(np.zeros((size, 3, 416, 416), np.float32))
        assert output.shape == (size, 2535, 85)


def test_a_session_through_the_server_runs_on_cuda():
    from sources import SyntheticSource

    server = ServerProcess(inference_backend="onnxruntime")
    try:
        server.wait_ready()
        ready = server.get("/readyz").json()
        assert ready["status"] == "ready", ready
        assert ready["models"]["yolov3-tiny-416"]["device"].startswith(("CUDA", "Tensorrt"))
        source = FrameSourceStream(lambda: SyntheticSource(640, 480, fps=30, frames=30))
        config = StreamConfig(data_output=["predictions"], realtime_processing=False)
        results = []
        with Client(server.url).webrtc.stream(source, workflow=DETECT_SPEC, config=config) as s:
            s.on_data("predictions")(lambda value: results.append(value))
            s.wait(timeout=60)
        assert len(results) >= 28
    finally:
        server.stop()
