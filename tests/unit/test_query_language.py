"""The reference's query language, every operation and comparator, on values as our blocks
make them; and what it cannot take, said by name."""

from __future__ import annotations

import base64
import json
from datetime import datetime

import cv2
import numpy as np
import pytest
import supervision as sv

from streaming.errors import WorkflowCompilationError
from streaming.workflows.blocks.base import VideoFacts, WorkflowImage
from streaming.workflows.query import BINARY, OPERATIONS, UNARY, Env, QueryCompiler, QueryError

VIDEO = {"frame_number": 31, "frame_timestamp": "2026-11-24T10:00:00+00:00", "fps": 15.0}


def _detections() -> sv.Detections:
    return sv.Detections(
        xyxy=np.array([[0, 0, 10, 10], [100, 0, 150, 50], [20, 20, 120, 120]], float),
        confidence=np.array([0.3, 0.9, 0.6]),
        class_id=np.array([0, 16, 0]),
        data={
            "class_name": np.array(["person", "dog", "car"]),
            "velocity": np.array([[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]]),
        },
        metadata={"image_size": (640, 480)},
    )


IMAGE = WorkflowImage(np.zeros((48, 64, 3), np.uint8), "image")
CLASSIFICATION = {
    "top": "cat", "confidence": 0.7,
    "predictions": [{"class": "cat", "class_id": 1, "confidence": 0.7},
                    {"class": "dog", "class_id": 0, "confidence": 0.3}],
}  # fmt: skip
MULTI_LABEL = {
    "predicted_classes": ["dog"],
    "predictions": {"cat": {"confidence": 0.2, "class_id": 1},
                    "dog": {"confidence": 0.8, "class_id": 0}},
}  # fmt: skip


def run(operations: list[dict], value, values: dict | None = None):
    chain = QueryCompiler("step", "operations", names=None).chain(operations)
    return chain(value, Env(values or {}, VideoFacts.of(VIDEO)))


def names(detections: sv.Detections) -> list[str]:
    return [str(n) for n in detections.data["class_name"]]


def op(kind: str, **fields) -> dict:
    return {"type": kind, **fields}


def _in_class(*classes: str) -> dict:
    return {"type": "StatementGroup", "statements": [{
        "type": "BinaryStatement",
        "left_operand": {"type": "DynamicOperand", "operand_name": "_", "operations": [
            op("ExtractDetectionProperty", property_name="class_name")]},
        "comparator": {"type": "in (Sequence)"},
        "right_operand": {"type": "StaticOperand", "value": list(classes)},
    }]}  # fmt: skip


SCALARS = [
    ([op("StringToLowerCase")], "DoG", "dog"),
    ([op("StringToUpperCase")], "DoG", "DOG"),
    ([op("ToString")], 12, "12"),
    ([op("ToBoolean")], 0, False),
    ([op("LookupTable", lookup_table={"dog": "animal"})], "dog", "animal"),
    ([op("ToNumber", cast_to="int")], "12.7", 12),
    ([op("ToNumber", cast_to="float")], True, 1.0),
    ([op("NumberRound", decimal_digits=1)], 3.14159, 3.1),
    ([op("Multiply", other=2)], 21, 42),
    ([op("Divide", other=4)], 10, 2.5),
    ([op("RandomNumber", min_value=5, max_value=5)], "anything", 5),
    ([op("StringSubSequence", start=1, end=3)], "visionstream", "is"),
    ([op("StringSubSequence")], "abc", "ab"),  # end -1 by default, as the reference
    ([op("StringMatches", regex=r"^cam-\d+$")], "cam-12", True),
    ([op("SequenceLength")], [1, 2, 3], 3),
    ([op("SequenceElementsCount")], ["a", "b", "a"], {"a": 2, "b": 1}),
    ([op("SequenceJoin", separator="-")], ["a", 1], "a-1"),
    ([op("SequenceMap", lookup_table={"a": 1, "b": 2})], ["a", "b"], [1, 2]),
    ([op("SequenceApply", operations=[op("StringToUpperCase")])], ["a", "b"], ["A", "B"]),
    ([op("SequenceAggregate", mode="most_common")], ["a", "b", "a"], "a"),
    ([op("SequenceAggregate", mode="least_common")], ["a", "b", "a"], "b"),
    ([op("SequenceAggregate", mode="last")], [1, 2], 2),
    ([op("NumericSequenceAggregate", function="max")], [1, 5, 2], 5),
    ([op("NumericSequenceAggregate", function="sum", neutral_value=0)], [], 0),
    ([op("ConvertDictionaryToJSON")], {"a": 1}, '{"a": 1}'),
    ([op("ClassificationPropertyExtract", property_name="top_class")], CLASSIFICATION, "cat"),
    ([op("ClassificationPropertyExtract", property_name="all_classes")], MULTI_LABEL,
     ["dog", "cat"]),
    ([op("ClassificationPropertyExtract", property_name="top_class_confidence")], MULTI_LABEL,
     [0.8]),
    ([op("ClassificationPropertyExtract", property_name="top_class_confidence_single")],
     MULTI_LABEL, 0.8),
    ([op("ClassificationPropertyExtract", property_name="all_confidences")], CLASSIFICATION,
     [0.7, 0.3]),
    ([op("ExtractImageProperty", property_name="size")], IMAGE, 48 * 64),
    ([op("ExtractImageProperty", property_name="aspect_ratio")], IMAGE, 64 / 48),
    ([op("ExtractFrameMetadata", property_name="frame_number")], IMAGE, 31),
    ([op("ExtractFrameMetadata", property_name="seconds_since_start")], IMAGE, 2.0),
    ([op("ExtractFrameMetadata", property_name="frame_timestamp"), op("TimestampToISOFormat")],
     IMAGE, "2026-11-24T10:00:00+00:00"),
]  # fmt: skip


@pytest.mark.parametrize(("operations", "value", "expected"), SCALARS,
                         ids=[" ".join(o["type"] for o in c[0]) for c in SCALARS])  # fmt: skip
def test_each_operation_on_the_values_it_takes(operations, value, expected):
    assert run(operations, value) == expected


def test_seconds_since_start_on_a_live_stream_that_declares_no_rate_is_by_its_own_clock():
    chain = QueryCompiler("step", "operations", names=None).chain(
        [op("ExtractFrameMetadata", property_name="seconds_since_start")]
    )
    live = {**VIDEO, "fps": None, "stream_started_at": "2026-11-24T09:59:57.500000+00:00"}
    assert chain(IMAGE, Env({}, VideoFacts.of(live))) == 2.5
    with pytest.raises(QueryError, match="fps or its timestamps"):
        chain(IMAGE, Env({}, VideoFacts.of({**VIDEO, "fps": None})))


def test_the_detections_operations():
    d = _detections()
    assert names(run([op("SortDetections", mode="confidence", ascending=False)], d)) == [
        "dog", "car", "person"]  # fmt: skip
    assert names(run([op("SortDetections", mode="center_x")], d)) == ["person", "car", "dog"]
    for mode, expected in (("first", "person"), ("last", "car"), ("left_most", "person"),
                           ("right_most", "dog"), ("top_confidence", "dog")):  # fmt: skip
        assert names(run([op("DetectionsSelection", mode=mode)], d)) == [expected], mode
    assert len(run([op("DetectionsSelection", mode="first")], d[np.zeros(3, bool)])) == 0
    grown = run([op("DetectionsOffset", offset_x=10, offset_y=20)], d)
    assert grown.xyxy[0].tolist() == [-5, -10, 15, 20] and d.xyxy[0].tolist() == [0, 0, 10, 10]
    assert run([op("DetectionsShift", shift_x=5, shift_y=-5)], d).xyxy[1].tolist() == [
        105, -5, 155, 45]  # fmt: skip
    assert names(run([op("DetectionsFilter", filter_operation=_in_class("dog", "car"))], d)) == [
        "dog", "car"]  # fmt: skip
    assert run([op("DetectionsPropertyExtract", property_name="center")], d)[1] == (125.0, 25.0)
    assert run([op("DetectionsPropertyExtract", property_name="velocity")], d)[2] == [3.0, 4.0]
    assert run([op("DetectionsPropertyExtract", property_name="image_dimensions")], d)[0] == [
        480, 640]  # fmt: skip
    assert run([op("SequenceLength")], d) == 3
    as_dict = run([op("DetectionsToDictionary")], d)
    assert [p["class"] for p in as_dict["predictions"]] == ["person", "dog", "car"]
    # The person box's centre (5, 5) is not inside the car; the car's is not inside a person.
    assert names(run([op("PickDetectionsByParentClass", parent_class="car")], d)) == ["car"]


def test_detections_rename_strict_and_not():
    d = _detections()
    strict = run([op("DetectionsRename", class_map={"person": "human", "dog": "pet",
                                                    "car": "vehicle"})], d)  # fmt: skip
    assert names(strict) == ["human", "pet", "vehicle"]
    assert strict.class_id.tolist() == [0, 1, 2]  # ids of the sorted new names
    loose = run([op("DetectionsRename", class_map="mapping", strict=False)], d,
                {"mapping": {"dog": "pet"}})  # fmt: skip
    assert names(loose) == ["person", "pet", "car"] and loose.class_id.tolist() == [0, 1024, 0]
    with pytest.raises(QueryError, match=r"class_map has no entry for \['car'\]"):
        run([op("DetectionsRename", class_map={"person": "human", "dog": "pet"})], d)


def test_images_convert_to_jpeg_and_base64():
    jpeg = run([op("ConvertImageToJPEG", compression_level=80)], IMAGE)
    assert cv2.imdecode(np.frombuffer(jpeg, np.uint8), 1).shape == (48, 64, 3)
    encoded = run([op("ConvertImageToBase64")], IMAGE)
    assert base64.b64decode(encoded)[:2] == b"\xff\xd8"


def _condition(statement: dict, values: dict, detections: bool = False):
    compiler = QueryCompiler("step", "condition", names=values, detections=detections)
    return compiler.statement({"type": "StatementGroup", "statements": [statement]})


@pytest.mark.parametrize(
    ("comparator", "left", "right", "expected"),
    [
        ("any in (Sequence)", ["dog", "cow"], ["cow"], True),
        ("all in (Sequence)", ["dog", "cow"], ["cow"], False),
        ("(Detection) in zone", [5, 5], [[0, 0], [10, 0], [10, 10], [0, 10]], True),
        ("(Detection) in zone", [15, 5], [[0, 0], [10, 0], [10, 10], [0, 10]], False),
        ("(Number) >", "a", 1, False),  # not comparable: false, not a failed frame
        ("(Number) in range", 5, [1, 10], True),
    ],
)
def test_the_comparators_the_reference_has(comparator, left, right, expected):
    statement = {"type": "BinaryStatement",
                 "left_operand": {"type": "DynamicOperand", "operand_name": "a"},
                 "comparator": {"type": comparator},
                 "right_operand": {"type": "StaticOperand", "value": right}}  # fmt: skip
    condition = _condition(statement, {"a": left})
    assert condition(Env({"a": left}, VideoFacts.of(VIDEO)), None) is expected


def test_operands_take_operations_static_ones_too():
    statement = {
        "type": "BinaryStatement",
        "left_operand": {"type": "DynamicOperand", "operand_name": "image",
                         "operations": [op("ExtractImageProperty", property_name="width")]},
        "comparator": {"type": "(Number) =="},
        "right_operand": {"type": "StaticOperand", "value": "32",
                          "operations": [op("ToNumber", cast_to="int"), op("Multiply", other=2)]},
    }  # fmt: skip
    assert (
        _condition(statement, {"image": None})(Env({"image": IMAGE}, VideoFacts.of(VIDEO)), None)
        is True
    )


def test_every_operation_and_operator_of_the_reference_is_here():
    reference_operations = {
        "StringToLowerCase", "StringToUpperCase", "LookupTable", "ToNumber", "NumberRound",
        "SequenceMap", "SequenceApply", "NumericSequenceAggregate", "ToString", "ToBoolean",
        "StringSubSequence", "DetectionsPropertyExtract", "SequenceAggregate",
        "ExtractDetectionProperty", "DetectionsFilter", "DetectionsOffset", "DetectionsShift",
        "DetectionsRename", "RandomNumber", "StringMatches", "ExtractImageProperty",
        "ExtractFrameMetadata", "SequenceLength", "SequenceElementsCount", "SequenceJoin",
        "Multiply", "Divide", "DetectionsSelection", "SortDetections",
        "ClassificationPropertyExtract", "ConvertImageToJPEG", "ConvertImageToBase64",
        "DetectionsToDictionary", "ConvertDictionaryToJSON", "PickDetectionsByParentClass",
        "TimestampToISOFormat",
    }  # fmt: skip
    assert reference_operations <= set(OPERATIONS)
    assert {"any in (Sequence)", "all in (Sequence)", "(Detection) in zone"} <= set(BINARY)
    assert len(BINARY) == 16 and len(UNARY) == 6


@pytest.mark.parametrize(
    ("operations", "needle"),
    [
        ([op("ToNumber", cast_to="complex")], "ToNumber: cast_to must be one of int, float"),
        ([op("StringMatches", regex="(")], "StringMatches: regex '(' is invalid"),
        ([op("SortDetections", mode="colour")], "SortDetections: mode must be one of"),
        ([op("Teleport")], "operation 'Teleport' is not supported"),
        ([op("SequenceApply", operations=[op("Teleport")])], "operation 'Teleport'"),
        ([op("NumberRound", decimal_digits="two")], "decimal_digits must be an integer"),
    ],
)
def test_what_an_operation_cannot_take_is_a_400_naming_it(operations, needle):
    with pytest.raises(WorkflowCompilationError, match=r"step 'step': operations: ") as caught:
        QueryCompiler("step", "operations").chain(operations)
    assert needle in str(caught.value)


@pytest.mark.parametrize(
    ("operations", "value", "needle"),
    [
        ([op("ToNumber", cast_to="int")], "twelve", "cannot read 'twelve' as a number"),
        ([op("LookupTable", lookup_table={})], "dog", "no entry for 'dog'"),
        ([op("Divide", other=0)], 1, "Divide by zero"),
        ([op("StringToUpperCase")], 3, "StringToUpperCase takes a string, got int"),
        ([op("SequenceAggregate", mode="first")], [], "of an empty sequence"),
        ([op("SortDetections", mode="confidence")], "dogs", "takes detections"),
    ],
)
def test_a_value_an_operation_cannot_take_fails_the_frame_by_name(operations, value, needle):
    with pytest.raises(QueryError, match=r"step 'step': operations: ") as caught:
        run(operations, value)
    assert needle in str(caught.value)


def test_json_of_numpy_values():
    assert json.loads(run([op("ConvertDictionaryToJSON")], {"n": np.int64(3)})) == {"n": 3}
    assert isinstance(datetime.fromisoformat(VIDEO["frame_timestamp"]), datetime)


def test_a_workflow_counts_seconds_since_its_streams_first_frame():
    from streaming.workflows import compile_workflow, parse_spec
    from streaming.workflows.blocks.base import BuildContext, FrameState

    since = op("ExtractFrameMetadata", property_name="seconds_since_start")
    spec = {
        "version": "1.0",
        "inputs": [{"type": "InferenceImage", "name": "image"}],
        "steps": [{"type": "roboflow_core/property_definition@v1", "name": "t",
                   "data": "$inputs.image", "operations": [since]}],
        "outputs": [{"type": "JsonField", "name": "t", "selector": "$steps.t.output"}],
    }  # fmt: skip
    workflow = compile_workflow(parse_spec(spec), BuildContext(None))
    image = np.zeros((4, 4, 3), np.uint8)
    seconds = [
        workflow.run(image, {"frame_number": n, "frame_timestamp": stamp, "fps": None},
                     FrameState())["t"]
        for n, stamp in ((1, "2026-11-24T10:00:00+00:00"), (2, "2026-11-24T10:00:02+00:00"))
    ]  # fmt: skip
    assert seconds == [0.0, 2.0]


def test_a_sessions_frame_facts_reach_blocks_typed_as_its_metadata_says():
    """A session's or a pipeline's frame gives blocks its facts as the source typed them
    (``FrameState.given``), the same as parsing the ``video_metadata`` its results carry."""
    from datetime import UTC, datetime

    from streaming.workflows.blocks.base import FrameState
    from streaming.workflows.runner import FrameFacts

    facts = FrameFacts(
        "7",
        31,
        datetime(2026, 11, 24, 10, 0, 2, tzinfo=UTC),
        fps=15,
        from_file=True,
        stream_restarts=2,
    )
    video = {**facts.video_metadata(), "stream_started_at": "2026-11-24T10:00:00+00:00"}
    typed = FrameState(video=video, given=facts.typed()).facts
    assert typed == FrameState(video=video).facts
    assert typed.seconds == 31 / 15 and typed.since_start == 30 / 15
