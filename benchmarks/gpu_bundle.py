"""``python -m benchmarks gpu-bundle``: everything the lent GPU machine lacks, in two
git-ignored folders, one per device call (at most 64 MiB travels with each):

- ``benchmarks/gpu/bundle`` (the first call): the default model with its weights stored as
  fp16 (half the bytes; widened back to fp32 there) and its manifest, its class names, the
  darknet photos for the parity check, and the wheels it has no registry to fetch (PyAV for
  decoding and the server, onnx2torch for the torch backend);
- ``benchmarks/gpu/bundle-server`` (the second call, on the same warm machine): the server's
  other packages (scipy, which supervision imports, is 35 MB of them).

Then ``bash benchmarks/gpu/run.sh`` (benchmarks/README.md, "What the run measures")."""

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
SERVER_BUNDLE = HERE / "bundle-server"
LIMIT_MIB = 60
WHEELS = ("onnx2torch==1.5.15", "av==18.1.0")
# What `import streaming.server.app` loads beyond the machine's own packages (torch,
# torchvision, onnxruntime, onnx, numpy, OpenCV, httpx, requests, psutil, prometheus-client
# and theirs), at the versions the suite ran on; checked in a Python 3.12 venv holding only
# those (benchmarks/README.md, "What the run measures").
SERVER_WHEELS = (
    "fastapi==0.165.0", "starlette==1.10.0", "fastapi-offline==1.7.7", "uvicorn==0.54.0",
    "click==8.4.0", "python-multipart==0.0.34", "pydantic==2.14.4", "pydantic-core==2.50.5",
    "pydantic-settings==2.14.1", "python-dotenv==1.2.2", "annotated-types==0.7.0",
    "annotated-doc==0.0.7", "typing-inspection==0.4.5", "aiortc==1.16.0", "aioice==0.13.0",
    "pyee==13.0.1", "pylibsrtp==1.0.0", "cryptography==50.0.2", "pyopenssl==26.4.0",
    "cffi==2.0.0", "pycparser==3.0", "google-crc32c==1.9.0", "dnspython==2.9.2",
    "ifaddr==0.2.0", "supervision==0.30.9", "scipy==1.17.1", "trackers==2.6.1",
    "pydeprecate==0.13.0", "pyyaml==6.0.3", "tqdm==4.70.1", "defusedxml==0.7.1",
    "sqlalchemy==2.1.9", "greenlet==3.3.2", "alembic==1.20.1", "mako==1.4.3",
    "paho-mqtt==2.2.0", "opentelemetry-api==1.45.2", "rich==15.0.0", "google-re2==1.1.20251105",
)  # fmt: skip
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


def download_wheels(into: Path, wheels: tuple[str, ...]) -> None:
    """cp312 manylinux x86-64 wheels, the machine's Python, whatever this one runs."""
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                    *platforms, "-d", str(into), *wheels], check=True)  # fmt: skip


def checked(folder: Path) -> None:
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    print(f"bundle {folder}: {size / 2**20:.1f} MiB (limit {LIMIT_MIB} MiB)")
    if size > LIMIT_MIB * 2**20:
        sys.exit(f"{folder} is over {LIMIT_MIB} MiB: it would not travel with the tree")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=BUNDLE)
    parser.add_argument("--server-out", type=Path, default=SERVER_BUNDLE)
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
    shutil.copy(model_dir / "manifest.json", out / "manifest.json")
    names = [line for line in (PHOTO_DIR / "coco.names").read_text().splitlines() if line]
    (out / "coco.names").write_text("\n".join(names))
    for photo in PHOTOS:
        shutil.copy(PHOTO_DIR / photo, out / "photos" / photo)
    if not args.no_wheels:
        download_wheels(out / "wheels", WHEELS)
        shutil.rmtree(args.server_out, ignore_errors=True)
        download_wheels(args.server_out / "wheels", SERVER_WHEELS)
    checked(out)
    if not args.no_wheels:
        checked(args.server_out)
        print(f"then two device calls, the second at once after the first:\n"
              f"  1. carry {out}: GPU_RUN_SECONDS=360 bash benchmarks/gpu/run.sh\n"
              f"  2. carry {args.server_out}: GPU_STEPS=server bash "
              f"benchmarks/gpu/run.sh")  # fmt: skip


if __name__ == "__main__":
    main()
