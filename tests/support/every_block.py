"""One workflow written as the reference's authors write them, with every block type we
ship and every operation of the query language (a ``property_definition`` step each), for
running the same image over ``/workflows/run`` and over WebRTC and comparing.

Models: the default model, and the suite's constant ``tiny-seg``,
``tiny-pose``, ``tiny-cls`` and ``tiny-multi`` exports (``tests/support/onnx_models.py``)."""

from __future__ import annotations

from typing import Any

from streaming.inference.default_model import DEFAULT_MODEL_ID
from streaming.workflows.blocks.vlm_versions import VERSIONS

CLOUD_TYPE_IDS = [type_id for version in VERSIONS.values() for type_id in version.type_ids]

__all__ = ["ELSEWHERE", "FRAME_DEPENDENT", "every_block_workflow"]

LINE = [[320, 0], [320, 480]]
ZONE = [[0, 0], [640, 0], [640, 480], [0, 480]]

FRAME_DEPENDENT = {
    "op_ExtractFrameMetadata",
    "op_TimestampToISOFormat",
    "op_RandomNumber",
    "csv",
    "as_json",
}
"""Outputs that differ between an HTTP image (frame 0, no fps) and a file's frame, or between
any two runs: the CSV row's timestamp (when it was made), a result as JSON text (its
``inference_id``)."""

ELSEWHERE = {
    "roboflow_core/slack_notification@v1": "tests/unit/test_slack_notification.py::"
    "test_a_message_with_its_parameters_is_posted_then_the_cooldown_holds_the_next",
    "roboflow_core/email_notification@v1": "tests/unit/test_email_notification.py::"
    "test_v1_sends_text_with_its_parameters_to_every_recipient",
    "roboflow_core/email_notification@v2": "tests/unit/test_email_notification.py::"
    "test_v2_custom_smtp_sends_html_with_the_image_inline_and_attached",
    "roboflow_core/webhook_sink@v1": "tests/e2e/test_analytics.py::"
    "test_a_counting_pipeline_posts_one_webhook_per_crossing",
    "visionstream/mqtt_sink@v1": "tests/e2e/test_analytics.py::"
    "test_a_counting_pipeline_keeps_its_counts_retained_on_mqtt",
    "visionstream/event_sink@v1": "tests/e2e/test_analytics.py::"
    "test_a_camera_pipeline_logs_each_crossing_with_evidence_through_a_reconnect",
    "roboflow_core/local_file_sink@v1": "tests/unit/test_two_stage_workflows.py::"
    "test_a_local_file_sink_appends_csv_rows_to_files_inside_its_directory",
    "roboflow_core/environment_secrets_store@v1": "tests/unit/test_two_stage_workflows.py::"
    "test_a_workflow_reads_only_the_secrets_the_server_lends",
    "roboflow_core/ocr_model@v1": "tests/unit/test_ocr.py::test_ocr_model_block_on_the_frame",
    "OCRModel": "tests/unit/test_ocr.py::"
    "test_pp_ocr_refuses_to_do_nothing_and_ocr_ids_resolve_to_ours",
    "roboflow_core/pp_ocr@v1": "tests/unit/test_ocr.py::"
    "test_pp_ocr_without_recognition_finds_where_text_is",
    "roboflow_core/template_matching@v1": "tests/e2e/test_sdk_http.py::"
    "test_run_workflow_with_a_second_image_finds_the_template_in_the_first",
    "roboflow_core/openai_compatible@v1": "tests/unit/test_vlm_blocks.py::"
    "test_the_prompt_goes_with_its_parameters_and_the_image_travels_as_an_image",
    "roboflow_core/vlm_as_classifier@v1": "tests/unit/test_vlm_blocks.py::"
    "test_a_multi_label_answer_lists_each_class_seen",
    "roboflow_core/vlm_as_classifier@v2": "tests/unit/test_vlm_blocks.py::"
    "test_an_answer_becomes_a_classification_however_it_is_wrapped",
    "roboflow_core/vlm_as_detector@v1": "tests/unit/test_vlm_blocks.py::"
    "test_boxes_in_each_convention_come_back_where_the_detector_found_them",
    "roboflow_core/vlm_as_detector@v2": "tests/unit/test_vlm_blocks.py::"
    "test_boxes_in_each_convention_come_back_where_the_detector_found_them",
    **{
        type_id: "tests/unit/test_local_vlm_blocks.py::"
        "test_a_family_answers_through_the_provider_it_is_mapped_to"
        for type_id in (
            "roboflow_core/qwen25vl@v1",
            "roboflow_core/qwen3vl@v1",
            "roboflow_core/qwen3_5vl@v1",
            "roboflow_core/qwen3_5vl@v2",
            "roboflow_core/smolvlm2@v1",
        )
    },
    "roboflow_core/moondream2@v1": "tests/unit/test_local_vlm_blocks.py::"
    "test_moondream_finds_what_its_prompt_names",
    "roboflow_core/florence_2@v1": "tests/unit/test_local_vlm_blocks.py::"
    "test_florence_boxes_read_back_through_vlm_as_detector",
    "roboflow_core/cosmos3_edge@v1": "tests/unit/test_local_vlm_blocks.py::"
    "test_cosmos_answers_its_prompt_with_its_system_prompt",
    "roboflow_core/glm_ocr@v1": "tests/unit/test_local_vlm_blocks.py::"
    "test_glm_ocr_asks_each_task_as_the_reference_does",
    "roboflow_core/florence_2@v2": "tests/unit/test_local_vlm_blocks.py::"
    "test_florence_text_tasks_answer_text_and_need_what_the_reference_needs",
    **{
        type_id: "tests/unit/test_cloud_vlm_blocks.py::"
        "test_every_version_asks_its_cloud_with_the_frame_and_answers_from_it"
        for type_id in CLOUD_TYPE_IDS
    },
    **{
        type_id: "tests/unit/test_cloud_vlm_blocks.py::"
        "test_the_first_lmm_blocks_read_the_fields_their_json_format_names"
        for type_id in ("roboflow_core/open_ai@v1", "OpenAI", "roboflow_core/lmm@v1", "LMM")
    },
    **{
        type_id: "tests/unit/test_cloud_vlm_blocks.py::"
        "test_lmm_for_classification_answers_the_top_class"
        for type_id in ("roboflow_core/lmm_for_classification@v1", "LMMForClassification")
    },
}
"""Block types this workflow leaves out, each with the test that runs it: they reach outside
the stream (a mail, web or MQTT server, a vision-language provider, the server's disk or
environment), need a model the
suite's servers are not given (OCR), or a second image input (a template)."""


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


_ONLY = {"sift_images": "good_matches_count", "stack": "frames_count"}
"""Steps whose outputs are too large to send but one (SIFT's keypoints and descriptors, a
stack's JPEG frames)."""


def _more_steps(image: str) -> list[dict[str, Any]]:
    """The rest of the blocks we ship: image operations, crops and their second stage,
    detections' plumbing, formatters; each reads the photo or the steps above."""
    det, seg = "$steps.det2.predictions", "$steps.seg2.predictions"
    region = {"x_center": 0.5, "y_center": 0.5, "width": 0.5, "height": 0.5}
    return [
        _step(
            "absolute_static_crop@v1",
            "abs_crop",
            images=image,
            x_center=200,
            y_center=150,
            width=120,
            height=100,
        ),
        {
            "type": "AbsoluteStaticCrop",
            "name": "abs_crop_old",
            "images": image,
            "x_center": 200,
            "y_center": 150,
            "width": 120,
            "height": 100,
        },
        _step("relative_static_crop@v1", "rel_crop", images=image, **region),
        {"type": "RelativeStaticCrop", "name": "rel_crop_old", "images": image, **region},
        _step("dynamic_crop@v1", "crop", images=image, predictions=det),
        {"type": "Crop", "name": "crop_old", "image": image, "detections": det},
        {"type": "DynamicCrop", "name": "crop_old2", "images": image, "predictions": det},
        _step(
            "roboflow_classification_model@v2",
            "crop_cls",
            images="$steps.crop.crops",
            model_id="tiny-cls",
        ),
        _step(
            "roboflow_object_detection_model@v2",
            "crop_det",
            images="$steps.crop.crops",
            model_id=DEFAULT_MODEL_ID,
        ),
        _step(
            "detections_classes_replacement@v1",
            "renamed",
            object_detection_predictions=det,
            classification_predictions="$steps.crop_cls.predictions",
        ),
        {
            "type": "DetectionsClassesReplacement",
            "name": "renamed_old",
            "object_detection_predictions": det,
            "classification_predictions": "$steps.crop_cls.predictions",
        },
        _step("dimension_collapse@v1", "collapsed", data="$steps.crop_cls.predictions"),
        {
            "type": "DimensionCollapse",
            "name": "collapsed_old",
            "data": "$steps.crop_cls.predictions",
        },
        _step("dimension_collapse@v1", "crop_dets", data="$steps.crop_det.predictions"),
        _step(
            "detections_list_rollup@v1",
            "rolled",
            parent_detection=det,
            child_detections="$steps.crop_dets.output",
        ),
        {
            "type": "DetectionsListRollUp",
            "name": "rolled_old",
            "parent_detection": det,
            "child_detections": "$steps.crop_dets.output",
        },
        _step("detection_offset@v1", "offset", predictions=det, offset_width=10, offset_height=10),
        {
            "type": "DetectionOffset",
            "name": "offset_old",
            "predictions": det,
            "offset_width": 10,
            "offset_height": 10,
        },
        _step(
            "detections_consensus@v1",
            "consensus",
            predictions_batches=["$steps.det1.predictions", det],
            required_votes=1,
        ),
        {
            "type": "DetectionsConsensus",
            "name": "consensus_old",
            "predictions_batches": ["$steps.det1.predictions", det],
            "required_votes": 1,
        },
        _step(
            "detections_transformation@v1",
            "rightmost",
            predictions=det,
            operations=[
                _op("SortDetections", mode="center_x", ascending=False),
                _op("DetectionsSelection", mode="first"),
            ],
        ),
        {
            "type": "DetectionsTransformation",
            "name": "rightmost_old",
            "predictions": det,
            "operations": [_op("DetectionsSelection", mode="first")],
        },
        _step("dynamic_zone@v1", "dyn_zone", predictions=seg, required_number_of_vertices=4),
        {
            "type": "DynamicZone",
            "name": "dyn_zone_old",
            "predictions": seg,
            "required_number_of_vertices": 4,
        },
        _step(
            "expression@v1",
            "said",
            data={"top": "$steps.cls2.predictions"},
            data_operations={
                "top": [_op("ClassificationPropertyExtract", property_name="top_class")]
            },
            switch={
                "type": "CasesDefinition",
                "cases": [],
                "default": {
                    "type": "DynamicCaseResult",
                    "parameter_name": "top",
                    "operations": [_op("StringToUpperCase")],
                },
            },
        ),
        {
            "type": "Expression",
            "name": "said_old",
            "data": {"n": "$steps.line2.count_in"},
            "switch": {
                "type": "CasesDefinition",
                "cases": [],
                "default": {"type": "StaticCaseResult", "value": "counted"},
            },
        },
        _step("first_non_empty_or_default@v1", "either", data=[det], default="none"),
        {"type": "FirstNonEmptyOrDefault", "name": "either_old", "data": [det], "default": 0},
        _step(
            "perspective_correction@v1",
            "warped",
            images=image,
            predictions=det,
            perspective_polygons=[[[10, 10], [600, 20], [590, 400], [20, 410]]],
            generate_transformed_image=True,
        ),
        {
            "type": "PerspectiveCorrection",
            "name": "warped_old",
            "predictions": det,
            "perspective_polygons": [[[10, 10], [600, 20], [590, 400], [20, 410]]],
        },
        _step(
            "string_template@v1",
            "template",
            template="{n:>3} found in {where}",
            data={"n": det, "where": "the yard"},
            data_operations={"n": [_op("SequenceLength")]},
        ),
        _step("image_stack@v1", "stack", image=image, stack_size=2, resolution_width=320),
        _step("background_subtraction@v1", "background", image=image),
        _step("camera_focus@v1", "focus1", image=image),
        _step("camera_focus@v2", "focus2", image=image, detections=det),
        _step("contrast_enhancement@v1", "contrast", image=image),
        _step("convert_grayscale@v1", "grey", image=image),
        _step("dominant_color@v1", "colour", image=image),
        _step("image_preprocessing@v1", "resized", image=image, task_type="resize", width=320),
        _step("morphological_transformation@v1", "morph1", image=image),
        _step("morphological_transformation@v2", "morph2", image=image),
        _step("motion_detection@v1", "motion", image=image),
        _step("sift@v1", "sift", image=image),
        _step(
            "sift_comparison@v1",
            "sift_same",
            descriptor_1="$steps.sift.descriptors",
            descriptor_2="$steps.sift.descriptors",
        ),
        _step("sift_comparison@v2", "sift_images", input_1=image, input_2="$steps.grey.image"),
        _step("image_slicer@v1", "slices1", image=image, slice_width=320, slice_height=320),
        _step("image_slicer@v2", "slices2", image=image, slice_width=320, slice_height=320),
        _step(
            "roboflow_object_detection_model@v2",
            "slice_det",
            images="$steps.slices2.slices",
            model_id=DEFAULT_MODEL_ID,
        ),
        _step(
            "detections_stitch@v1",
            "stitched",
            reference_image=image,
            predictions="$steps.slice_det.predictions",
            overlap_filtering_strategy="nms",
        ),
        _step(
            "detections_combine@v1",
            "combined",
            prediction_one="$steps.det1.predictions",
            prediction_two=det,
        ),
        _step("detections_merge@v1", "merged", predictions=det),
        _step(
            "csv_formatter@v1",
            "csv",
            columns_data={"count": "$steps.line2.count_in", "top": "$steps.cls2.predictions"},
            columns_operations={
                "top": [_op("ClassificationPropertyExtract", property_name="top_class")]
            },
        ),
        _step(
            "property_definition@v1",
            "as_json",
            data="$steps.cls2.predictions",
            operations=[_op("ConvertDictionaryToJSON")],
        ),
        _step(
            "json_parser@v1",
            "parsed",
            raw_json="$steps.as_json.output",
            expected_fields=["top", "confidence"],
        ),
        _step(
            "model_comparison_visualization@v1",
            "compared",
            image=image,
            predictions_a="$steps.det1.predictions",
            predictions_b=det,
        ),
        *(
            _step(
                f"stitch_ocr_detections@v{v}",
                f"text{v}",
                predictions=det,
                **({"reading_direction": "left_to_right"} if v == 1 else {}),
            )
            for v in (1, 2)
        ),
    ]


def _aliases(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A step of each older name (``ObjectDetectionModel``...) of a block already here,
    copied from the first step of that block: the same fields under the old type."""
    from streaming.workflows.blocks import BLOCKS

    written = {step["type"] for step in steps}
    first: dict[Any, dict[str, Any]] = {}
    for step in steps:
        first.setdefault(BLOCKS[step["type"]], step)
    added = []
    for type_id, cls in sorted(BLOCKS.items()):
        step = first.get(cls)
        if type_id in written or step is None or "next_steps" in step:
            continue
        name = "alias_" + type_id.replace("/", "_").replace("@", "_")
        added.append({**step, "type": type_id, "name": name})
    return added


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
    steps += _more_steps(image)
    steps += [
        {
            "type": "ContinueIf",
            "name": "gate_old",
            "condition_statement": {
                "type": "StatementGroup",
                "statements": [
                    {
                        "type": "UnaryStatement",
                        "operator": {"type": "Exists"},
                        "operand": {"type": "DynamicOperand", "operand_name": "n"},
                    }
                ],
            },
            "evaluation_parameters": {"n": "$steps.line2.count_in"},
            "next_steps": ["$steps.gated_old"],
        },
        _step(
            "property_definition@v1",
            "gated_old",
            data="$steps.people.predictions",
            operations=[_op("SequenceLength")],
        ),
    ]
    steps += _aliases(steps)
    outputs = [
        {
            "type": "JsonField",
            "name": step["name"],
            "selector": f"$steps.{step['name']}.{_ONLY.get(step['name'], '*')}",
        }
        for step in steps
        if step["name"] != "sift"  # its descriptors, too large to serialise, feed sift_same
        if not step["type"].endswith(
            ("continue_if@v1", "delta_filter@v1", "rate_limiter@v1", "ContinueIf")
        )
    ]
    return {
        "version": "1.0",
        "inputs": [{"type": "WorkflowImage", "name": "image"}],
        "steps": steps,
        "outputs": outputs,
    }
