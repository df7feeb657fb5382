"""Velocity, stabilisation, path deviation, the heatmap, the rate limiter and the data
aggregator on synthetic tracks and values with known answers, and the per-track state they
keep forgetting tracks long gone."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
import supervision as sv

from streaming.errors import WorkflowCompilationError
from streaming.workflows.blocks.analytics import TimeInZoneBlock, TrackMemory
from streaming.workflows.blocks.base import FrameState, Verdict
from streaming.workflows.blocks.flow import RateLimiterBlock
from streaming.workflows.blocks.motion import (
    PathDeviationBlock,
    StabilizeDetectionsBlock,
    VelocityBlock,
)
from streaming.workflows.serialization import serialize_detections
from tests.support.blocks import compile_spec

from .test_analytics_blocks import SQUARE, box_at, build, frame_at


def boxes(*tracks: tuple[int, float, float]) -> sv.Detections:
    """One 20x20 box per (tracker id, x, y)."""
    detections = sv.Detections.merge([box_at(x, y, tracker_id=t) for t, x, y in tracks])
    return detections


def test_velocity_is_the_centers_displacement_per_second_in_meters():
    velocity = build(VelocityBlock, pixels_per_meter=10, smoothing_alpha=0.5)
    # Track 1 moves +20 px in x every 0.5 s (40 px/s = 4 m/s); track 2 stands still.
    outputs = [
        velocity.run(
            {"detections": boxes((1, 100 + 20 * i, 100), (2, 300, 300))}, frame_at(0.5 * i)
        )["velocity_detections"]
        for i in range(3)
    ]
    first, second, third = outputs
    assert first.data["speed"].tolist() == [0.0, 0.0]  # nothing to compare with yet
    np.testing.assert_allclose(second.data["velocity"], [[4.0, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(second.data["smoothed_speed"], [2.0, 0.0])  # EMA from 0
    np.testing.assert_allclose(third.data["smoothed_speed"], [3.0, 0.0])
    prediction = serialize_detections(third)["predictions"][0]
    assert prediction["velocity"] == [4.0, 0.0] and prediction["smoothed_speed"] == 3.0


def test_stabilizer_averages_each_tracks_boxes_over_its_window():
    stabilizer = build(StabilizeDetectionsBlock, smoothing_window_size=3)
    xs = [100, 110, 90, 130]
    out = [
        stabilizer.run({"detections": box_at(x, tracker_id=5)}, frame_at(i))["tracked_detections"]
        for i, x in enumerate(xs)
    ]
    centers = [float(d.get_anchors_coordinates(sv.Position.CENTER)[0][0]) for d in out]
    assert centers == pytest.approx([100, 105, 100, 110])  # the last three frames' mean
    empty = stabilizer.run({"detections": sv.Detections.empty()}, frame_at(5))
    assert len(empty["tracked_detections"]) == 0


def test_path_deviation_is_the_frechet_distance_to_the_reference():
    reference = [[0, 100], [100, 100], [200, 100]]
    deviation = build(PathDeviationBlock, reference_path=reference)
    # Track 1 walks along the reference, track 2 parallel to it, 30 px below.
    result = None
    for i, x in enumerate([0, 100, 200]):
        result = deviation.run({"detections": boxes((1, x, 100), (2, x, 130))}, frame_at(i))[
            "path_deviation_detections"
        ]
    assert result is not None
    assert result.data["path_deviation"].tolist() == pytest.approx([0.0, 30.0])
    # Against the reference's exact recursive definition for a wandering path.
    wander = [(10, 90), (60, 140), (150, 95), (190, 60), (205, 110)]
    block = build(PathDeviationBlock, reference_path=reference)
    for i, (x, y) in enumerate(wander):
        got = block.run({"detections": boxes((9, x, y))}, frame_at(i))
    expected = _frechet(np.array(wander, float), np.array(reference, float))
    assert float(got["path_deviation_detections"].data["path_deviation"][0]) == pytest.approx(
        expected
    )


def _frechet(p: np.ndarray, q: np.ndarray) -> float:
    """The textbook discrete Fréchet distance (Eiter and Mannila), whole table at once."""
    table = np.zeros((len(p), len(q)))
    for i in range(len(p)):
        for j in range(len(q)):
            d = float(np.linalg.norm(p[i] - q[j]))
            if i == 0 and j == 0:
                table[i, j] = d
            elif i == 0:
                table[i, j] = max(table[i, j - 1], d)
            elif j == 0:
                table[i, j] = max(table[i - 1, j], d)
            else:
                table[i, j] = max(min(table[i - 1, j], table[i - 1, j - 1], table[i, j - 1]), d)
    return float(table[-1, -1])


def test_the_rate_limiter_lets_through_once_per_cooldown_of_the_files_clock():
    limiter = build(RateLimiterBlock, cooldown_seconds=1.0, next_steps=["sink"])
    verdicts = []
    for number in range(0, 90, 5):  # 3 s of a 30 fps file, every 5th frame
        frame = FrameState(video={"comes_from_video_file": True, "fps": 30,
                                  "frame_number": number})  # fmt: skip
        verdicts.append(limiter.decide({"depends_on": 1, "video_reference_image": object()},
                                       frame))  # fmt: skip
    assert [i * 5 for i, v in enumerate(verdicts) if v is Verdict.RUN] == [0, 30, 60]
    with pytest.raises(WorkflowCompilationError, match="step 'step': cooldown_seconds"):
        build(RateLimiterBlock, cooldown_seconds=-1, next_steps=["sink"])


def test_track_state_forgets_tracks_unseen_for_a_minute():
    memory: TrackMemory[int] = TrackMemory(forget_after=60)
    memory.put(1, 10, now=0)
    memory.put(2, 20, now=50)
    memory.prune(now=61)
    assert (memory.get(1), memory.get(2)) == (None, 20)
    memory.prune(now=5)  # the clock went back (a looped file): everything is stale
    assert len(memory) == 0
    # Time in zone forgets an object that left the frame while inside the zone.
    timer = build(TimeInZoneBlock, zone=SQUARE)
    for i in range(300):  # a new object every second, each seen once
        frame = FrameState(video={"frame_timestamp": datetime.fromtimestamp(1.8e9 + i, UTC)})
        timer.run({"detections": box_at(100, tracker_id=i)}, frame)
    assert len(timer._entered) <= 2 * 60 + 1  # pruned once a minute: at most two minutes' worth


@pytest.mark.parametrize(
    ("cls", "given", "field"),
    [
        (VelocityBlock, {"smoothing_alpha": 0}, "smoothing_alpha"),
        (VelocityBlock, {"pixels_per_meter": -2}, "pixels_per_meter"),
        (StabilizeDetectionsBlock, {"smoothing_window_size": 0}, "smoothing_window_size"),
        (PathDeviationBlock, {"reference_path": [[0, 0], [1]]}, "reference_path"),
        (PathDeviationBlock, {"reference_path": [[0, 0]], "triggering_anchor": "UP"},
         "triggering_anchor"),
    ],
)  # fmt: skip
def test_bad_settings_are_refused_naming_the_step_and_field(cls, given, field):
    with pytest.raises(WorkflowCompilationError, match=rf"step 'step': {field}"):
        build(cls, **given)


def test_untracked_detections_are_refused():
    for cls, given in ((VelocityBlock, {}), (PathDeviationBlock, {"reference_path": [[0, 0]]})):
        with pytest.raises(WorkflowCompilationError, match="tracker"):
            build(cls, **given).run({"detections": box_at(50)}, frame_at(0))


def test_the_heatmap_warms_where_objects_moved_and_not_where_one_stood_still():
    from streaming.workflows.blocks.base import WorkflowImage
    from streaming.workflows.blocks.visualization import HeatmapVisualizationBlock

    heatmap = build(HeatmapVisualizationBlock, opacity=0.8, motion_threshold=10)
    scene = np.full((200, 400, 3), 128, np.uint8)
    out = None
    for i in range(10):
        # Track 1 walks right along y=50; track 2 stands at (300, 150) the whole time.
        detections = boxes((1, 40 + 20 * i, 40), (2, 300, 140))
        image = WorkflowImage(scene, "image")
        out = heatmap.run({"image": image, "predictions": detections}, frame_at(i))["image"]
    assert out is not None
    changed = np.abs(out.numpy.astype(int) - scene).sum(axis=2)
    assert changed[45:55, 80:200].mean() > 20  # the walked path (bottom centers at y=50)
    assert changed[140:160, 280:320].mean() < 1  # the one who never moved
    assert (scene == 128).all()  # drawn on a copy


def _aggregating(**aggregator: object) -> dict:
    return {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"},
                   {"type": "WorkflowParameter", "name": "label", "default_value": "a"}],
        "steps": [
            {"type": "roboflow_core/image_blur@v1", "name": "blur", "image": "$inputs.image"},
            {"type": "roboflow_core/data_aggregator@v1", "name": "agg",
             "data": {"label": "$inputs.label", "size": "$steps.blur.image"},
             "aggregation_mode": {"label": ["values_counts", "count"], "size": ["count"]},
             "interval_unit": "runs", "interval": 3, **aggregator},
        ],
        "outputs": [
            {"type": "JsonField", "name": "labels", "selector": "$steps.agg.label_values_counts"},
            {"type": "JsonField", "name": "runs", "selector": "$steps.agg.size_count"},
        ],
    }  # fmt: skip


def test_the_aggregator_emits_once_per_interval_under_the_names_its_configuration_gives():

    compiled = compile_spec(_aggregating())
    image = np.zeros((8, 8, 3), np.uint8)
    outs = [compiled.run(image, {}, FrameState()) for _ in range(6)]
    assert [o["runs"] for o in outs] == [None, None, 3, None, None, 3]
    assert outs[2]["labels"] == {"a": 3}

    from streaming.workflows.blocks.aggregation import DataAggregatorBlock

    block = build(DataAggregatorBlock, data=["n"], interval=2, interval_unit="runs",
                  aggregation_mode={"n": ["sum", "avg", "max", "min", "values_difference",
                                          "distinct", "count_distinct"]})  # fmt: skip
    block.run({"data": {"n": 4}}, frame_at(0))
    result = block.run({"data": {"n": 1}}, frame_at(1))
    assert result == {"n_sum": 5, "n_avg": 2.5, "n_max": 4, "n_min": 1,
                      "n_values_difference": 3, "n_distinct": [4, 1],
                      "n_count_distinct": 2}  # fmt: skip


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        ({"aggregation_mode": {"label": ["median"]}},
         "step 'agg': aggregation_mode: 'median' is not one of"),
        ({"interval_unit": "days"}, "step 'agg': interval_unit must be"),
        ({"interval": 0}, "step 'agg': interval must be an integer (at least 1)"),
        ({"data_operations": {"label": [{"type": "ToUpper"}]}},
         "step 'agg': data_operations.label: operation 'ToUpper' is not supported"),
    ],
)  # fmt: skip
def test_the_aggregator_refuses_what_it_cannot_do_naming_the_step(given, needle):

    spec = _aggregating(**given)
    spec["outputs"] = [{"type": "JsonField", "name": "x", "selector": "$steps.blur.image"}]
    with pytest.raises(WorkflowCompilationError) as caught:
        compile_spec(spec)
    assert needle in str(caught.value)
