"""Two-stage workflows and sliced inference, per 640x480 frame, in process (no server):

- detect -> crop each detection -> classify every crop -> classes back onto the detections,
  at 1, 5, 10 and 20 detections, the crops batched (one classifier run per frame) and not
  (``VISIONSTREAM_MAX_CROP_BATCH=1``: a run per crop), against the one-stage workflow (the
  default detector) on the same frame;
- the default detector on a 1280x960 frame in one pass, and sliced into 2x2 and 3x3 tiles
  (``image_slicer@v2``, 20 % overlap) with the tiles' detections stitched back (NMS);
- OCR (PP-OCRv4, ``visionstream models pull pp-ocrv4``): a word rendered in each of the
  fixed detector's boxes, read on every crop (``pp_ocr``, ``text_detection: none``), the
  crops' text recognised in batches of up to 32 and one crop per run; and ``ocr_model``
  (detection and recognition) on the whole frame. Skipped when the OCR model is not pulled.

The first stage is a fixed-output export with N boxes (its run costs next to nothing), so
the two-stage figures are the second stage's cost: the crops, a classifier of MobileNet-like
cost (a 4-layer CNN at 224x224, ~0.37 GFLOP per crop, random weights: its answers mean
nothing, its compute is real) and the engine. Batched and not are alternated in rounds. The
frame is darknet's ``horses.jpg``. Run: ``python -m benchmarks two-stage``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from benchmarks.common import percentiles, write_result
from streaming.config import Settings
from streaming.inference.manifest import ModelManifest
from streaming.inference.ocr_model import OCR_MODEL_ID
from streaming.inference.registry import ModelRegistry
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState
from streaming.workflows.blocks.slicing import slice_offsets
from tests.conftest import PHOTO_DIRS, load_photo
from tests.support.onnx_models import model_directory

DETECTOR = "yolov3-tiny-416"
COUNTS = (1, 5, 10, 20)


def cnn_classifier(directory: Path, classes: int = 1000, size: int = 224) -> None:
    """A 4-layer CNN (3x3 convolutions, stride 2, 32-64-128-256 channels), global pooling
    and a 1000-class head: a MobileNet's order of cost, any batch size."""
    rng = np.random.default_rng(0)
    nodes, weights, previous, channels = [], [], "images", 3
    for i, out in enumerate((32, 64, 128, 256)):
        w = rng.normal(0, 0.1, (out, channels, 3, 3)).astype(np.float32)
        weights += [numpy_helper.from_array(w, f"w{i}"),
                    numpy_helper.from_array(np.zeros(out, np.float32), f"b{i}")]  # fmt: skip
        nodes += [helper.make_node("Conv", [previous, f"w{i}", f"b{i}"], [f"c{i}"],
                                   strides=[2, 2], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]  # fmt: skip
        previous, channels = f"r{i}", out
    head = rng.normal(0, 0.1, (classes, channels)).astype(np.float32)
    weights += [numpy_helper.from_array(head, "head"),
                numpy_helper.from_array(np.zeros(classes, np.float32), "bias")]  # fmt: skip
    nodes += [helper.make_node("GlobalAveragePool", [previous], ["pooled"]),
              helper.make_node("Flatten", ["pooled"], ["flat"]),
              helper.make_node("Gemm", ["flat", "head", "bias"], ["output0"],
                               transB=1)]  # fmt: skip
    graph = helper.make_graph(
        nodes, "cnn",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, size, size])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["batch", classes])],
        weights,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    directory.mkdir(parents=True)
    onnx.save(model, str(directory / "model.onnx"))
    ModelManifest(name=directory.name, version="bench", input_width=size, input_height=size,
                  class_names=[f"c{i}" for i in range(classes)], decoder="classification",
                  resize="stretch").save(directory)  # fmt: skip


def fixed_detector(root: Path, count: int) -> None:
    """A YOLOv8-layout export that finds ``count`` people (60x120) on a grid, on any frame."""
    rows = np.zeros((max(count, 1) + 1, 4 + 1), np.float32)
    columns = int(np.ceil(np.sqrt(count)))
    for i in range(count):
        rows[i] = [50 + (i % columns) * 540 / columns, 80 + (i // columns) * 480 / columns,
                   60, 120, 0.9]  # fmt: skip
    model_directory(root, f"boxes-{count}", [("output0", rows.T.copy())], size=640,
                    decoder="yolov8", class_names=["person"])  # fmt: skip


def step(kind: str, name: str, **fields: object) -> dict:
    return {"type": f"roboflow_core/{kind}", "name": name, **fields}


def spec(steps: list[dict], output: str) -> dict:
    return {"version": "1.0", "inputs": [{"type": "InferenceImage", "name": "image"}],
            "steps": steps,
            "outputs": [{"type": "JsonField", "name": "out", "selector": output}]}  # fmt: skip


def one_stage() -> dict:
    return spec([step("roboflow_object_detection_model@v2", "det", images="$inputs.image",
                      model_id=DETECTOR)], "$steps.det.predictions")  # fmt: skip


def two_stage(count: int) -> dict:
    return spec([
        step("roboflow_object_detection_model@v2", "det", images="$inputs.image",
             model_id=f"boxes-{count}"),
        step("dynamic_crop@v1", "crop", images="$inputs.image",
             predictions="$steps.det.predictions"),
        step("roboflow_classification_model@v2", "cls", images="$steps.crop.crops",
             model_id="cnn"),
        step("detections_classes_replacement@v1", "swap",
             object_detection_predictions="$steps.det.predictions",
             classification_predictions="$steps.cls.predictions"),
    ], "$steps.swap.predictions")  # fmt: skip


def sliced(tile: tuple[int, int]) -> dict:
    return spec([
        step("image_slicer@v2", "tiles", image="$inputs.image", slice_width=tile[0],
             slice_height=tile[1], overlap_ratio_width=0.2, overlap_ratio_height=0.2),
        step("roboflow_object_detection_model@v2", "det", images="$steps.tiles.slices",
             model_id=DETECTOR),
        step("detections_stitch@v1", "stitch", reference_image="$inputs.image",
             predictions="$steps.det.predictions"),
    ], "$steps.stitch.predictions")  # fmt: skip


def ocr_two_stage(count: int) -> dict:
    return spec([
        step("roboflow_object_detection_model@v2", "det", images="$inputs.image",
             model_id=f"boxes-{count}"),
        step("dynamic_crop@v1", "crop", images="$inputs.image",
             predictions="$steps.det.predictions"),
        step("pp_ocr@v1", "ocr", images="$steps.crop.crops", text_detection="none"),
    ], "$steps.ocr.result")  # fmt: skip


def labelled(frame: np.ndarray, count: int) -> np.ndarray:
    """``frame`` with a short word on white in the middle of each fixed box."""
    out = frame.copy()
    columns = int(np.ceil(np.sqrt(count)))
    for i in range(count):
        x = int(50 + (i % columns) * 540 / columns)
        y = int(80 + (i // columns) * 480 / columns)
        out[y - 14 : y + 14, x - 28 : x + 28] = 255
        cv2.putText(out, f"K{i}", (x - 22, y + 9), cv2.FONT_HERSHEY_SIMPLEX, 0.8, (0, 0, 0), 2)
    return out


def ocr_rows(root: Path, frame: np.ndarray, args: argparse.Namespace) -> list[dict]:
    """Recognition in batches of up to 32 regions, and one region per run (the default on
    a CPU), alternated in rounds."""
    registries = {
        name: ModelRegistry(Settings(models_dir=root, max_batch_size=size))
        for name, size in (("batches of 32", 32), ("one run per crop", 1))
    }
    rows: list[dict] = []
    try:
        for count in COUNTS:
            scene = labelled(frame, count)
            rounds: dict[str, list[dict]] = {name: [] for name in registries}
            for _ in range(args.rounds):
                for name, registry in registries.items():
                    rounds[name].append(measure(registry, ocr_two_stage(count), scene,
                                                args.frames))  # fmt: skip
            for name, results in rounds.items():
                rows.append({"workflow": f"OCR on each crop, {count} crops, {name}",
                             **_median(results)})  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
        whole = spec([step("ocr_model@v1", "ocr", images="$inputs.image")],
                     "$steps.ocr.predictions")  # fmt: skip
        rows.append({"workflow": "OCR on the frame (ocr_model, 20 words)",
                     **measure(registries["one run per crop"], whole, labelled(frame, 20),
                               args.frames)})  # fmt: skip
    finally:
        for registry in registries.values():
            registry.close()
    return rows


def measure(registry: ModelRegistry, workflow_spec: dict, image: np.ndarray, frames: int) -> dict:
    workflow = compile_workflow(parse_spec(workflow_spec), BuildContext(registry))
    try:
        for _ in range(3):
            workflow.run(image, {}, FrameState())
        wall, cpu, found = [], [], 0
        for _ in range(frames):
            started, started_cpu = time.perf_counter(), time.process_time()
            out = workflow.run(image, {}, FrameState())["out"]
            wall.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
            found = len(out)
    finally:
        workflow.close()
    return {"ms": percentiles(wall, (50, 95), 2), "cpu_ms": percentiles(cpu, (50,), 2),
            "found": found}  # fmt: skip


def _median(results: list[dict]) -> dict:
    """The round whose p50 is the median of the rounds'."""
    ordered = sorted(results, key=lambda r: r["ms"]["p50"])
    return {**ordered[len(ordered) // 2], "rounds_p50_ms": [r["ms"]["p50"] for r in results]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="benchmarks two-stage", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", type=Path,
                        default=Path.home() / ".cache/visionstream/models")  # fmt: skip
    args = parser.parse_args(argv)
    photos = next(Path(d) for d in PHOTO_DIRS if d and (Path(d) / "horses.jpg").is_file())
    frame = load_photo(photos, "horses.jpg")
    large = load_photo(photos, "horses.jpg", (1280, 960))
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        shutil.copytree(args.models / DETECTOR, root / DETECTOR)
        has_ocr = (args.models / OCR_MODEL_ID / "manifest.json").is_file()
        if has_ocr:
            shutil.copytree(args.models / OCR_MODEL_ID, root / OCR_MODEL_ID)
        cnn_classifier(root / "cnn")
        for count in COUNTS:
            fixed_detector(root, count)
        registries = {
            crop_batch: ModelRegistry(Settings(models_dir=root, max_crop_batch=crop_batch))
            for crop_batch in (32, 1)
        }
        try:
            batched, single = registries[32], registries[1]
            rows.append({"workflow": "one-stage (default detector)",
                         **measure(batched, one_stage(), frame, args.frames)})  # fmt: skip
            for count in COUNTS:
                # Batched and not, alternated in rounds (the machine's noise hits both).
                rounds: dict[str, list[dict]] = {"batched": [], "one run per crop": []}
                for _ in range(args.rounds):
                    for name, registry in (("batched", batched), ("one run per crop", single)):
                        rounds[name].append(measure(registry, two_stage(count), frame,
                                                    args.frames))  # fmt: skip
                for name, results in rounds.items():
                    rows.append({"workflow": f"two-stage, {count} crops, {name}",
                                 **_median(results)})  # fmt: skip
                    print(json.dumps(rows[-1]), flush=True)
            rows.append({"workflow": "1280x960, one pass",
                         **measure(batched, one_stage(), large, args.frames)})  # fmt: skip
            for tile, label in (((800, 600), "2x2"), ((534, 400), "3x3")):
                tiles = len(slice_offsets((1280, 960), tile, (0.2, 0.2), centred=True))
                result = measure(batched, sliced(tile), large, args.frames)
                rows.append({"workflow": f"1280x960, sliced {label} ({tiles} tiles)", **result})
            if has_ocr:
                rows += ocr_rows(root, frame, args)
            else:
                print(f"OCR skipped: run `visionstream models pull {OCR_MODEL_ID}`", flush=True)
        finally:
            for registry in registries.values():
                registry.close()
    for row in rows:
        print(json.dumps(row), flush=True)
    write_result("two-stage", {"frame": [640, 480], "photo": "horses.jpg", "frames": args.frames,
                               "rounds": args.rounds, "rows": rows})  # fmt: skip


if __name__ == "__main__":
    main()
