"""Darknet (``.cfg`` + ``.weights``) to ONNX, with the YOLO heads decoded inside the graph.

Only what YOLOv3 and YOLOv3-tiny use is supported: convolutional (with or without batch norm,
leaky or linear), maxpool, route, shortcut, upsample and yolo. The output is one tensor
``[batch, boxes, 5 + classes]``: cx, cy, w, h in input pixels, then objectness and class
probabilities (sigmoid applied), with no NMS inside.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["DarknetConversionError", "DarknetModel", "convert", "parse_cfg"]

_BN_EPS = 1e-6  # Darknet normalises with sqrt(var + .000001)
_OPSET = 13


class DarknetConversionError(ValueError):
    """The cfg is unsupported or the weights do not match it."""


@dataclass
class DarknetModel:
    """Result of a conversion: the ONNX model and facts the manifest needs."""

    model: onnx.ModelProto
    input_width: int
    input_height: int
    num_classes: int
    num_boxes: int
    weights_consumed: int


@dataclass
class _Section:
    kind: str
    options: dict[str, str] = field(default_factory=dict)

    def int(self, key: str, default: int | None = None) -> int:
        if key not in self.options:
            if default is None:
                raise DarknetConversionError(f"[{self.kind}] lacks '{key}'")
            return default
        return int(self.options[key])

    def ints(self, key: str) -> builtins.list[builtins.int]:
        return [int(v) for v in self.options[key].split(",") if v.strip()]


def parse_cfg(text: str) -> list[_Section]:
    sections: list[_Section] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append(_Section(line[1:-1].strip()))
        elif "=" in line:
            if not sections:
                raise DarknetConversionError(f"option outside a section: {line!r}")
            key, value = line.split("=", 1)
            sections[-1].options[key.strip()] = value.strip()
        else:
            raise DarknetConversionError(f"cannot parse cfg line: {line!r}")
    if not sections or sections[0].kind not in ("net", "network"):
        raise DarknetConversionError("cfg must start with a [net] section")
    return sections


class _WeightReader:
    def __init__(self, data: bytes) -> None:
        major, minor, _revision = np.frombuffer(data[:12], dtype="<i4")
        seen_size = 8 if major * 10 + minor >= 2 else 4
        self._values = np.frombuffer(data[12 + seen_size :], dtype="<f4")
        self.offset = 0

    def take(self, count: int) -> np.ndarray:
        end = self.offset + count
        if end > self._values.size:
            raise DarknetConversionError(
                f"weights file too short: need {end} floats, have {self._values.size}"
            )
        values = self._values[self.offset : end]
        self.offset = end
        return values

    @property
    def total(self) -> int:
        return int(self._values.size)


class _GraphBuilder:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count}"

    def const(self, prefix: str, value: np.ndarray) -> str:
        name = self.name(prefix)
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def node(self, op: str, inputs: list[str], prefix: str, **attrs: Any) -> str:
        out = self.name(prefix)
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out


def _yolo_head(
    graph: _GraphBuilder,
    tensor: str,
    section: _Section,
    channels: int,
    grid_h: int,
    grid_w: int,
    input_w: int,
    input_h: int,
) -> tuple[str, int]:
    mask = section.ints("mask")
    anchors = np.array(section.ints("anchors"), dtype=np.float32).reshape(-1, 2)[mask]
    classes = section.int("classes")
    attrs = 5 + classes
    if channels != len(mask) * attrs:
        raise DarknetConversionError(
            f"[yolo] expects {len(mask) * attrs} input channels, got {channels}"
        )
    count = len(mask) * grid_h * grid_w
    stride = np.array([input_w / grid_w, input_h / grid_h], dtype=np.float32)
    # [N, A*attrs, H, W] -> [N, A, H, W, attrs] -> [N, A*H*W, attrs]; 0 keeps the batch dim.
    shaped = graph.node(
        "Reshape",
        [tensor, graph.const("shape", np.array([0, len(mask), attrs, grid_h, grid_w], np.int64))],
        "yolo_reshape",
    )
    moved = graph.node("Transpose", [shaped], "yolo_transpose", perm=[0, 1, 3, 4, 2])
    flat = graph.node(
        "Reshape", [moved, graph.const("shape", np.array([0, count, attrs], np.int64))], "yolo_flat"
    )

    def part(start: int, end: int) -> str:
        return graph.node(
            "Slice",
            [
                flat,
                graph.const("starts", np.array([start], np.int64)),
                graph.const("ends", np.array([end], np.int64)),
                graph.const("axes", np.array([2], np.int64)),
            ],
            "yolo_slice",
        )

    cols, rows = np.meshgrid(np.arange(grid_w), np.arange(grid_h))
    cell = np.stack([cols, rows], axis=-1).reshape(1, 1, grid_h * grid_w, 2)
    grid = np.broadcast_to(cell, (1, len(mask), grid_h * grid_w, 2)).reshape(1, count, 2)
    anchor_wh = np.repeat(anchors[:, None, :], grid_h * grid_w, axis=1).reshape(1, count, 2)

    xy = graph.node("Sigmoid", [part(0, 2)], "yolo_xy")
    xy = graph.node("Add", [xy, graph.const("grid", grid.astype(np.float32))], "yolo_xy")
    xy = graph.node("Mul", [xy, graph.const("stride", stride.reshape(1, 1, 2))], "yolo_xy")
    wh = graph.node("Exp", [part(2, 4)], "yolo_wh")
    wh = graph.node("Mul", [wh, graph.const("anchors", anchor_wh.astype(np.float32))], "yolo_wh")
    scores = graph.node("Sigmoid", [part(4, attrs)], "yolo_scores")
    return graph.node("Concat", [xy, wh, scores], "yolo_out", axis=2), count


class _Layer(NamedTuple):
    """A layer's output: tensor name, channels, height, width."""

    tensor: str
    channels: int
    height: int
    width: int


@dataclass
class _Conversion:
    """What every layer converter reads and adds to."""

    graph: _GraphBuilder
    reader: _WeightReader
    input_width: int
    input_height: int
    outputs: list[_Layer] = field(default_factory=list)
    heads: list[str] = field(default_factory=list)
    num_boxes: int = 0
    num_classes: int = 0

    def layer(self, index: int, offset: int) -> _Layer:
        """An earlier layer's output, by absolute index or offset from ``index``."""
        return self.outputs[offset if offset >= 0 else index + offset]


def _convolutional(conv: _Conversion, index: int, section: _Section, x: _Layer) -> _Layer:
    reader, graph = conv.reader, conv.graph
    filters, size = section.int("filters"), section.int("size")
    stride = section.int("stride", 1)
    pad = size // 2 if section.int("pad", 0) else 0
    c = x.channels
    if section.int("batch_normalize", 0):
        beta, gamma = reader.take(filters), reader.take(filters)
        mean, var = reader.take(filters), reader.take(filters)
        kernel = reader.take(filters * c * size * size).reshape(filters, c, size, size)
        scale = gamma / np.sqrt(var + _BN_EPS)
        kernel = kernel * scale[:, None, None, None]
        bias = beta - mean * scale
    else:
        bias = reader.take(filters)
        kernel = reader.take(filters * c * size * size).reshape(filters, c, size, size)
    out = graph.node(
        "Conv",
        [
            x.tensor,
            graph.const("W", kernel.astype(np.float32)),
            graph.const("B", bias.astype(np.float32)),
        ],
        f"conv{index}",
        kernel_shape=[size, size],
        strides=[stride, stride],
        pads=[pad, pad, pad, pad],
    )
    activation = section.options.get("activation", "linear")
    if activation == "leaky":
        out = graph.node("LeakyRelu", [out], f"leaky{index}", alpha=0.1)
    elif activation != "linear":
        raise DarknetConversionError(f"unsupported activation '{activation}'")
    h = (x.height + 2 * pad - size) // stride + 1
    w = (x.width + 2 * pad - size) // stride + 1
    return _Layer(out, filters, h, w)


def _maxpool(conv: _Conversion, index: int, section: _Section, x: _Layer) -> _Layer:
    size, stride = section.int("size"), section.int("stride", 1)
    if stride == 1:
        # Darknet keeps the size with stride 1 by padding right/bottom only.
        extra = size - 1
        pads = [0, 0, extra, extra]
        oh, ow = x.height, x.width
    else:
        pads = [0, 0, 0, 0]
        oh, ow = (x.height - size) // stride + 1, (x.width - size) // stride + 1
    out = conv.graph.node(
        "MaxPool",
        [x.tensor],
        f"maxpool{index}",
        kernel_shape=[size, size],
        strides=[stride, stride],
        pads=pads,
    )
    return _Layer(out, x.channels, oh, ow)


def _upsample(conv: _Conversion, index: int, section: _Section, x: _Layer) -> _Layer:
    stride = section.int("stride", 2)
    scales = conv.graph.const("scales", np.array([1, 1, stride, stride], np.float32))
    out = conv.graph.node("Resize", [x.tensor, "", scales], f"upsample{index}", mode="nearest")
    return _Layer(out, x.channels, x.height * stride, x.width * stride)


def _route(conv: _Conversion, index: int, section: _Section, x: _Layer) -> _Layer:
    picked = [conv.layer(index, i) for i in section.ints("layers")]
    if len(picked) == 1:
        return picked[0]
    if len({(p.height, p.width) for p in picked}) != 1:
        raise DarknetConversionError(f"route {section.ints('layers')} joins different sizes")
    out = conv.graph.node("Concat", [p.tensor for p in picked], f"route{index}", axis=1)
    return _Layer(out, sum(p.channels for p in picked), picked[0].height, picked[0].width)


def _shortcut(conv: _Conversion, index: int, section: _Section, x: _Layer) -> _Layer:
    other = conv.layer(index, section.int("from"))
    if section.options.get("activation", "linear") != "linear":
        raise DarknetConversionError("shortcut activations are unsupported")
    out = conv.graph.node("Add", [x.tensor, other.tensor], f"shortcut{index}")
    return _Layer(out, x.channels, x.height, x.width)


def _yolo(conv: _Conversion, index: int, section: _Section, x: _Layer) -> _Layer:
    if conv.input_width % x.width or conv.input_height % x.height:
        raise DarknetConversionError(
            f"input {conv.input_width}x{conv.input_height} is not a multiple of the stride of "
            f"[yolo] section {index + 1} (its grid is {x.width}x{x.height})"
        )
    head, count = _yolo_head(
        conv.graph,
        x.tensor,
        section,
        x.channels,
        x.height,
        x.width,
        conv.input_width,
        conv.input_height,
    )
    conv.heads.append(head)
    conv.num_boxes += count
    conv.num_classes = section.int("classes")
    return x  # a yolo layer passes its input through for later routes


_LAYERS: dict[str, Callable[[_Conversion, int, _Section, _Layer], _Layer]] = {
    "convolutional": _convolutional,
    "maxpool": _maxpool,
    "upsample": _upsample,
    "route": _route,
    "shortcut": _shortcut,
    "yolo": _yolo,
}


def convert(
    cfg_text: str, weights: bytes, input_size: tuple[int, int] | None = None
) -> DarknetModel:
    """Build the ONNX model, for the cfg's input size or ``input_size`` (width, height:
    multiples of the network's stride, 32 for YOLOv3); raises ``DarknetConversionError``
    unless every weight is used and every head's grid divides the input."""
    sections = parse_cfg(cfg_text)
    net = sections[0]
    width, height, channels = net.int("width"), net.int("height"), net.int("channels", 3)
    if input_size is not None:
        width, height = input_size
    reader = _WeightReader(weights)
    graph = _GraphBuilder()
    conv = _Conversion(graph, reader, width, height)
    current = _Layer("images", channels, height, width)
    for index, section in enumerate(sections[1:]):
        converter = _LAYERS.get(section.kind)
        if converter is None:
            raise DarknetConversionError(
                f"unsupported layer [{section.kind}] (section {index + 1}); supported: "
                + ", ".join(f"[{kind}]" for kind in _LAYERS)
            )
        current = converter(conv, index, section, current)
        conv.outputs.append(current)
    heads, num_boxes, num_classes = conv.heads, conv.num_boxes, conv.num_classes

    if not heads:
        raise DarknetConversionError("cfg has no [yolo] layer")
    if reader.offset != reader.total:
        raise DarknetConversionError(
            f"weights do not match the cfg: used {reader.offset} of {reader.total} floats"
        )
    final = heads[0] if len(heads) == 1 else graph.node("Concat", heads, "detections", axis=1)
    graph.nodes.append(helper.make_node("Identity", [final], ["output"], name="output"))
    onnx_graph = helper.make_graph(
        graph.nodes,
        "darknet-yolo",
        [
            helper.make_tensor_value_info(
                "images", TensorProto.FLOAT, ["batch", channels, height, width]
            )
        ],
        [
            helper.make_tensor_value_info(
                "output", TensorProto.FLOAT, ["batch", num_boxes, 5 + num_classes]
            )
        ],
        graph.initializers,
    )
    model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = 8  # readable by every ONNX Runtime and OpenVINO we support
    onnx.checker.check_model(model)
    return DarknetModel(
        model=model,
        input_width=width,
        input_height=height,
        num_classes=num_classes,
        num_boxes=num_boxes,
        weights_consumed=reader.offset,
    )


def convert_files(cfg: Path, weights: Path) -> DarknetModel:
    return convert(cfg.read_text(), weights.read_bytes())
