"""``visionstream serve | stream | bench | models pull | list | add``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .config import Settings

__all__ = ["main"]


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .server import create_app

    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    settings = Settings(**overrides)
    app = create_app(settings)
    print(f"visionstream listening on http://{settings.host}:{settings.port}", flush=True)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=args.log_level)
    return 0


def _models_pull(args: argparse.Namespace) -> int:
    from .inference.default_model import DEFAULT_MODEL_ID, ensure_default_model

    if args.name != DEFAULT_MODEL_ID:
        print(f"unknown model '{args.name}'; pullable: {DEFAULT_MODEL_ID}", file=sys.stderr)
        return 2
    path = ensure_default_model(Settings().models_dir, progress=lambda m: print(m, flush=True))
    print(path)
    return 0


def _models_list(_: argparse.Namespace) -> int:
    from .inference.registry import ModelRegistry

    for name in ModelRegistry(Settings()).available():
        print(name)
    return 0


def _models_add(args: argparse.Namespace) -> int:
    from .errors import ModelError
    from .inference.class_names import read_class_names
    from .inference.importer import add_model

    size = None
    if args.input_size:
        width, _, height = args.input_size.partition("x")
        size = (int(height), int(width))
    extra = {key: getattr(args, key) for key in ("box_format", "class_id_offset", "logits")
             if getattr(args, key) is not None}  # fmt: skip
    if args.normalized_boxes:
        extra["normalized_boxes"] = True
    try:
        manifest = add_model(
            Settings().models_dir,
            Path(args.file),
            name=args.name or Path(args.file).stem,
            decoder=args.decoder,
            class_names=read_class_names(args.names),
            input_size=size,
            version=args.version,
            channel_order=args.channel_order,
            **extra,
        )
    except (ModelError, ValueError) as exc:
        print(f"cannot add {args.file}: {exc}", file=sys.stderr)
        return 2
    print(f"added {manifest.name}: {manifest.input_width}x{manifest.input_height}, "
          f"{manifest.decoder}, {len(manifest.class_names)} classes")  # fmt: skip
    return 0


def _bench(args: argparse.Namespace) -> int:
    """The harness lives in the source checkout's benchmarks/ (it drives the real server)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    if not (root / "benchmarks" / "__main__.py").is_file():
        print("visionstream bench runs from a source checkout (benchmarks/ is not installed)",
              file=sys.stderr)  # fmt: skip
        return 2
    command = [sys.executable, "-m", "benchmarks", *args.bench_args]
    return subprocess.run(command, cwd=root, check=False).returncode


def _stream(args: argparse.Namespace) -> int:
    from .client.command import run

    return run(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="visionstream")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the server")
    serve.add_argument("--host", help="bind address (default 127.0.0.1, STREAMING_HOST)")
    serve.add_argument("--port", type=int, help="port (default 9001, STREAMING_PORT)")
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(func=_serve)
    stream = commands.add_parser("stream", help="stream a source to a server and show results")
    from .client.command import add_arguments

    add_arguments(stream)
    stream.set_defaults(func=_stream)
    bench = commands.add_parser("bench", help="run a benchmark: visionstream bench NAME [args]",
                                add_help=False)  # fmt: skip
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(func=_bench)
    models = commands.add_parser("models", help="manage the models directory")
    model_commands = models.add_subparsers(dest="models_command", required=True)
    pull = model_commands.add_parser("pull", help="fetch and convert a model")
    pull.add_argument("name", nargs="?", default="yolov3-tiny-416")
    pull.set_defaults(func=_models_pull)
    model_commands.add_parser("list", help="models ready to serve").set_defaults(func=_models_list)
    add = model_commands.add_parser("add", help="register an ONNX export (YOLO, SSD, DETR)")
    add.add_argument("file", help="the .onnx file")
    add.add_argument("--decoder", required=True,
                     choices=["yolov3", "yolov5", "yolov8", "yolov11", "ssd", "detr"])  # fmt: skip
    add.add_argument("--names", required=True, help="coco | a file (lines or JSON list) | a,b,c")
    add.add_argument("--name", help="model id workflows use (default: the file's stem)")
    add.add_argument("--version", default="1")
    add.add_argument("--input-size", help="WxH when the file's input size is dynamic")
    add.add_argument("--channel-order", choices=["RGB", "BGR"], default="RGB")
    add.add_argument("--box-format", choices=["cxcywh", "xyxy", "yxyx"], help="ssd/detr boxes")
    add.add_argument("--normalized-boxes", action="store_true", help="ssd/detr boxes in 0..1")
    add.add_argument("--class-id-offset", type=int, help="ssd: 1 when class 0 is background")
    add.add_argument("--logits", choices=["softmax", "sigmoid"], help="detr class logits")
    add.set_defaults(func=_models_add)
    args = parser.parse_args(argv)
    # The client command keeps the terminal for its status line: warnings only.
    logging.basicConfig(
        level=logging.WARNING if args.command == "stream" else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("aioice").setLevel(logging.WARNING)
    logging.getLogger("aiortc").setLevel(logging.WARNING)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
