"""Tiny ONNX models whose outputs are fixed tensors, in the layouts real exports use: the
decoders are checked exactly against known boxes, on every backend, at any batch size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from streaming.inference.manifest import ModelManifest

# Rows of a YOLOv3/v5 output for two objects: a dog at (15, 18)-(25, 30) scoring 0.81 and a
# cat at (36, 36)-(44, 44) scoring 0.80 (in 64x64 network pixels), plus a weaker copy of the
# dog that NMS removes and a row below any threshold.
YOLO_ROWS = np.array(
    [
        [20, 24, 10, 12, 0.9, 0.1, 0.9, 0.0],  # dog 0.81
        [40, 40, 8, 8, 0.8, 1.0, 0.0, 0.0],  # cat 0.80
        [21, 24, 10, 12, 0.85, 0.1, 0.9, 0.0],  # the dog again, weaker: NMS removes it
        [10, 10, 4, 4, 0.1, 1.0, 1.0, 1.0],  # below the threshold
    ],
    np.float32,
)
V8_ROWS = np.column_stack([YOLO_ROWS[:, :4], YOLO_ROWS[:, 5:] * YOLO_ROWS[:, 4:5]])


def constant_model(path: Path, outputs: list[tuple[str, np.ndarray]], size: int = 64) -> Path:
    """Input ``images`` [batch, 3, size, size]; each output is its array, repeated per image.
    The input feeds the outputs through its shape, so runtimes cannot fold it away."""
    nodes = [
        helper.make_node("Shape", ["images"], ["input_shape"]),
        helper.make_node("Slice", ["input_shape", "zero", "one"], ["batch"]),
    ]
    initializers = [numpy_helper.from_array(np.array([0], np.int64), "zero"),
                    numpy_helper.from_array(np.array([1], np.int64), "one")]  # fmt: skip
    graph_outputs = []
    for name, value in outputs:
        value = np.asarray(value)
        initializers.append(numpy_helper.from_array(value[None], f"{name}_value"))
        initializers.append(
            numpy_helper.from_array(np.array(value.shape, np.int64), f"{name}_dims")
        )
        nodes.append(
            helper.make_node("Concat", ["batch", f"{name}_dims"], [f"{name}_shape"], axis=0)
        )
        nodes.append(helper.make_node("Expand", [f"{name}_value", f"{name}_shape"], [name]))
        element = helper.np_dtype_to_tensor_dtype(value.dtype)
        graph_outputs.append(helper.make_tensor_value_info(name, element, ["batch", *value.shape]))
    graph = helper.make_graph(
        nodes,
        "constant",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, size, size])],
        graph_outputs,
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


COLOURS = ["red", "green", "blue"]


def colour_classifier(path: Path, size: int = 32) -> Path:
    """A real classifier of the simplest kind, for crops: the mean of each input channel
    (red, green, blue in RGB order), scaled, as the logits of ``COLOURS``. Any batch size."""
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["means"], axes=[2, 3], keepdims=0),
        helper.make_node("Mul", ["means", "scale"], ["output0"]),
    ]
    graph = helper.make_graph(
        nodes,
        "colours",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, size, size])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(np.array(20.0, np.float32), "scale")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def colour_classifier_directory(root: Path, name: str = "colours", size: int = 32) -> Path:
    """A models-directory entry for ``colour_classifier``."""
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    colour_classifier(directory / "model.onnx", size)
    ModelManifest(name=name, version="test", input_width=size, input_height=size,
                  class_names=COLOURS, decoder="classification", task="classification",
                  resize="stretch").save(directory)  # fmt: skip
    return directory


def model_directory(
    root: Path, name: str, outputs: list[tuple[str, np.ndarray]], size: int = 64, **manifest
) -> Path:
    """A models-directory entry (ONNX file + manifest) for ``constant_model``."""
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    constant_model(directory / "model.onnx", outputs, size)
    fields = {"name": name, "version": "test", "input_width": size, "input_height": size,
              "class_names": ["cat", "dog", "bird"], **manifest}  # fmt: skip
    ModelManifest(**fields).save(directory)
    return directory


# Segmentation (YOLOv8-seg): the same rows plus 4 mask coefficients, and 4 prototypes on a
# 16x16 grid (a quarter of the input). The dog's mask is all of its box (prototype 0 is high
# everywhere); the cat's is only the 2x2 grid cells (8x8 pixels) at its box's centre.
SEG_PROTOS = np.full((4, 16, 16), -10.0, np.float32)
SEG_PROTOS[0] = 10.0
SEG_PROTOS[1, 9:11, 9:11] = 10.0
SEG_COEFFICIENTS = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0]], np.float32)
SEG_ROWS = np.column_stack([V8_ROWS, SEG_COEFFICIENTS])

# Pose (YOLOv8-pose): one class ("animal"), two keypoints ("nose", "tail") per row.
KEYPOINTS = np.array(
    [
        [19, 20, 0.9, 23, 29, 0.8],  # the dog's
        [38, 37, 0.7, 42, 43, 0.6],  # the cat's
        [19, 20, 0.9, 23, 29, 0.8],  # the weaker dog's (NMS removes it)
        [0, 0, 0.1, 0, 0, 0.1],
    ],
    np.float32,
)
POSE_ROWS = np.column_stack([V8_ROWS[:, :4], V8_ROWS[:, 4:].max(axis=1), KEYPOINTS])

CLASS_LOGITS = np.array([1.0, 3.0, 0.0], np.float32)  # cat, dog, bird: dog wins
