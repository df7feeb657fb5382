"""KServe V2 / Open Inference Protocol infer messages: JSON, and the binary tensor extension
(a JSON header of ``Inference-Header-Content-Length`` bytes, then raw little-endian tensors
in input order, each sized by its ``parameters.binary_data_size``)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "HEADER_LENGTH",
    "V2Error",
    "V2Request",
    "encode_response",
    "parse_request",
]

HEADER_LENGTH = "inference-header-content-length"

_DTYPES = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


class V2Error(ValueError):
    """A request the protocol does not allow; the message says what is wrong."""


@dataclass
class V2Request:
    """A parsed V2 inference request: its tensors by name and the outputs asked for."""

    id: str
    inputs: dict[str, np.ndarray]
    outputs: list[str] | None
    """Requested output names (None: all)."""
    binary: dict[str, bool] = field(default_factory=dict)
    """Per requested output: send its data binary."""
    binary_default: bool = False


def _tensor(spec: dict[str, Any], raw: memoryview | None) -> tuple[str, np.ndarray]:
    name = spec.get("name")
    datatype = spec.get("datatype")
    shape = spec.get("shape")
    valid_type = isinstance(datatype, str) and datatype in _DTYPES
    if not isinstance(name, str) or not valid_type or not isinstance(shape, list):
        raise V2Error("each input needs a name, a datatype (FP32, INT64, ...) and a shape")
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise V2Error(f"input {name}: shape must be non-negative integers, got {shape}")
    assert isinstance(datatype, str)  # valid_type checked it
    dtype = np.dtype(_DTYPES[datatype]).newbyteorder("<")
    count = math.prod(shape)  # Python ints: a hostile shape cannot overflow to a small count
    if raw is not None:
        if len(raw) != count * dtype.itemsize:
            raise V2Error(
                f"input {name}: {len(raw)} binary bytes for shape {shape} {datatype} "
                f"(needs {count * dtype.itemsize})"
            )
        return name, _shaped(np.frombuffer(raw, dtype=dtype), shape, name)
    if datatype == "FP16":
        raise V2Error(f"input {name}: FP16 needs the binary tensor extension")
    try:
        # A float beyond FP32's range would otherwise become inf with only a warning.
        with np.errstate(over="raise", invalid="raise"):
            array = np.asarray(spec.get("data"), dtype=dtype).reshape(-1)
    except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: -1 as UINT8
        raise V2Error(f"input {name}: data is not a {datatype} list: {exc}") from exc
    except FloatingPointError as exc:
        raise V2Error(f"input {name}: a value is out of {datatype}'s range") from exc
    if array.size != count:
        raise V2Error(f"input {name}: {array.size} values for shape {shape}")
    return name, _shaped(array, shape, name)


def _shaped(array: np.ndarray, shape: list[int], name: str) -> np.ndarray:
    try:
        return array.reshape(shape)
    except ValueError as exc:  # numpy's own limit: [0, 2**31, 2**31] holds 0 values but no array
        raise V2Error(f"input {name}: shape {shape} cannot be an array: {exc}") from exc


def _parameters(holder: dict[str, Any], what: str) -> dict[str, Any]:
    parameters = holder.get("parameters")
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise V2Error(f"{what}: parameters must be an object")
    return parameters


def parse_request(body: bytes, header_length: str | None) -> V2Request:
    if header_length is not None:
        try:
            length = int(header_length)
        except ValueError:
            raise V2Error("Inference-Header-Content-Length must be an integer") from None
        if not 0 < length <= len(body):
            raise V2Error(f"Inference-Header-Content-Length {length} exceeds the body")
        head, rest = body[:length], memoryview(body)[length:]
    else:
        head, rest = body, memoryview(b"")
    try:
        document = json.loads(head)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise V2Error(f"the request is not JSON: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("inputs"), list):
        raise V2Error("the request needs an 'inputs' list")
    inputs: dict[str, np.ndarray] = {}
    offset = 0
    for spec in document["inputs"]:
        if not isinstance(spec, dict):
            raise V2Error("each input must be an object")
        size = _parameters(spec, f"input {spec.get('name')}").get("binary_data_size")
        raw = None
        if size is not None:
            if not isinstance(size, int) or size < 0 or offset + size > len(rest):
                raise V2Error(f"input {spec.get('name')}: binary_data_size beyond the body")
            raw = rest[offset : offset + size]
            offset += size
        name, array = _tensor(spec, raw)
        inputs[name] = array
    if offset != len(rest):
        raise V2Error(f"{len(rest) - offset} binary bytes belong to no input")
    parameters = _parameters(document, "the request")
    request = V2Request(
        id=str(document.get("id") or ""),
        inputs=inputs,
        outputs=None,
        binary_default=bool(parameters.get("binary_data_output", False)),
    )
    if isinstance(document.get("outputs"), list):
        request.outputs = []
        for spec in document["outputs"]:
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                raise V2Error("each requested output needs a name")
            request.outputs.append(spec["name"])
            binary = _parameters(spec, f"output {spec['name']}").get("binary_data")
            if binary is not None:
                request.binary[spec["name"]] = bool(binary)
    return request


def encode_response(
    model: str, version: str, request: V2Request, outputs: dict[str, np.ndarray]
) -> tuple[bytes, dict[str, str]]:
    """The response body and its headers (binary outputs make it a header + raw tensors)."""
    described, blobs = [], []
    for name, array in outputs.items():
        array = np.ascontiguousarray(array)
        datatype = _NAMES.get(array.dtype.newbyteorder("="), "FP32")
        entry: dict[str, Any] = {"name": name, "datatype": datatype, "shape": list(array.shape)}
        if request.binary.get(name, request.binary_default):
            data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
            entry["parameters"] = {"binary_data_size": len(data)}
            blobs.append(data)
        else:
            entry["data"] = array.reshape(-1).tolist()
        described.append(entry)
    head = json.dumps(
        {"model_name": model, "model_version": version, "id": request.id, "outputs": described},
        separators=(",", ":"),
    ).encode()
    if not blobs:
        return head, {"content-type": "application/json"}
    return b"".join([head, *blobs]), {
        "content-type": "application/octet-stream",
        HEADER_LENGTH: str(len(head)),
    }
