"""Tracking, line counting and time in zone on synthetic detections with known geometry."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import supervision as sv

from streaming.errors import WorkflowCompilationError
from streaming.workflows.blocks.analytics import (
    LineCounterBlock,
    LineCounterV1Block,
    TimeInZoneBlock,
)
from streaming.workflows.blocks.base import FrameState, Verdict, VideoFacts
from streaming.workflows.blocks.tracking import ByteTrackerBlock
from streaming.workflows.serialization import serialize_detections
from tests.support.blocks import build, compile_spec, decide_block, frame_at, run_block

LINE = [[100, 0], [100, 200]]  # vertical, at x = 100
SQUARE = [[50, 50], [150, 50], [150, 150], [50, 150]]


def box_at(x: float, y: float = 100, size: float = 20, tracker_id: int | None = None):
    detections = sv.Detections(
        xyxy=np.array([[x - size / 2, y - size / 2, x + size / 2, y + size / 2]], float),
        confidence=np.array([0.9]),
        class_id=np.array([0]),
    )
    if tracker_id is not None:
        detections.tracker_id = np.array([tracker_id])
    return detections


def run_path(blocks: list[Any], xs: list[float]) -> list[dict[str, Any]]:
    """Each x a frame: the box there, through the tracker then each block after it."""
    tracker = build(ByteTrackerBlock)
    results = []
    for i, x in enumerate(xs):
        frame = frame_at(i * 0.5)
        tracked = tracker.run({"detections": box_at(x)}, frame)
        outputs = {"tracker": tracked}
        for block in blocks:
            outputs[block.name] = block.run({"detections": tracked["tracked_detections"]}, frame)
        results.append(outputs)
    return results


def test_a_moving_box_keeps_one_tracker_id_and_is_new_once():
    results = run_path([], list(range(20, 180, 8)))
    tracked = [r["tracker"]["tracked_detections"] for r in results]
    ids = {int(t) for detections in tracked for t in detections.tracker_id}
    assert len(ids) == 1
    # ByteTrack confirms a track on its second frame: from there, every frame has it.
    assert [len(d) for d in tracked] == [0] + [1] * (len(results) - 1)
    assert sum(len(r["tracker"]["new_instances"]) for r in results) == 1
    seen = sum(len(r["tracker"]["already_seen_instances"]) for r in results)
    assert seen == len(results) - 2


def test_crossing_one_way_then_back_counts_one_in_and_one_out():
    counter = build(LineCounterBlock, line_segment=LINE)
    path = list(range(40, 170, 10)) + list(range(160, 30, -10))
    last = run_path([counter], path)[-1]["step"]
    assert sorted([last["count_in"], last["count_out"]]) == [1, 1]


@pytest.mark.parametrize("cls", [LineCounterBlock, LineCounterV1Block])
def test_touching_the_line_and_going_back_counts_nothing(cls):
    counter = build(cls, line_segment=LINE)
    # The box's right edge reaches past the line, its center never does.
    path = [40, 60, 80, 95, 80, 60, 40]
    last = run_path([counter], path)[-1]["step"]
    assert (last["count_in"], last["count_out"]) == (0, 0)


def test_unconfirmed_tracks_are_never_counted():
    # supervision's LineZone would count every tracker_id -1 as one object.
    counter = build(LineCounterBlock, line_segment=LINE)
    for x in (40, 80, 120, 160, 120, 80, 40):
        result = counter.run({"detections": box_at(x, tracker_id=-1)}, frame_at(0))
    assert (result["count_in"], result["count_out"]) == (0, 0)


def test_time_in_zone_follows_the_frames_clock_and_restarts_after_leaving():
    timer = build(TimeInZoneBlock, zone=SQUARE)
    times = []
    # Outside, inside from t=1.0 to t=3.0, outside, inside again from t=4.0.
    for t, x in [(0.0, 20), (0.5, 30), (1.0, 100), (1.5, 100), (2.0, 102), (3.0, 104),
                 (3.5, 190), (4.0, 100), (5.0, 100)]:  # fmt: skip
        frame = frame_at(t)
        tracked = box_at(x, tracker_id=1)
        timed = timer.run({"detections": tracked}, frame)["timed_detections"]
        times.append([float(s) for s in timed.data["time_in_zone"]])
    assert times == [[], [], [0.0], [0.5], [1.0], [2.0], [], [0.0], [1.0]]
    (prediction,) = serialize_detections(timed)["predictions"]
    assert prediction["time_in_zone"] == 1.0 and "tracker_id" in prediction


def test_a_video_files_time_is_its_frame_number_over_its_fps():
    video = {"comes_from_video_file": True, "fps": 25, "frame_number": 50,
             "frame_timestamp": "2026-11-23T10:00:00+00:00"}  # fmt: skip
    assert VideoFacts.of(video).seconds == 2.0


def test_objects_outside_are_kept_with_zero_time_when_asked():
    timer = build(TimeInZoneBlock, zone=SQUARE, remove_out_of_zone_detections=False)
    timed = timer.run({"detections": box_at(20, tracker_id=3)}, frame_at(0))
    assert list(timed["timed_detections"].data["time_in_zone"]) == [0.0]


def test_several_zones_count_as_one(tmp_path):
    other = [[300, 50], [400, 50], [400, 150], [300, 150]]
    timer = build(TimeInZoneBlock, zone=[SQUARE, other])
    for t in (0.0, 1.0):
        timed = timer.run({"detections": box_at(350, tracker_id=7)}, frame_at(t))
    assert list(timed["timed_detections"].data["time_in_zone"]) == [1.0]


@pytest.mark.parametrize(
    ("cls", "given", "field"),
    [
        (LineCounterBlock, {"line_segment": [[0, 0]]}, "line_segment"),
        (LineCounterBlock, {"line_segment": [[0, 0], [1, "a"]]}, "line_segment"),
        (LineCounterBlock, {"line_segment": LINE, "triggering_anchor": "MIDDLE"},
         "triggering_anchor"),
        (TimeInZoneBlock, {"zone": [[0, 0], [10, 10]]}, "zone"),
        (TimeInZoneBlock, {"zone": SQUARE, "triggering_anchor": "NOWHERE"}, "triggering_anchor"),
        (TimeInZoneBlock, {"zone": SQUARE, "reset_out_of_zone_detections": "yes"},
         "reset_out_of_zone_detections"),
        (ByteTrackerBlock, {"track_activation_threshold": 2}, "track_activation_threshold"),
        (ByteTrackerBlock, {"lost_track_buffer": -1}, "lost_track_buffer"),
    ],
)  # fmt: skip
def test_bad_geometry_and_settings_are_refused_naming_the_step_and_field(cls, given, field):
    with pytest.raises(WorkflowCompilationError, match=rf"step 'step': {field}"):
        build(cls, **given)


def test_untracked_detections_are_refused_by_the_counter():
    counter = build(LineCounterBlock, line_segment=LINE)
    with pytest.raises(WorkflowCompilationError, match="tracker"):
        counter.run({"detections": box_at(50)}, frame_at(0))


def test_the_line_zones_and_traces_are_drawn_where_they_are():
    from streaming.workflows.blocks.base import WorkflowImage
    from streaming.workflows.blocks.zone_visualization import (
        LineCounterVisualizationBlock,
        PolygonZoneVisualizationBlock,
        TraceVisualizationBlock,
    )

    image = WorkflowImage(np.zeros((200, 300, 3), np.uint8), "image")
    line = build(LineCounterVisualizationBlock, zone=LINE, opacity=1.0)
    drawn = line.run({"image": image, "count_in": 2, "count_out": 1}, frame_at(0))["image"].numpy
    assert drawn[150, 100].any() and not drawn[150, 200].any()  # on the line, off it

    # A line from the frame's corner: its counts' text (on white) as whole as mid-frame.
    def text_box(zone) -> tuple[int, int]:
        block = build(LineCounterVisualizationBlock, zone=zone, opacity=1.0)
        out = block.run({"image": image, "count_in": 2, "count_out": 1}, frame_at(0))
        white = np.argwhere((out["image"].numpy == 255).all(axis=2))
        return tuple(white.max(axis=0) - white.min(axis=0))

    assert text_box([[280, 0], [280, 199]]) == text_box([[150, 100], [150, 150]])
    zone = build(PolygonZoneVisualizationBlock, zone=SQUARE)
    filled = zone.run({"image": image}, frame_at(0))["image"].numpy
    assert filled[100, 100].any() and not filled[180, 250].any()
    assert not image.numpy.any()  # the input image untouched (copy_image)
    trace = build(TraceVisualizationBlock)
    for x in (40, 80, 120):
        out = trace.run({"image": image, "predictions": box_at(x, tracker_id=1)}, frame_at(0))
    traced = out["image"].numpy
    assert traced[100, 60:120].any(axis=1).sum() > 30  # the path from x=40 to x=120


def test_a_bad_color_is_refused_naming_the_step():
    from streaming.workflows.blocks.zone_visualization import PolygonZoneVisualizationBlock

    with pytest.raises(WorkflowCompilationError, match="step 'step': color"):
        build(PolygonZoneVisualizationBlock, zone=SQUARE, color="green-ish")


def _statement(prop: str, comparator: str, right: dict) -> dict:
    return {
        "type": "BinaryStatement",
        "left_operand": {
            "type": "DynamicOperand",
            "operations": [{"type": "ExtractDetectionProperty", "property_name": prop}],
        },
        "comparator": {"type": comparator},
        "right_operand": right,
    }


def _filter(*statements: dict, operator: str = "and") -> list:
    group = {"type": "StatementGroup", "operator": operator, "statements": list(statements)}
    return [{"type": "DetectionsFilter", "filter_operation": group}]


def _three() -> sv.Detections:
    return sv.Detections(
        xyxy=np.array([[0, 0, 10, 10], [0, 0, 50, 50], [0, 0, 100, 100]], float),
        confidence=np.array([0.3, 0.6, 0.9]),
        class_id=np.array([0, 16, 0]),
        data={"class_name": np.array(["person", "dog", "person"])},
    )


@pytest.mark.parametrize(
    ("operations", "parameters", "kept"),
    [
        (_filter(_statement("class_name", "in (Sequence)",
                            {"type": "DynamicOperand", "operand_name": "classes"})),
         {"classes": ["person"]}, [0, 2]),
        (_filter(_statement("confidence", "(Number) >=", {"type": "StaticOperand", "value": 0.6})),
         {}, [1, 2]),
        (_filter(_statement("class_name", "==", {"type": "StaticOperand", "value": "person"}),
                 _statement("size", "(Number) >", {"type": "StaticOperand", "value": 1000})),
         {}, [2]),
        (_filter(_statement("class_name", "==", {"type": "StaticOperand", "value": "dog"}),
                 _statement("confidence", "(Number) <", {"type": "StaticOperand", "value": 0.5}),
                 operator="or"),
         {}, [0, 1]),
        (_filter({**_statement("class_name", "(String) startsWith",
                               {"type": "StaticOperand", "value": "per"}), "negate": True}),
         {}, [1]),
        (_filter(_statement("confidence", "(Number) in range",
                            {"type": "StaticOperand", "value": [0.5, 0.7]})), {}, [1]),
    ],
)  # fmt: skip
def test_detections_filter_keeps_what_the_condition_holds_for(operations, parameters, kept):
    from streaming.workflows.blocks.filtering import DetectionsFilterBlock

    block = build(DetectionsFilterBlock, operations=operations, operations_parameters=parameters)
    detections = _three()
    (result,) = run_block(block, [{"predictions": detections}])
    assert result["predictions"].xyxy.tolist() == detections.xyxy[kept].tolist()


@pytest.mark.parametrize(
    ("operations", "needle"),
    [
        ([{"type": "DetectionsOffset"}], "DetectionsOffset: offset_x must be an integer"),
        ([{"type": "DetectionsTeleport"}], "operation 'DetectionsTeleport' is not supported"),
        (_filter(_statement("class_name", "(Detection) near",
                            {"type": "StaticOperand", "value": 1})),
         "comparator '(Detection) near' is not supported"),
        (_filter(_statement("mood", "(Number) >", {"type": "StaticOperand", "value": 1})),
         "ExtractDetectionProperty: property_name must be one of confidence"),
        (_filter(_statement("class_name", "in (Sequence)",
                            {"type": "DynamicOperand", "operand_name": "missing"})),
         "operand 'missing' is not in operations_parameters"),
        (_filter({"type": "TernaryStatement"}), "statement type 'TernaryStatement' is not"),
        (_filter({"type": "UnaryStatement", "operator": {"type": "(Number) is odd"}}),
         "operator '(Number) is odd' is not supported"),
        ([], "must be a non-empty list"),
    ],
)  # fmt: skip
def test_what_the_filter_does_not_support_is_a_400_naming_the_step(operations, needle):
    from streaming.workflows.blocks.filtering import DetectionsFilterBlock

    with pytest.raises(WorkflowCompilationError, match=r"step 'step': operations: ") as caught:
        build(DetectionsFilterBlock, operations=operations)
    assert needle in str(caught.value)


@pytest.mark.parametrize(
    ("step", "needle"),
    [
        ({"type": "roboflow_core/continue_if@v1", "name": "gate", "next_steps": ["$steps.nope"],
          "condition_statement": {"type": "StatementGroup", "statements": []}},
         "step 'gate' field 'next_steps': '$steps.nope' names no other step"),
        ({"type": "roboflow_core/continue_if@v1", "name": "gate", "next_steps": ["$steps.blur"],
          "evaluation_parameters": {"a": 1},
          "condition_statement": {"type": "StatementGroup", "statements": [{
              "type": "UnaryStatement", "operator": {"type": "Exists"},
              "operand": {"type": "DynamicOperand", "operand_name": "b"}}]}},
         "step 'gate': condition_statement: operand 'b' is not in evaluation_parameters"),
        ({"type": "roboflow_core/webhook_sink@v1", "name": "hook", "url": "ftp://x/y"},
         "step 'hook': url must be an http(s) URL"),
        ({"type": "roboflow_core/webhook_sink@v1", "name": "hook", "url": "http://x/y",
          "json_payload": {"n": "$steps.nowhere.count"}},
         "step 'hook' field 'json_payload' entry 'n': selector '$steps.nowhere.count' names"),
    ],
)  # fmt: skip
def test_flow_control_and_sinks_refuse_what_cannot_run(step, needle):
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [{"type": "roboflow_core/image_blur@v1", "name": "blur", "image": "$inputs.image"},
                  step],
        "outputs": [{"type": "JsonField", "name": "out", "selector": "$steps.blur.image"}],
    }  # fmt: skip
    with pytest.raises(WorkflowCompilationError) as caught:
        compile_spec(spec)
    assert needle in str(caught.value)


def test_a_webhook_sink_throttles_and_says_so_once_closed():
    from streaming.workflows.blocks.sinks import WebhookSinkBlock

    sink = build(WebhookSinkBlock, url="http://127.0.0.1:9/hook", cooldown_seconds=60)
    first = sink.run({"json_payload": {"n": 1}}, frame_at(0))
    second = sink.run({"json_payload": {"n": 2}}, frame_at(0))
    sink.close()
    sink.close()  # idempotent
    assert (first["throttling_status"], second["throttling_status"]) == (False, True)
    assert sink.run({"json_payload": {}}, frame_at(0))["throttling_status"] is True
    unthrottled = build(WebhookSinkBlock, url="http://127.0.0.1:9/hook", cooldown_seconds=0)
    unthrottled.close()
    assert unthrottled.run({"json_payload": {}}, frame_at(0))["message"] == "Sink is closed"


def test_property_definition_counts_and_extracts():
    from streaming.workflows.blocks.filtering import PropertyDefinitionBlock

    count = build(PropertyDefinitionBlock, operations=[{"type": "SequenceLength"}])
    assert count.run({"data": _three()}, frame_at(0)) == {"output": 3}
    names = build(PropertyDefinitionBlock, operations=[
        {"type": "DetectionsPropertyExtract", "property_name": "class_name"}])  # fmt: skip
    assert names.run({"data": _three()}, frame_at(0)) == {"output": ["person", "dog", "person"]}
    both = build(PropertyDefinitionBlock, operations=[
        {"type": "DetectionsPropertyExtract", "property_name": "class_name"},
        {"type": "SequenceLength"}])  # fmt: skip
    assert both.run({"data": _three()}, frame_at(0)) == {"output": 3}
    with pytest.raises(WorkflowCompilationError, match="operation 'ToUpper' is not supported"):
        build(PropertyDefinitionBlock, operations=[{"type": "ToUpper"}])


def test_a_reconnected_camera_starts_the_tracker_afresh_and_the_counter_keeps_counting():
    tracker = build(ByteTrackerBlock)
    counter = build(LineCounterBlock, line_segment=LINE, triggering_anchor="CENTER")
    ids = []

    def walk(xs: range, restarts: int) -> dict:
        for x in xs:
            frame = FrameState(video={"stream_restarts": restarts, "fps": 30})
            tracked = tracker.run({"detections": box_at(x)}, frame)["tracked_detections"]
            ids.extend(int(t) for t in tracked.tracker_id)
            counted = counter.run({"detections": tracked}, frame)
        return counted

    first = walk(range(40, 170, 10), restarts=0)  # across once
    second = walk(range(40, 170, 10), restarts=1)  # the camera came back: across again
    assert first["count_in"] + first["count_out"] == 1
    assert second["count_in"] + second["count_out"] == 2  # the count went on
    before, after = ids[: len(ids) // 2], ids[len(ids) // 2 :]
    assert len(set(before)) == 1 and len(set(after)) == 1 and set(before) != set(after)


@pytest.mark.parametrize("algorithm", ["bytetrack", "sort", "ocsort"])
def test_each_tracker_behind_the_block_follows_a_moving_box_with_one_id(algorithm):
    tracker = build(ByteTrackerBlock, tracker=algorithm)
    ids = set()
    for i, x in enumerate(range(20, 180, 8)):
        tracked = tracker.run({"detections": box_at(x)}, frame_at(i * 0.5))["tracked_detections"]
        ids.update(int(t) for t in tracked.tracker_id)
    assert len(ids) == 1, ids
    with pytest.raises(WorkflowCompilationError, match="step 'step': tracker must be one of"):
        build(ByteTrackerBlock, tracker="deepsort")


@pytest.mark.parametrize(("stop_delay", "held"), [(0, False), (3600, True)])
def test_continue_if_stays_open_stop_delay_after_its_condition(stop_delay, held):
    from streaming.workflows.blocks.flow import ContinueIfBlock

    statement = {"type": "StatementGroup", "statements": [{
        "type": "BinaryStatement",
        "left_operand": {"type": "DynamicOperand", "operand_name": "count"},
        "comparator": {"type": "(Number) >"},
        "right_operand": {"type": "StaticOperand", "value": 0},
    }]}  # fmt: skip
    block = build(ContinueIfBlock, condition_statement=statement, next_steps=[],
                  evaluation_parameters={"count": 0}, stop_delay=stop_delay)  # fmt: skip
    verdicts = decide_block(block, [
        {"evaluation_parameters": {"count": 0}},
        {"evaluation_parameters": {"count": 2}},
        {"evaluation_parameters": {"count": 0}},
    ])  # fmt: skip
    assert verdicts == [Verdict.SKIP, Verdict.RUN, Verdict.of(held)]


@pytest.mark.parametrize("method", ["GET", "PUT", "POST"])
def test_a_webhook_sink_sends_its_method_with_json_form_data_or_files(method):
    from streaming.workflows.blocks.sinks import WebhookSinkBlock
    from tests.support.webhook import RequestRecorder

    upper = [{"type": "StringToUpperCase"}]
    with RequestRecorder() as endpoint:
        sinks = [
            build(WebhookSinkBlock, url=endpoint.url, method=method, cooldown_seconds=0,
                  json_payload={"camera": 1}, json_payload_operations={"camera": []}),
            build(WebhookSinkBlock, url=endpoint.url, method=method, cooldown_seconds=0,
                  form_data={"label": 1}, form_data_operations={"label": upper}),
            build(WebhookSinkBlock, url=endpoint.url, method=method, cooldown_seconds=0,
                  multi_part_encoded_files={"report": 1}),
        ]  # fmt: skip
        try:
            sinks[0].run({"json_payload": {"camera": "gate"}}, frame_at(0))
            endpoint.wait_requests(1)
            sinks[1].run({"form_data": {"label": "person"}}, frame_at(0))
            endpoint.wait_requests(2)
            sinks[2].run({"multi_part_encoded_files": {"report": b"\x89PNG..."}}, frame_at(0))
            (as_json, as_form, as_files) = endpoint.wait_requests(3)
        finally:
            for sink in sinks:
                sink.close()
    assert {r[0] for r in (as_json, as_form, as_files)} == {method}
    assert as_json[2]["content-type"] == "application/json"
    assert json.loads(as_json[3]) == {"camera": "gate"}
    assert as_form[2]["content-type"] == "application/x-www-form-urlencoded"
    assert as_form[3] == b"label=PERSON"  # through its operations
    assert as_files[2]["content-type"].startswith("multipart/form-data; boundary=")
    assert b'name="report"; filename="report"' in as_files[3] and b"\x89PNG..." in as_files[3]


def test_webhook_operations_on_a_value_the_part_lacks_are_refused():
    from streaming.workflows.blocks.sinks import WebhookSinkBlock

    with pytest.raises(WorkflowCompilationError, match="form_data_operations: names \\['x'\\]"):
        build(WebhookSinkBlock, url="http://127.0.0.1:9/hook", form_data={"label": 1},
              form_data_operations={"x": []})  # fmt: skip
    with pytest.raises(WorkflowCompilationError, match="method must be one of GET, POST, PUT"):
        build(WebhookSinkBlock, url="http://127.0.0.1:9/hook", method="DELETE")
