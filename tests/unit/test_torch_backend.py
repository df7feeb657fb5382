"""The torch backend (``streaming/inference/torch_session.py``) finds what ONNX Runtime finds on
Debian's darknet photos: here on the CPU in fp32 (on CUDA in fp16 on a lent GPU:
``benchmarks/gpu/``). Skipped, saying why, where PyTorch or onnx2torch is not installed."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.config import Settings
from streaming.inference.decoders import DecodeOptions
from streaming.inference.default_model import DEFAULT_MODEL_ID
from streaming.inference.onnx_session import OnnxRuntimeSession
from streaming.inference.preprocess import Normalization, letterbox, letterboxed_canvas
from streaming.inference.torch_session import TorchOptions, TorchSession
from tests.conftest import load_photo

pytest.importorskip("torch", reason="the torch backend needs PyTorch: pip install '.[torch]'")
pytest.importorskip("onnx2torch", reason="the torch backend needs onnx2torch: '.[torch]'")

PHOTOS = ("dog.jpg", "person.jpg", "eagle.jpg", "horses.jpg")


def scores(output: np.ndarray) -> np.ndarray:
    """Per box and class: objectness times class probability (the decoder's score)."""
    return output[..., 4:5] * output[..., 5:]


def test_the_torch_backend_finds_what_onnx_runtime_finds(default_model_dir, photos):
    path = default_model_dir / DEFAULT_MODEL_ID / "model.onnx"
    reference = OnnxRuntimeSession(path)
    session = TorchSession(path, TorchOptions(device="cpu"))
    assert session.backend == "torch" and not session.on_accelerator
    assert session.device == "PyTorch CPU fp32" and session.providers == ["torch:cpu"]
    assert [i.name for i in session.inputs] == [i.name for i in reference.inputs]
    for name in PHOTOS:
        blob, _ = letterbox(load_photo(photos, name), 416, 416)
        expected, got = reference.run(blob)[0], session.run(blob)[0]
        assert got.shape == expected.shape and got.dtype == np.float32
        assert np.abs(scores(got) - scores(expected)).max() < 1e-3, name
        assert np.abs(got[..., :4] - expected[..., :4]).max() < 0.5, name  # px of 416
        strongest = np.unravel_index(scores(expected).argmax(), scores(expected).shape)
        assert np.unravel_index(scores(got).argmax(), scores(got).shape) == strongest, name
    # Resized uint8 frames, normalised by the session (on a GPU: inside its graph), give
    # what the CPU's blobs give; one model, one normalisation.
    assert session.takes_canvases(Normalization(swap_rb=True, scale=1 / 255))
    assert not session.takes_canvases(Normalization(swap_rb=False, scale=1 / 255))
    canvas, _ = letterboxed_canvas(load_photo(photos, "dog.jpg"), 416, 416)
    blob, _ = letterbox(load_photo(photos, "dog.jpg"), 416, 416)
    assert np.abs(session.run(canvas[None])[0] - session.run(blob)[0]).max() < 1e-3
    batch = np.concatenate([letterbox(load_photo(photos, n), 416, 416)[0] for n in PHOTOS])
    together = session.run(batch)[0]  # a batch gives each image what it gets alone
    assert np.abs(together[0] - session.run(batch[:1])[0][0]).max() < 1e-3
    session.close()


def test_the_server_runs_a_model_on_the_torch_backend_when_told(default_model_dir, photos):
    from streaming.inference.registry import ModelRegistry

    settings = Settings(models_dir=default_model_dir, inference_backend="torch",
                        prepare_default_model=False)  # fmt: skip
    registry = ModelRegistry(settings)
    try:
        model = registry.get(DEFAULT_MODEL_ID)
        assert model.session.backend == "torch"
        assert len(model.inputs) == 1  # no input variants: one shape for the GPU's batches
        assert model.inputs[0].canvas  # it normalises the resized frames itself
        found = model.detect(load_photo(photos, "dog.jpg"), DecodeOptions())
        assert {"dog", "bicycle"} <= set(found.data["class_name"]), found
    finally:
        registry.close()
