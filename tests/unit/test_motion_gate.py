"""Motion gating (``streaming.pipelines.motion``): what counts as motion, what is ignored,
and that a workflow's models held on still frames lose no event. The analytics clip (a
person from a Debian darknet photo walks across a line, stands in a zone for 4 s, walks
back) is encoded to H.264 and decoded as a pipeline decodes it, then run once with its
models on every frame and once gated, on the real default model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction

import av
import numpy as np
import pytest

from sources import FileSource, SourceFrame
from streaming.config import Settings
from streaming.inference.registry import ModelRegistry
from streaming.pipelines.models import MotionGating
from streaming.pipelines.motion import MotionGate, run_gated
from streaming.protocol.workflows import people_counting
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext
from streaming.workflows.runner import FrameFacts
from tests.support.media import walker_scene, write_clip

FPS = 30
START = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
ZONE = [[420, 0], [640, 0], [640, 480], [420, 480]]
TICK = Fraction(1, FPS)


def scene(square_x: int | None = None, size: tuple[int, int] = (360, 640)) -> np.ndarray:
    """A grey frame with a textured band, and a 40 px dark square at ``square_x``."""
    frame = np.full((*size, 3), 128, np.uint8)
    frame[300:330, :] = (np.arange(size[1]) % 32 * 4)[None, :, None]
    if square_x is not None:
        frame[100:140, square_x : square_x + 40] = 20
    return frame


def frame_of(image: np.ndarray, index: int, decoded: bool = False) -> SourceFrame:
    if decoded:  # as a camera's decoder gives it
        video = av.VideoFrame.from_ndarray(image, format="bgr24").reformat(format="yuv420p")
        return SourceFrame(None, index, TICK, index, decoded=video)
    return SourceFrame(image, index, TICK, index)


def test_a_still_scene_is_still_and_a_moving_square_is_not():
    gate = MotionGate(MotionGating())
    stills = []
    for index in range(10):
        frame = frame_of(scene(), index, decoded=True)
        stills.append(gate.still(frame, index / FPS))
        gate.record(index / FPS, held=stills[-1])
        assert not frame.converted  # the check reads the luma plane: no BGR conversion
    assert stills == [False] + [True] * 9  # the first frame always runs the models
    moving = [gate.still(frame_of(scene(100 + 8 * i), 10 + i), (10 + i) / FPS) for i in range(5)]
    assert moving == [False] * 5
    stats = gate.stats()
    assert stats.frames_gated == 9 and stats.frames_detected == 1
    assert stats.motion_area is not None and stats.motion_area > 0.002


def test_motion_inside_an_ignored_region_does_not_count():
    # The square moves in the top-left quarter only: ignored there, it is motion elsewhere.
    corner = [[0.0, 0.0], [0.5, 0.0], [0.5, 0.5], [0.0, 0.5]]
    ignoring = MotionGate(MotionGating(ignore=[corner]))
    watching = MotionGate(MotionGating())
    for gate in (ignoring, watching):
        gate.still(frame_of(scene(), 0), 0.0)
        gate.record(0.0, held=False)
    frames = [frame_of(scene(40 + 10 * i), i + 1) for i in range(6)]
    assert all(ignoring.still(f, f.index / FPS) for f in frames)
    assert not any(watching.still(f, f.index / FPS) for f in frames)


def test_models_run_again_after_refresh_seconds_and_after_a_reconnection():
    gate = MotionGate(MotionGating(refresh_seconds=1.0))
    decisions = []
    for index in range(70):  # 70 frames of a still scene at 30 fps
        t = index / FPS
        still = gate.still(frame_of(scene(), index), t)
        gate.record(t, held=still)
        decisions.append(still)
    ran = [i for i, still in enumerate(decisions) if not still]
    assert ran == [0, 30, 60]  # every second of the stream's time
    assert gate.still(frame_of(scene(), 70), 70 / FPS, restarts=1) is False


def test_the_gate_settings_are_bounded():
    with pytest.raises(ValueError):
        MotionGating(ignore=[[[0.0, 0.0], [1.5, 0.0], [0.0, 1.0]]])
    with pytest.raises(ValueError):
        MotionGating(ignore=[[[0.0, 0.0], [1.0, 0.0]]])  # not a polygon
    assert MotionGating().applies_to("camera") and not MotionGating().applies_to("file")
    assert MotionGating(enabled=True).applies_to("file")
    assert not MotionGating(enabled=False).applies_to("camera")


@pytest.fixture(scope="module")
def registry(default_model_dir) -> ModelRegistry:
    return ModelRegistry(Settings(models_dir=default_model_dir))


def counting_and_timing() -> dict:
    """The built-in people counter without its drawing (no step reads a still frame's
    pixels then), plus a time-in-zone step on its tracks."""
    spec = people_counting()
    spec["steps"] = [s for s in spec["steps"] if not s["type"].endswith("visualization@v1")]
    spec["outputs"] = [o for o in spec["outputs"] if o["name"] != "annotated"]
    spec["steps"].append({
        "type": "roboflow_core/time_in_zone@v3", "name": "timer", "image": "$inputs.image",
        "detections": "$steps.tracker.tracked_detections", "zone": ZONE,
    })  # fmt: skip
    spec["outputs"].append(
        {"type": "JsonField", "name": "timed", "selector": "$steps.timer.timed_detections"}
    )
    return spec


def play(registry, clip, gate: MotionGate | None) -> tuple[list[dict], list[bool]]:
    """Every frame of ``clip`` through the counting workflow; the outputs, and for each
    frame whether its pixels were converted (read by a step)."""
    workflow = compile_workflow(parse_spec(counting_and_timing()), BuildContext(registry))
    results, converted = [], []
    with FileSource(str(clip)) as source:
        for frame in source:
            received = START + timedelta(seconds=frame.index / FPS)
            facts = FrameFacts("0", frame.index + 1, received, fps=FPS, from_file=False)
            run = run_gated(workflow, gate, frame, facts)
            assert run.error is None, run.error
            results.append(run.outputs)
            converted.append(frame.converted)
    workflow.close()
    return results, converted


def test_gated_models_lose_no_crossing_no_zone_entry_and_no_time_in_zone(
    registry, person, tmp_path
):
    half = person.shape[1] // 2 + 1
    there = list(range(half, 640 - half, 12))
    path = there + [there[-1]] * 120 + there[::-1]  # across, 4 s still in the zone, back
    clip = write_clip(tmp_path / "walk.mp4", (walker_scene(person, x) for x in path), fps=FPS)
    every, _ = play(registry, clip, None)
    gate = MotionGate(MotionGating())
    gated, converted = play(registry, clip, gate)

    def summary(results: list[dict]) -> dict:
        timed = [r["timed"] for r in results]
        return {
            "counts": (results[-1]["count_in"], results[-1]["count_out"]),
            "ids": {int(t) for r in results for t in r["predictions"].tracker_id},
            "in_zone": [len(t) for t in timed],
            "longest": max(float(max(t.data["time_in_zone"], default=0)) for t in timed),
        }

    assert summary(gated) == summary(every)
    assert sorted(summary(every)["counts"]) == [1, 1]
    stats = gate.stats()
    assert stats.frames_detected + stats.frames_gated == len(path)
    # The 4 s stand: once the background has taken the person in, the model rests.
    assert stats.frames_gated >= 90, stats
    assert converted.count(False) == stats.frames_gated  # held frames were never converted
