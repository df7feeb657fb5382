"""``visionstream models pull | list | add``: the models directory, from the shell (each
command imports what it needs when it runs: ``--help`` answers at once)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import get_args

__all__ = ["add_models_commands"]

Command = Callable[..., argparse.ArgumentParser]


def add_models_commands(command: Command, formatter: type[argparse.HelpFormatter]) -> None:
    models = command("models", "manage the models directory")
    model_commands = models.add_subparsers(dest="models_command", required=True)
    pull = model_commands.add_parser(
        "pull", help="fetch and convert a model", formatter_class=formatter
    )
    pull.add_argument(
        "name",
        nargs="?",
        default="yolov3-tiny-416",
        help="yolov3-tiny-416 (the default detector) or pp-ocrv4 (OCR)",
    )
    pull.set_defaults(func=_pull)
    model_commands.add_parser("list", help="models ready to serve").set_defaults(func=_list)
    add = model_commands.add_parser(
        "add",
        help="register an ONNX export (YOLO detect/seg/pose, SSD, DETR, classifiers)",
        formatter_class=formatter,
    )
    add.add_argument("file", help="the .onnx file")
    from .inference.manifest import DecoderName

    add.add_argument("--decoder", required=True, choices=list(get_args(DecoderName)))
    add.add_argument("--names", required=True, help="coco | a file (lines or JSON list) | a,b,c")
    add.add_argument("--name", help="model id workflows use (default: the file's stem)")
    add.add_argument("--version", default="1", help="the model's version")
    add.add_argument("--input-size", help="WxH when the file's input size is dynamic")
    add.add_argument(
        "--channel-order",
        choices=["RGB", "BGR"],
        default="RGB",
        help="the channel order the model expects",
    )
    add.add_argument("--box-format", choices=["cxcywh", "xyxy", "yxyx"], help="ssd/detr boxes")
    add.add_argument("--normalized-boxes", action="store_true", help="ssd/detr boxes in 0..1")
    add.add_argument("--class-id-offset", type=int, help="ssd: 1 when class 0 is background")
    add.add_argument(
        "--logits",
        choices=["softmax", "sigmoid", "probabilities"],
        help="detr class logits; what a classifier outputs",
    )
    add.add_argument("--keypoints", help="*-pose: keypoint names (coco | a file | a,b,c)")
    add.add_argument("--skeleton", help="*-pose: edges to draw, keypoint indexes from 0: 0-1,1-2")
    add.add_argument(
        "--multi-label", action="store_true", help="classification: each class on its own (sigmoid)"
    )
    add.add_argument(
        "--resize",
        choices=["letterbox", "stretch"],
        help="how frames fit the input (classifiers: usually stretch)",
    )
    add.set_defaults(func=_add)


def _pull(args: argparse.Namespace) -> int:
    from .config import Settings
    from .inference.default_model import DEFAULT_MODEL_ID, ensure_default_model
    from .inference.ocr_model import OCR_MODEL_ID, ensure_ocr_model

    pullable = {DEFAULT_MODEL_ID: ensure_default_model, OCR_MODEL_ID: ensure_ocr_model}
    if args.name not in pullable:
        print(f"unknown model '{args.name}'; pullable: {', '.join(pullable)}", file=sys.stderr)
        return 2
    path = pullable[args.name](Settings().models_dir, lambda m: print(m, flush=True))
    print(path)
    return 0


def _list(_: argparse.Namespace) -> int:
    from .config import Settings
    from .inference.registry import ModelRegistry

    for name in ModelRegistry(Settings()).available():
        print(name)
    return 0


def _add(args: argparse.Namespace) -> int:
    from .config import Settings
    from .errors import ModelError
    from .inference.class_names import read_class_names, read_keypoint_names
    from .inference.importer import add_model

    size = None
    if args.input_size:
        width, _, height = args.input_size.partition("x")
        size = (int(height), int(width))
    given = ("box_format", "class_id_offset", "logits", "resize")
    extra = {key: getattr(args, key) for key in given if getattr(args, key) is not None}
    if args.normalized_boxes:
        extra["normalized_boxes"] = True
    if args.multi_label:
        extra["task"] = "multi-label-classification"
    try:
        if args.keypoints:
            extra["keypoint_names"] = read_keypoint_names(args.keypoints)
        if args.skeleton:
            extra["skeleton"] = [
                tuple(int(i) for i in edge.split("-", 1)) for edge in args.skeleton.split(",")
            ]
    except ValueError as exc:
        print(f"cannot add {args.file}: {exc}", file=sys.stderr)
        return 2
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
    print(
        f"added {manifest.name}: {manifest.input_width}x{manifest.input_height}, "
        f"{manifest.decoder}, {len(manifest.class_names)} classes"
    )
    return 0
