"""One workflow written as the reference's authors write them, with every block version we
ship and every operation of the query language (a ``property_definition`` step each), for
running the same image over ``/workflows/run`` and over WebRTC and comparing.

Models: the default model, and the suite's constant ``tiny-seg``,
``tiny-pose``, ``tiny-cls`` and ``tiny-multi`` exports (``tests/support/onnx_models.py``)."""

from __future__ import annotations

from typing import Any

from streaming.inference.default_model import DEFAULT_MODEL_ID

__all__ = ["FRAME_DEPENDENT", "every_block_workflow"]

LINE = [[320, 0], [320, 480]]
ZONE = [[0, 0], [640, 0], [640, 480], [0, 480]]

FRAME_DEPENDENT = {"op_ExtractFrameMetadata", "op_TimestampToISOFormat", "op_RandomNumber"}
"""Outputs that differ between an HTTP image (frame 0, no fps) and a file's frame."""


def _step(kind: str, name: str, **fields: Any) -> dict[str, Any]:
    return {"type": f"roboflow_core/{kind}", "name": name, **fields}


def _op(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


_TOP_CLASS = [_op("DetectionsSelection", mode="top_confidence"),
              _op("DetectionsPropertyExtract", property_name="class_name"),
              _op("SequenceAggregate", mode="first")]  # fmt: skip
_IS_PERSON = {"type": "StatementGroup", "statements": [{
    "type": "BinaryStatement",
    "left_operand": {"type": "DynamicOperand", "operand_name": "_",
                     "operations": [_op("ExtractDetectionProperty", property_name="class_name")]},
    "comparator": {"type": "=="},
    "right_operand": {"type": "StaticOperand", "value": "person"},
}]}  # fmt: skip

# Each operation of the language on data it takes: (name, data selector, operations).
OPERATIONS: list[tuple[str, str, list[dict[str, Any]]]] = [
    ("StringToLowerCase", "$steps.det2.predictions", [*_TOP_CLASS, _op("StringToLowerCase")]),
    ("StringToUpperCase", "$steps.det2.predictions", [*_TOP_CLASS, _op("StringToUpperCase")]),
    ("StringSubSequence", "$steps.det2.predictions",
     [*_TOP_CLASS, _op("StringSubSequence", start=0, end=2)]),
    ("StringMatches", "$steps.det2.predictions", [*_TOP_CLASS, _op("StringMatches", regex="^p")]),
    ("ToString", "$steps.det2.predictions", [_op("SequenceLength"), _op("ToString")]),
    ("ToNumber", "$steps.det2.predictions",
     [_op("SequenceLength"), _op("ToString"), _op("ToNumber", cast_to="float")]),
    ("ToBoolean", "$steps.det2.predictions", [_op("SequenceLength"), _op("ToBoolean")]),
    ("NumberRound", "$steps.det2.predictions",
     [_op("DetectionsPropertyExtract", property_name="confidence"),
      _op("NumericSequenceAggregate", function="max"), _op("NumberRound", decimal_digits=2)]),
    ("Multiply", "$steps.det2.predictions", [_op("SequenceLength"), _op("Multiply", other=3)]),
    ("Divide", "$steps.det2.predictions", [_op("SequenceLength"), _op("Divide", other=2)]),
    ("RandomNumber", "$steps.det2.predictions", [_op("RandomNumber")]),
    ("LookupTable", "$steps.det2.predictions",
     [*_TOP_CLASS, _op("LookupTable", lookup_table={"person": 1, "dog": 2, "horse": 3})]),
    ("SequenceLength", "$steps.det2.predictions", [_op("SequenceLength")]),
    ("SequenceElementsCount", "$steps.det2.predictions",
     [_op("DetectionsPropertyExtract", property_name="class_name"),
      _op("SequenceElementsCount")]),
    ("SequenceJoin", "$steps.det2.predictions",
     [_op("DetectionsPropertyExtract", property_name="class_name"), _op("SequenceJoin")]),
    ("SequenceMap", "$steps.det2.predictions",
     [_op("DetectionsFilter", filter_operation=_IS_PERSON),
      _op("DetectionsPropertyExtract", property_name="class_name"),
      _op("SequenceMap", lookup_table={"person": "p"})]),
    ("SequenceApply", "$steps.det2.predictions",
     [_op("DetectionsPropertyExtract", property_name="class_name"),
      _op("SequenceApply", operations=[_op("StringToUpperCase")])]),
    ("SequenceAggregate", "$steps.det2.predictions", _TOP_CLASS),
    ("NumericSequenceAggregate", "$steps.det2.predictions",
     [_op("DetectionsPropertyExtract", property_name="size"),
      _op("NumericSequenceAggregate", function="sum", neutral_value=0)]),
    ("DetectionsFilter", "$steps.det2.predictions",
     [_op("DetectionsFilter", filter_operation=_IS_PERSON), _op("SequenceLength")]),
    ("DetectionsSelection", "$steps.det2.predictions",
     [_op("DetectionsSelection", mode="left_most"),
      _op("DetectionsPropertyExtract", property_name="class_name")]),
    ("SortDetections", "$steps.det2.predictions",
     [_op("SortDetections", mode="x_min"),
      _op("DetectionsPropertyExtract", property_name="class_name")]),
    ("DetectionsOffset", "$steps.det2.predictions",
     [_op("DetectionsOffset", offset_x=10, offset_y=10),
      _op("DetectionsPropertyExtract", property_name="x_min")]),
    ("DetectionsShift", "$steps.det2.predictions",
     [_op("DetectionsShift", shift_x=5, shift_y=5),
      _op("DetectionsPropertyExtract", property_name="top_left")]),
    ("DetectionsRename", "$steps.det2.predictions",
     [_op("DetectionsRename", class_map={"person": "human"}, strict=False),
      _op("DetectionsPropertyExtract", property_name="class_name")]),
    ("PickDetectionsByParentClass", "$steps.det2.predictions",
     [_op("PickDetectionsByParentClass", parent_class="person"), _op("SequenceLength")]),
    ("DetectionsPropertyExtract", "$steps.det2.predictions",
     [_op("DetectionsPropertyExtract", property_name="center")]),
    ("DetectionsToDictionary", "$steps.det2.predictions",
     [_op("DetectionsToDictionary"), _op("ConvertDictionaryToJSON"), _op("StringMatches",
                                                                         regex="predictions")]),
    ("ExtractDetectionProperty", "$steps.det2.predictions",
     [_op("DetectionsSelection", mode="first"),
      _op("ExtractDetectionProperty", property_name="class_id")]),
    ("ClassificationPropertyExtract", "$steps.cls2.predictions",
     [_op("ClassificationPropertyExtract", property_name="top_class")]),
    ("ExtractImageProperty", "$inputs.image",
     [_op("ExtractImageProperty", property_name="aspect_ratio")]),
    ("ExtractFrameMetadata", "$inputs.image",
     [_op("ExtractFrameMetadata", property_name="frame_number")]),
    ("TimestampToISOFormat", "$inputs.image",
     [_op("ExtractFrameMetadata", property_name="frame_timestamp"), _op("TimestampToISOFormat")]),
    ("ConvertImageToJPEG", "$inputs.image",
     [_op("ConvertImageToJPEG"), _op("SequenceLength"), _op("ToBoolean")]),
    ("ConvertImageToBase64", "$inputs.image",
     [_op("ConvertImageToBase64"), _op("StringSubSequence", start=0, end=4)]),
    ("ConvertDictionaryToJSON", "$steps.cls2.predictions",
     [_op("ConvertDictionaryToJSON"), _op("StringMatches", regex="top")]),
]  # fmt: skip


def every_block_workflow() -> dict[str, Any]:
    image, detector = "$inputs.image", DEFAULT_MODEL_ID
    steps: list[dict[str, Any]] = [
        _step("roboflow_object_detection_model@v1", "det1", image=image, model_id=detector),
        _step("roboflow_object_detection_model@v2", "det2", images=image, model_id=detector),
        _step("roboflow_object_detection_model@v3", "det3", images=image, model_id=detector,
              confidence_mode="custom", custom_confidence=0.5),
        *(_step(f"roboflow_instance_segmentation_model@v{v}", f"seg{v}", images=image,
                model_id="tiny-seg") for v in (1, 2, 3, 4)),
        *(_step(f"roboflow_keypoint_detection_model@v{v}", f"pose{v}", images=image,
                model_id="tiny-pose") for v in (1, 2, 3)),
        *(_step(f"roboflow_classification_model@v{v}", f"cls{v}", images=image,
                model_id="tiny-cls") for v in (1, 2, 3)),
        *(_step(f"roboflow_multi_label_classification_model@v{v}", f"multi{v}", images=image,
                model_id="tiny-multi") for v in (1, 2, 3)),
        *(_step(f"byte_tracker@v{v}", f"track{v}", detections="$steps.det2.predictions",
                **({"image": image} if v > 1 else {})) for v in (1, 2, 3)),
        *(_step(f"line_counter@v{v}", f"line{v}", detections="$steps.track3.tracked_detections",
                line_segment=LINE) for v in (1, 2)),
        *(_step(f"time_in_zone@v{v}", f"zone{v}", detections="$steps.track3.tracked_detections",
                zone=ZONE, **({"image": image} if v > 1 else {})) for v in (1, 2, 3)),
        *(_step(f"path_deviation_analytics@v{v}", f"path{v}",
                detections="$steps.track3.tracked_detections", reference_path=LINE)
          for v in (1, 2)),
        _step("velocity@v1", "velocity", detections="$steps.track3.tracked_detections"),
        _step("stabilize_detections@v1", "stable",
              detections="$steps.track3.tracked_detections"),
        _step("detections_filter@v1", "people", predictions="$steps.det2.predictions",
              operations=[_op("DetectionsFilter", filter_operation=_IS_PERSON)]),
        _step("continue_if@v1", "gate", condition_statement={"type": "StatementGroup",
              "statements": [{"type": "UnaryStatement", "operator": {"type": "Exists"},
                              "operand": {"type": "DynamicOperand", "operand_name": "n"}}]},
              evaluation_parameters={"n": "$steps.line2.count_in"}, next_steps=["$steps.gated"],
              stop_delay=1),
        _step("property_definition@v1", "gated", data="$steps.people.predictions",
              operations=[_op("SequenceLength")]),
        _step("delta_filter@v1", "changed", value="$steps.line2.count_in",
              next_steps=["$steps.blurred"]),
        _step("image_blur@v1", "blurred", image=image, kernel_size=7),
        _step("rate_limiter@v1", "limited", depends_on="$steps.det2.predictions",
              next_steps=["$steps.pixelated"]),
        _step("pixelate_visualization@v1", "pixelated", image=image,
              predictions="$steps.det2.predictions"),
        _step("data_aggregator@v1", "aggregate", data={"count": "$steps.people.predictions"},
              data_operations={"count": [_op("SequenceLength")]},
              aggregation_mode={"count": ["max", "count"]}, interval=1, interval_unit="runs"),
        _step("bounding_box_visualization@v1", "boxes", image=image,
              predictions="$steps.det2.predictions"),
        *(_step(f"label_visualization@v{v}", f"labels{v}", image="$steps.boxes.image",
                predictions="$steps.det2.predictions") for v in (1, 2)),
        _step("dot_visualization@v1", "dots", image=image, predictions="$steps.det2.predictions"),
        _step("blur_visualization@v1", "blur", image=image, predictions="$steps.det2.predictions"),
        _step("trace_visualization@v1", "trace", image=image,
              predictions="$steps.track3.tracked_detections"),
        _step("heatmap_visualization@v1", "heat", image=image,
              predictions="$steps.track3.tracked_detections"),
        _step("line_counter_visualization@v1", "line_drawn", image=image, zone=LINE,
              count_in="$steps.line2.count_in", count_out="$steps.line2.count_out"),
        _step("polygon_zone_visualization@v1", "zone_drawn", image=image, zone=ZONE),
        _step("mask_visualization@v1", "masks", image=image, predictions="$steps.seg2.predictions"),
        *(_step(f"polygon_visualization@v{v}", f"polygons{v}", image=image,
                predictions="$steps.seg2.predictions") for v in (1, 2)),
        _step("keypoint_visualization@v1", "keypoints", image=image,
              predictions="$steps.pose2.predictions"),
        _step("classification_label_visualization@v1", "class_label", image=image,
              predictions="$steps.cls2.predictions"),
    ]  # fmt: skip
    steps += [
        _step("property_definition@v1", f"op_{name}", data=data, operations=operations)
        for name, data, operations in OPERATIONS
    ]
    outputs = [
        {"type": "JsonField", "name": step["name"], "selector": f"$steps.{step['name']}.*"}
        for step in steps
        if not step["type"].endswith(("continue_if@v1", "delta_filter@v1", "rate_limiter@v1"))
    ]
    return {
        "version": "1.0",
        "inputs": [{"type": "WorkflowImage", "name": "image"}],
        "steps": steps,
        "outputs": outputs,
    }
