"""``visionstream models add``: an ONNX export the user brings, made a servable model."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import onnx

from ..errors import ModelError
from .decoders import get_decoder
from .manifest import MODEL_NAME, DecoderName, ModelManifest
from .onnx_session import OnnxRuntimeSession

__all__ = ["add_model"]


def _input_size(model: onnx.ModelProto) -> tuple[int, int] | None:
    """Height and width of a static NCHW image input, else None."""
    dims = model.graph.input[0].type.tensor_type.shape.dim
    if len(dims) == 4 and dims[2].dim_value and dims[3].dim_value:
        return dims[2].dim_value, dims[3].dim_value
    return None


def add_model(
    models_dir: Path,
    source: Path,
    *,
    name: str,
    decoder: DecoderName,
    class_names: list[str],
    input_size: tuple[int, int] | None = None,
    version: str = "1",
    **fields: Any,
) -> ModelManifest:
    """Copy ``source`` into ``models_dir/name`` with a manifest, after checking that it loads
    and that ``decoder`` can read its outputs; nothing is left behind when it cannot."""
    if not MODEL_NAME.fullmatch(name):
        raise ModelError(f"model name {name!r}: letters, digits, '.', '_', '-' only")
    try:
        model = onnx.load(str(source), load_external_data=False)
    except Exception as exc:
        raise ModelError(f"{source} is not an ONNX model: {exc}") from exc
    size = input_size or _input_size(model)
    if size is None:
        raise ModelError(f"{source.name} has a dynamic input size: give --input-size WxH")
    height, width = size
    target = models_dir / name
    if target.exists():
        raise ModelError(f"model '{name}' already exists in {models_dir}")
    manifest = ModelManifest(
        name=name,
        version=version,
        input_width=width,
        input_height=height,
        decoder=decoder,
        class_names=class_names,
        source=str(source.name),
        sha256=hashlib.sha256(source.read_bytes()).hexdigest(),
        **fields,
    )
    target.mkdir(parents=True)
    try:
        shutil.copyfile(source, manifest.onnx_path(target))
        session = OnnxRuntimeSession(manifest.onnx_path(target))
        try:
            get_decoder(manifest).check([o.shape for o in session.outputs])
        except ValueError as exc:
            raise ModelError(str(exc)) from exc
        manifest.save(target)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return manifest
