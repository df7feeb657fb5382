"""The built-in monitoring workflows on the real default model: a person cut from a Debian
darknet photo, pasted on a plain background, walks across the line and back, or stays in the
zone; every frame is run through the compiled workflow with its own timestamp."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from streaming.config import Settings
from streaming.events import EventRecord
from streaming.inference.registry import ModelRegistry
from streaming.protocol.workflows import people_counting, privacy_blur, zone_occupancy
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState
from tests.support.media import walker_scene
from tests.support.webhook import WebhookReceiver
from tests.support.workflows import crossing_events

FPS = 30
START = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
SIZE = (480, 640)  # rows, columns: walker_scene's frame


@pytest.fixture(scope="module")
def registry(default_model_dir) -> ModelRegistry:
    return ModelRegistry(Settings(models_dir=default_model_dir))


class Recorded(list):
    """An event recorder that keeps what it is given."""

    def record(self, event: EventRecord) -> None:
        self.append(event)


def run(
    registry, spec: dict, frames: list[np.ndarray], events: Recorded | None = None, **parameters
) -> list[dict]:
    stream = {"pipeline": "p", "source": "0"}
    context = BuildContext(registry, stream=stream, events=events)
    workflow = compile_workflow(parse_spec(spec), context, parameters=parameters)
    results = []
    for number, image in enumerate(frames, start=1):
        metadata = {
            "video_identifier": "0",
            "frame_number": number,
            "frame_timestamp": (START + timedelta(seconds=number / FPS)).isoformat(),
            "fps": FPS,
            "comes_from_video_file": False,
        }
        results.append(workflow.run(image, metadata, FrameState()))
    return results


def test_people_counting_counts_one_crossing_each_way_with_one_tracker_id(registry, person):
    half = person.shape[1] // 2 + 1
    there = list(range(half, SIZE[1] - half, 12))
    frames = [walker_scene(person, x) for x in there + there[::-1]]
    results = run(registry, people_counting(), frames)
    last = results[-1]
    assert sorted([last["count_in"], last["count_out"]]) == [1, 1]
    ids = {int(t) for r in results if len(r["predictions"]) for t in r["predictions"].tracker_id}
    assert len(ids) == 1, ids
    assert last["annotated"].numpy.shape == (*SIZE, 3)


def test_each_crossing_and_each_zone_entry_and_exit_is_one_event(registry, person):
    half = person.shape[1] // 2 + 1
    there = list(range(half, SIZE[1] - half, 12))
    frames = [walker_scene(person, x) for x in there + there[::-1]]
    spec = people_counting()
    zone = [[420, 0], [640, 0], [640, 480], [420, 480]]
    spec["steps"].append({
        "type": "roboflow_core/time_in_zone@v3", "name": "timer", "image": "$inputs.image",
        "detections": "$steps.tracker.tracked_detections", "zone": zone,
    })  # fmt: skip
    spec["outputs"].append({"type": "JsonField", "name": "t", "selector": "$steps.timer.*"})
    events = Recorded()
    run(registry, spec, frames, events)
    crossings = [e for e in events if e.kind == "line_crossing"]
    assert sorted(e.direction for e in crossings) == ["in", "out"]
    assert len({e.tracker_id for e in events}) == 1  # one person, one track
    for event in crossings:
        assert (event.pipeline, event.source, event.step) == ("p", "0", "counter")
        assert event.class_name == "person" and event.payload["confidence"] > 0.5
        assert event.payload["count_in"] + event.payload["count_out"] >= 1
    transits = [(e.kind, e.step) for e in events if e.kind.startswith("zone")]
    assert transits == [("zone_entry", "timer"), ("zone_exit", "timer")]
    exit_ = events[[e.kind for e in events].index("zone_exit")]
    entry_frame = next(e for e in events if e.kind == "zone_entry").payload["frame_number"]
    frames_inside = exit_.payload["frame_number"] - entry_frame
    assert abs(exit_.payload["time_in_zone"] - frames_inside / FPS) < 1e-3


def test_a_person_who_stays_in_the_zone_is_timed_by_the_frames_clock(registry, person):
    # Outside (left edge) for 10 frames, then in the zone's middle for 60 frames (2 s).
    left = person.shape[1] // 2 + 1
    frames = [walker_scene(person, left)] * 10 + [walker_scene(person, 320)] * 60
    zone = [[200, 0], [440, 0], [440, 480], [200, 480]]
    results = run(registry, zone_occupancy(), frames, zone=zone)
    assert all(len(r["predictions"]) == 0 for r in results[:10])
    (seconds,) = results[-1]["predictions"].data["time_in_zone"]
    truth = 59 / FPS  # from its first frame inside to its last
    assert abs(seconds - truth) <= 0.1 * truth, seconds


def test_privacy_blur_blurs_the_person_and_nothing_else(registry, person):
    frame = walker_scene(person, 320)
    (result,) = run(registry, privacy_blur(), [frame])
    blurred = result["annotated"].numpy
    height, width = person.shape[:2]
    top, left = (SIZE[0] - height) // 2, 320 - width // 2
    inside = (slice(top + 10, top + height - 10), slice(left + 10, left + width - 10))
    assert np.abs(blurred[inside].astype(int) - frame[inside]).mean() > 3
    assert np.array_equal(blurred[:, :40], frame[:, :40])  # far from the person: untouched


@pytest.mark.parametrize(("classes", "found"), [(["person"], True), (["dog"], False)])
def test_a_filter_takes_its_classes_from_a_workflow_parameter(registry, person, classes, found):
    from tests.conftest import DETECT_SPEC

    spec = {
        **DETECT_SPEC,
        "inputs": [*DETECT_SPEC["inputs"], {"type": "WorkflowParameter", "name": "classes"}],
        "steps": [
            DETECT_SPEC["steps"][0],
            {
                "type": "roboflow_core/detections_filter@v1",
                "name": "only",
                "predictions": "$steps.det.predictions",
                "operations_parameters": {"classes": "$inputs.classes"},
                "operations": [{"type": "DetectionsFilter", "filter_operation": {
                    "type": "StatementGroup",
                    "statements": [{
                        "type": "BinaryStatement",
                        "left_operand": {"type": "DynamicOperand", "operations": [
                            {"type": "ExtractDetectionProperty", "property_name": "class_name"}
                        ]},
                        "comparator": {"type": "in (Sequence)"},
                        "right_operand": {"type": "DynamicOperand", "operand_name": "classes"},
                    }],
                }}],
            },
        ],
        "outputs": [{"type": "JsonField", "name": "kept", "selector": "$steps.only.predictions"}],
    }  # fmt: skip
    (result,) = run(registry, spec, [walker_scene(person, 320)], classes=classes)
    assert (len(result["kept"]) > 0) is found


def test_one_webhook_per_crossing_and_none_between(registry, person):
    from streaming.workflows import compile_workflow as compile_

    receiver = WebhookReceiver()
    receiver.answer()
    half = person.shape[1] // 2 + 1
    there = list(range(half, SIZE[1] - half, 12))
    frames = [walker_scene(person, x) for x in there + there[::-1]]
    workflow = compile_(parse_spec(crossing_events(receiver.url)), BuildContext(registry))
    try:
        events = []
        for number, image in enumerate(frames, start=1):
            metadata = {"frame_number": number, "fps": FPS, "comes_from_video_file": True,
                        "frame_timestamp": START.isoformat()}  # fmt: skip
            result = workflow.run(image, metadata, FrameState())
            events.append(result["event"])
        sent = [e for e in events if e is not None]
        assert sent == ["Notification sent in the background"] * 2, events
        receiver.wait_bodies(2)
    finally:
        workflow.close()
        receiver.down()
    bodies = sorted((b["count_in"], b["count_out"]) for b in receiver.bodies)
    assert bodies in ([(0, 1), (1, 1)], [(1, 0), (1, 1)]) and receiver.bodies[0]["camera"] == "hall"
    for body, (path, headers) in zip(receiver.bodies, receiver.requests, strict=True):
        assert path == f"/hook?out={body['count_out']}&site=north"
        assert headers["X-Count-In"] == str(body["count_in"])


def test_a_delta_filter_lets_a_step_run_only_when_its_value_changes(registry, person):
    from streaming.workflows import compile_workflow as compile_

    spec = people_counting()
    spec["steps"] += [
        {"type": "roboflow_core/delta_filter@v1", "name": "changed", "image": "$inputs.image",
         "value": "$steps.counter.count_in", "next_steps": ["$steps.shown"]},
        {"type": "roboflow_core/image_blur@v1", "name": "shown", "image": "$inputs.image"},
    ]  # fmt: skip
    shown = {"type": "JsonField", "name": "shown", "selector": "$steps.shown.image"}
    spec["outputs"].append(shown)
    half = person.shape[1] // 2 + 1
    there = list(range(half, SIZE[1] - half, 12))
    workflow = compile_(parse_spec(spec), BuildContext(registry))
    ran = []
    for number, x in enumerate(there, start=1):
        metadata = {"frame_number": number, "fps": FPS, "comes_from_video_file": True}
        result = workflow.run(walker_scene(person, x), metadata, FrameState())
        ran.append(result["shown"] is not None)
    # The stream's first value counts as a change (the reference's rule), then the crossing.
    assert ran[0] and sum(ran) == 2, ran
