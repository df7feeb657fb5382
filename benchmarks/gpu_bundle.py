"""``python -m benchmarks gpu-bundle``: everything the lent GPU machine lacks, in one
git-ignored folder (``benchmarks/gpu/bundle``) that a device call carries: the default model
with its weights stored as fp16 (half the bytes; widened back to fp32 there), its class names,
the darknet photos for the parity check, and the wheels it has no registry to fetch (PyAV for
the decoding step, onnx2torch for the torch backend). Then ``bash benchmarks/gpu/run.sh``."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
from onnx import numpy_helper

from streaming.config import Settings
from streaming.inference.default_model import ensure_default_model

HERE = Path(__file__).resolve().parent / "gpu"
BUNDLE = HERE / "bundle"
LIMIT_MIB = 60
WHEELS = ("onnx2torch==1.5.15", "av==18.1.0")
PHOTO_DIR = Path.home() / ".cache/visionstream/test-data/usr/share/darknet/data"
PHOTOS = ("person.jpg", "dog.jpg", "kite.jpg", "eagle.jpg")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def narrowed(model_path: Path, target: Path) -> None:
    """The model with each fp32 weight stored as fp16: not a runnable graph as it stands
    (``probe.load_model`` widens the weights back before any runtime sees it)."""
    model = onnx.load(str(model_path))
    for index, init in enumerate(model.graph.initializer):
        if init.data_type == onnx.TensorProto.FLOAT:
            half = numpy_helper.to_array(init).astype("float16")
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(half, init.name))
    target.write_bytes(model.SerializeToString())


def download_wheels(into: Path) -> None:
    """cp312 manylinux x86-64 wheels, the machine's Python, whatever this one runs."""
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                    *platforms, "-d", str(into), *WHEELS], check=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=BUNDLE)
    parser.add_argument("--models-dir", type=Path, help="where the default model is")
    parser.add_argument(
        "--no-wheels", action="store_true", help="no downloads: the packages are here (CI smoke)"
    )
    args = parser.parse_args()
    out: Path = args.out
    shutil.rmtree(out, ignore_errors=True)
    (out / "photos").mkdir(parents=True)
    models = args.models_dir or Settings().models_dir
    model_dir = ensure_default_model(models, progress=print)
    narrowed(model_dir / "model.onnx", out / "model_fp16w.onnx")
    names = [line for line in (PHOTO_DIR / "coco.names").read_text().splitlines() if line]
    (out / "coco.names").write_text("\n".join(names))
    for photo in PHOTOS:
        shutil.copy(PHOTO_DIR / photo, out / "photos" / photo)
    if not args.no_wheels:
        download_wheels(out / "wheels")
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"bundle {out}: {size / 2**20:.1f} MiB (limit {LIMIT_MIB} MiB)")
    if size > LIMIT_MIB * 2**20:
        sys.exit(f"the bundle is over {LIMIT_MIB} MiB: it would not travel with the tree")


if __name__ == "__main__":
    main()
