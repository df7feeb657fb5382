"""What the monitoring analytics cost per frame: tracker, line counter, time in zone and
their visualisations at 640x480 with 10 and 50 moving detections, beside the model itself;
and, each on its own, the other per-track blocks (velocity, stabiliser, path deviation, heatmap)
and the event sink's per-frame pre-roll (a JPEG of every frame).

The blocks run as a compiled workflow runs them, on synthetic detections (boxes walking across
the frame, so the tracker matches, the line is crossed and the zone entered); the model's
time is the default model's ``detect`` on a photo of the same size, on this machine's backend.
Run: ``python -m benchmarks analytics [--frames 300]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import supervision as sv

from benchmarks.common import percentiles, write_result
from streaming.config import Settings
from streaming.inference.decoders import DecodeOptions
from streaming.inference.registry import ModelRegistry
from streaming.workflows.blocks.analytics import LineCounterBlock, TimeInZoneBlock
from streaming.workflows.blocks.base import BuildContext, FrameState, WorkflowImage
from streaming.workflows.blocks.motion import (
    PathDeviationBlock,
    StabilizeDetectionsBlock,
    VelocityBlock,
)
from streaming.workflows.blocks.sinks import EventSinkBlock
from streaming.workflows.blocks.tracking import ByteTrackerBlock
from streaming.workflows.blocks.visualization import (
    BoundingBoxVisualizationBlock,
    HeatmapVisualizationBlock,
    LabelVisualizationBlock,
)
from streaming.workflows.blocks.zone_visualization import (
    LineCounterVisualizationBlock,
    PolygonZoneVisualizationBlock,
    TraceVisualizationBlock,
)
from streaming.workflows.library import DEFAULT_LINE, DEFAULT_ZONE
from tests.conftest import PHOTO_DIRS, load_photo

WIDTH, HEIGHT = 640, 480


def block(cls, context: BuildContext | None = None, **given):
    config = {n: given.get(n, f.default) for n, f in cls.fields.items() if not f.per_frame}
    return cls("step", config, context or BuildContext(None))  # type: ignore[arg-type]


def frame_state(number: int) -> FrameState:
    return FrameState(video={"frame_timestamp": f"2026-11-23T10:00:{number / 30:09.6f}",
                             "fps": 30})  # fmt: skip


def walkers(count: int, frame: int) -> sv.Detections:
    """``count`` 30x60 boxes in rows, each walking right 4 px a frame (wrapping around)."""
    i = np.arange(count)
    x = (40 + 97 * i + 4 * frame) % (WIDTH - 40)
    y = 40 + (i % 7) * 60
    xyxy = np.stack([x, y, x + 30, y + 60], axis=1).astype(float)
    return sv.Detections(xyxy=xyxy, confidence=np.full(count, 0.9), class_id=np.zeros(count, int),
                         data={"class_name": np.array(["person"] * count)})  # fmt: skip


def analytics_ms(count: int, frames: int) -> dict:
    tracker = block(ByteTrackerBlock)
    counter = block(LineCounterBlock, line_segment=DEFAULT_LINE, triggering_anchor="CENTER")
    timer = block(TimeInZoneBlock, zone=DEFAULT_ZONE, remove_out_of_zone_detections=False)
    drawing = [
        (block(PolygonZoneVisualizationBlock, zone=DEFAULT_ZONE), False),
        (block(TraceVisualizationBlock), True),
        (block(BoundingBoxVisualizationBlock), True),
        (block(LabelVisualizationBlock, text="Tracker Id"), True),
        (block(LineCounterVisualizationBlock, zone=DEFAULT_LINE), False),
    ]
    image = WorkflowImage(np.full((HEIGHT, WIDTH, 3), 90, np.uint8), "image")
    logic, draw, counts = [], [], (0, 0)
    for number in range(frames):
        frame = frame_state(number)
        detections = walkers(count, number)
        started = time.perf_counter()
        tracked = tracker.run({"detections": detections}, frame)["tracked_detections"]
        counted = counter.run({"detections": tracked}, frame)
        timed = timer.run({"detections": tracked}, frame)["timed_detections"]
        middle = time.perf_counter()
        scene = image
        for step, takes_predictions in drawing:
            inputs = {"image": scene, **counted}
            if takes_predictions:
                inputs["predictions"] = timed
            scene = step.run(inputs, frame)["image"]
        done = time.perf_counter()
        logic.append((middle - started) * 1000)
        draw.append((done - middle) * 1000)
        counts = (counted["count_in"], counted["count_out"])
    return {
        "detections": count,
        "tracking_and_analytics_ms": percentiles(logic, (50, 95), 2),
        "visualisations_ms": percentiles(draw, (50, 95), 2),
        "crossings": counts,
    }


def extras_ms(count: int, frames: int, sink_dir: Path) -> dict:
    """Each of the other per-frame blocks alone, on the tracker's output."""
    tracker = block(ByteTrackerBlock)
    steps = {
        "velocity": block(VelocityBlock),
        "stabilizer": block(StabilizeDetectionsBlock),
        "path_deviation": block(PathDeviationBlock, reference_path=DEFAULT_LINE),
        "heatmap": block(HeatmapVisualizationBlock),
    }
    events = block(EventSinkBlock, BuildContext(None, sink_dir=sink_dir),  # type: ignore[arg-type]
                   clip_seconds_before=5, clip_seconds_after=5)  # fmt: skip
    pixels = np.random.default_rng(0).integers(0, 255, (HEIGHT, WIDTH, 3), np.uint8)
    image = WorkflowImage(pixels, "image")
    times: dict[str, list[float]] = {name: [] for name in [*steps, "event_pre_roll"]}
    for number in range(frames):
        frame = frame_state(number)
        tracked = tracker.run({"detections": walkers(count, number)}, frame)["tracked_detections"]
        for name, step in steps.items():
            started = time.perf_counter()
            step.run({"detections": tracked, "predictions": tracked, "image": image}, frame)
            times[name].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        events.observe(pixels, frame)
        times["event_pre_roll"].append((time.perf_counter() - started) * 1000)
    events.close()
    return {"detections": count, **{k: percentiles(v, (50, 95), 2) for k, v in times.items()}}


def model_ms(frames: int) -> dict:
    registry = ModelRegistry(Settings())
    model = registry.get(Settings().default_model)
    photos = next(Path(p) for p in PHOTO_DIRS if p and (Path(p) / "person.jpg").is_file())
    image = load_photo(photos, "person.jpg", (WIDTH, HEIGHT))
    times = []
    for _ in range(frames):
        started = time.perf_counter()
        model.detect(image, DecodeOptions())
        times.append((time.perf_counter() - started) * 1000)
    registry.close()
    return {"device": model.session.device, "detect_ms": percentiles(times, (50, 95), 2)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="benchmarks analytics", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--frames", type=int, default=300)
    args = parser.parse_args(argv)
    rows = [analytics_ms(count, args.frames) for count in (10, 50)]
    for row in rows:
        print(json.dumps(row), flush=True)
    with tempfile.TemporaryDirectory() as sink_dir:
        extras = [extras_ms(count, args.frames, Path(sink_dir)) for count in (10, 50)]
    for row in extras:
        print(json.dumps(row), flush=True)
    model = model_ms(min(args.frames, 100))
    print(json.dumps(model), flush=True)
    write_result("analytics", {"size": [WIDTH, HEIGHT], "frames": args.frames, "blocks": rows,
                               "other_blocks": extras, "model": model})  # fmt: skip


if __name__ == "__main__":
    main()
