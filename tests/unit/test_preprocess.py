"""A frame's resized canvas, normalised as ``Normalization`` says (what a session that takes
canvases does on its device: ``TorchSession``), is the blob ``prepare`` makes on the CPU, for
either channel order, with or without mean and std, letterboxed or stretched."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.inference.default_model import DEFAULT_MODEL_ID
from streaming.inference.manifest import ModelManifest
from streaming.inference.preprocess import Normalization, prepare


def normalised(canvas: np.ndarray, norm: Normalization) -> np.ndarray:
    """The device's steps, in numpy: NHWC -> NCHW, channel swap, scale, mean and std."""
    x = canvas.transpose(0, 3, 1, 2).astype(np.float32)
    if norm.swap_rb:
        x = x[:, ::-1]
    x = x * np.float32(norm.scale)
    if norm.mean is not None and norm.std is not None:
        mean = np.array(norm.mean, np.float32)[None, :, None, None]
        x = (x - mean) / np.array(norm.std, np.float32)[None, :, None, None]
    return x


@pytest.mark.parametrize("order", ["RGB", "BGR"])
@pytest.mark.parametrize("stats", [None, ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
@pytest.mark.parametrize("resize", ["letterbox", "stretch"])
def test_a_canvas_normalised_as_told_is_the_blob(default_model_dir, order, stats, resize):
    mean, std = stats or (None, None)
    changes = {"channel_order": order, "resize": resize, "mean": mean, "std": std}
    manifest = ModelManifest.load(default_model_dir / DEFAULT_MODEL_ID).model_copy(update=changes)
    frame = np.random.default_rng(5).integers(0, 256, (48, 80, 3), np.uint8)
    frame[:, :, 0] = 0  # blue off: a swapped channel order cannot pass unnoticed
    blob, box = prepare(frame, manifest)
    canvas, same_box = prepare(frame, manifest, canvas=True)
    height, width = manifest.input_height, manifest.input_width
    assert canvas.dtype == np.uint8 and canvas.shape == (1, height, width, 3)
    assert same_box == box
    np.testing.assert_allclose(normalised(canvas, Normalization.of(manifest)), blob, atol=1e-5)


def test_sessions_take_blobs_unless_they_say_otherwise(default_model_dir):
    from streaming.inference.model import DetectionModel

    model = DetectionModel.from_directory(default_model_dir / DEFAULT_MODEL_ID)
    try:
        assert not model.inputs[0].canvas  # ONNX Runtime: float blobs, as ever
    finally:
        model.close()
