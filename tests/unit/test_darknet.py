"""The Darknet converter on a small made-up network, checked against numpy."""

import numpy as np
import onnxruntime as ort
import pytest

from streaming.inference.darknet import DarknetConversionError, convert

CFG = """
[net]
width=32
height=32
channels=3

[convolutional]
batch_normalize=1
filters=4
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
filters=4
size=1
stride=1
pad=1
activation=linear

[maxpool]
size=2
stride=1

[convolutional]
size=1
stride=1
pad=1
filters=21
activation=linear

[yolo]
mask = 0,1,2
anchors = 10,14, 23,27, 37,58
classes=2
num=3

[route]
layers = -3

[upsample]
stride=2

[route]
layers = -1, 0

[convolutional]
size=1
stride=1
pad=1
filters=21
activation=linear

[yolo]
mask = 0,1,2
anchors = 10,14, 23,27, 37,58
classes=2
num=3
"""
# conv0 bn: 4*4 + 4*3*9; conv2: 4 + 4*4; conv4: 21 + 21*4; conv9: 21 + 21*8
WEIGHTS = 4 * 4 + 4 * 3 * 9 + 4 + 4 * 4 + 21 + 21 * 4 + 21 + 21 * 8


def _weights(count: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    values = rng.normal(0, 0.2, count).astype("<f4")
    values[12:16] = np.abs(values[12:16]) + 0.5  # conv0's rolling variances: positive
    header = np.array([0, 2, 0], "<i4").tobytes() + np.array([0], "<i8").tobytes()
    return header + values.tobytes()


def test_every_weight_is_consumed_and_outputs_are_decoded():
    result = convert(CFG, _weights(WEIGHTS))
    assert result.weights_consumed == WEIGHTS
    assert result.num_boxes == 3 * (16 * 16 + 32 * 32)
    session = ort.InferenceSession(
        result.model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    batch = np.random.default_rng(1).random((2, 3, 32, 32), dtype=np.float32)
    out = session.run(None, {"images": batch})[0]
    assert out.shape == (2, result.num_boxes, 7)
    assert np.all((out[..., 4:] >= 0) & (out[..., 4:] <= 1))  # sigmoid scores
    assert np.all(out[..., 2:4] > 0)  # exp() sizes
    first = out[0, : 16 * 16]  # anchor 0 of the 16x16 head: centres cover cells in order
    cells = np.floor(first[:, :2] / 2).astype(int)  # stride 32/16 = 2
    expected = np.stack(np.meshgrid(np.arange(16), np.arange(16)), -1).reshape(-1, 2)
    assert np.array_equal(cells, expected)


@pytest.mark.parametrize("delta", [-1, 1])
def test_weights_that_do_not_match_the_cfg_are_refused(delta):
    with pytest.raises(DarknetConversionError, match="weights"):
        convert(CFG, _weights(WEIGHTS + delta))


def test_unsupported_layers_are_named():
    with pytest.raises(DarknetConversionError, match="reorg"):
        convert("[net]\nwidth=8\nheight=8\n[reorg]\nstride=2\n", _weights(0))


def test_a_second_input_size_uses_the_same_weights_on_a_grid_of_its_own():
    """A rectangle (32x16 where the cfg says 32x32): every weight used, each head's grid
    as high as the input allows, boxes in the rectangle's pixels."""
    result = convert(CFG, _weights(WEIGHTS), (32, 16))
    assert (result.input_width, result.input_height) == (32, 16)
    assert result.weights_consumed == WEIGHTS
    assert result.num_boxes == 3 * (16 * 8 + 32 * 16)
    session = ort.InferenceSession(
        result.model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    out = session.run(None, {"images": np.zeros((1, 3, 16, 32), np.float32)})[0]
    assert out.shape == (1, result.num_boxes, 7)
    centres = out[0, : 16 * 8, :2]  # anchor 0 of the first head: 16 cells by 8, stride 2
    assert centres[:, 0].max() < 32 and centres[:, 1].max() < 16


def test_an_input_size_the_heads_do_not_divide_is_refused():
    with pytest.raises(DarknetConversionError, match="not a multiple of the stride"):
        convert(CFG, _weights(WEIGHTS), (33, 32))
