"""What the other model types' post-processing costs per 640x480 frame: YOLOv8-seg masks
(coefficients x prototypes, cut to boxes, mapped through the letterbox), YOLOv8-pose keypoints
and a 1000-class classifier, at the output sizes real exports have (640x640 input: 8400
candidates, 32 prototypes of 160x160), with 10 and 50 objects, beside the box decoder alone.

No real seg or pose weights are on the package index (we looked), so the networks here are
constant graphs of the real output shapes: the model's own compute is that of the export you
bring (`benchmarks inference` measures the default detector's); what this measures is ours.
Run: ``python -m benchmarks model-tasks [--frames 100]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import percentiles, write_result
from streaming.config import Settings
from streaming.inference.decoders import DecodeOptions
from streaming.inference.registry import ModelRegistry
from tests.support.onnx_models import model_directory

SIZE = 640
CANDIDATES = 8400
CLASSES = 80


def _boxes(objects: int, rng: np.random.Generator) -> np.ndarray:
    """[CANDIDATES, 4] centre boxes: ``objects`` distinct ones, each seen by 3 candidates."""
    boxes = rng.uniform(20, 60, (CANDIDATES, 4)).astype(np.float32)
    grid = int(np.ceil(np.sqrt(objects)))
    for i in range(objects):
        cx, cy = 40 + (i % grid) * (560 / grid), 40 + (i // grid) * (560 / grid)
        boxes[3 * i : 3 * i + 3] = [cx, cy, 50, 90]
    return boxes


def _scores(objects: int, classes: int, rng: np.random.Generator) -> np.ndarray:
    scores = rng.uniform(0, 0.05, (CANDIDATES, classes)).astype(np.float32)
    for i in range(objects):
        scores[3 * i : 3 * i + 3, i % classes] = [0.9, 0.8, 0.7]
    return scores


def build(root: Path, objects: int) -> None:
    rng = np.random.default_rng(objects)
    boxes, scores = _boxes(objects, rng), _scores(objects, CLASSES, rng)
    names = [f"c{i}" for i in range(CLASSES)]
    coefficients = rng.normal(0, 1, (CANDIDATES, 32)).astype(np.float32)
    protos = rng.normal(0, 1, (32, 160, 160)).astype(np.float32)
    seg = np.concatenate([boxes, scores, coefficients], axis=1).T.copy()
    model_directory(root, f"seg-{objects}", [("output0", seg), ("output1", protos)], size=SIZE,
                    decoder="yolov8-seg", class_names=names)  # fmt: skip
    box = np.concatenate([boxes, scores], axis=1).T.copy()
    model_directory(root, f"det-{objects}", [("output0", box)], size=SIZE, decoder="yolov8",
                    class_names=names)  # fmt: skip
    person = _scores(objects, 1, rng)
    keypoints = rng.uniform(0, SIZE, (CANDIDATES, 51)).astype(np.float32)
    pose = np.concatenate([boxes, person, keypoints], axis=1).T.copy()
    model_directory(root, f"pose-{objects}", [("output0", pose)], size=SIZE,
                    decoder="yolov8-pose", class_names=["person"],
                    keypoint_names=[f"k{i}" for i in range(17)])  # fmt: skip


def measure(registry: ModelRegistry, name: str, frames: int) -> dict:
    model = registry.get(name)
    image = np.random.default_rng(0).integers(0, 255, (480, 640, 3), np.uint8)
    post, found = [], 0
    for _ in range(frames):
        timer: dict[str, float] = {}
        if model.task == "classification":
            model.classify(image, timer)
        else:
            found = len(model.detect(image, DecodeOptions(confidence=0.5), timer))
        post.append(timer["postprocess"])
    return {"model": name, "found": found, "postprocess_ms": percentiles(post, (50, 95), 2)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="benchmarks model-tasks", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--frames", type=int, default=100)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        for objects in (10, 50):
            build(root, objects)
        logits = np.random.default_rng(1).normal(0, 3, 1000).astype(np.float32)
        model_directory(root, "cls-1000", [("output0", logits)], size=224,
                        decoder="classification", resize="stretch",
                        class_names=[f"c{i}" for i in range(1000)])  # fmt: skip
        registry = ModelRegistry(Settings(models_dir=root))
        try:
            names = [f"{kind}-{n}" for n in (10, 50) for kind in ("det", "seg", "pose")]
            rows = [measure(registry, name, args.frames) for name in [*names, "cls-1000"]]
        finally:
            registry.close()
    for row in rows:
        print(json.dumps(row), flush=True)
    write_result("model-tasks", {"frame": [640, 480], "frames": args.frames, "rows": rows})


if __name__ == "__main__":
    main()
